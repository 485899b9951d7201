//go:build linux

// Command syscallprobe makes the system calls named on its command line with
// harmless arguments and prints one line per call: "NAME: ok" or
// "NAME: <error>". Arguments prefixed "child:" are made by a child process
// started for the purpose, to show that the filter reaches grandchildren.
// The commands of attacks (attacks.go) print their own results.
package main

import (
	"fmt"
	"os"
	"strings"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

func str(s string) uintptr {
	p, _ := unix.BytePtrFromString(s)
	return uintptr(unsafe.Pointer(p))
}

var calls = map[string]func() error{
	"ptrace":           func() error { return raw(unix.SYS_PTRACE, ^uintptr(0), 0, 0) },
	"process_vm_readv": func() error { return raw(unix.SYS_PROCESS_VM_READV, 0, 0, 0) },
	"mount":            func() error { return raw(unix.SYS_MOUNT, str("none"), str("/tmp"), str("tmpfs")) },
	"umount2":          func() error { return raw(unix.SYS_UMOUNT2, str("/nonexistent"), 0, 0) },
	"pivot_root":       func() error { return raw(unix.SYS_PIVOT_ROOT, str("/nonexistent"), str("/nonexistent"), 0) },
	"chroot":           func() error { return raw(unix.SYS_CHROOT, str("/nonexistent"), 0, 0) },
	"unshare":          func() error { return raw(unix.SYS_UNSHARE, 0, 0, 0) },
	"setns":            func() error { return raw(unix.SYS_SETNS, ^uintptr(0), 0, 0) },
	"kexec_load":       func() error { return raw(unix.SYS_KEXEC_LOAD, 0, 0, 0) },
	"bpf":              func() error { return raw(unix.SYS_BPF, ^uintptr(0), 0, 0) },
	"init_module":      func() error { return raw(unix.SYS_INIT_MODULE, 0, 0, str("")) },
	"finit_module":     func() error { return raw(unix.SYS_FINIT_MODULE, ^uintptr(0), str(""), 0) },
	"delete_module":    func() error { return raw(unix.SYS_DELETE_MODULE, str("feval_nonexistent"), 0, 0) },
	"reboot":           func() error { return raw(unix.SYS_REBOOT, 0, 0, 0) },
	"swapon":           func() error { return raw(unix.SYS_SWAPON, str("/nonexistent"), 0, 0) },
	"clone-newuser": func() error {
		_, err := syscall.ForkExec("/bin/true", []string{"true"}, &syscall.ProcAttr{
			Sys: &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWUSER},
		})
		return err
	},
	"keyctl":          func() error { return raw(unix.SYS_KEYCTL, unix.KEYCTL_GET_KEYRING_ID, ^uintptr(2), 0) },
	"perf_event_open": func() error { return raw(unix.SYS_PERF_EVENT_OPEN, 0, 0, 0) },
	"io_uring_setup":  func() error { return raw(unix.SYS_IO_URING_SETUP, 1, 0, 0) },
	"clone3":          func() error { return raw(unix.SYS_CLONE3, 0, 0, 0) },
	"socket-vsock": func() error {
		fd, err := unix.Socket(unix.AF_VSOCK, unix.SOCK_STREAM, 0)
		if err == nil {
			unix.Close(fd)
		}
		return err
	},
	"socket-inet":    func() error { return socket(unix.AF_INET, unix.SOCK_STREAM) },
	"socket-inet6":   func() error { return socket(unix.AF_INET6, unix.SOCK_STREAM) },
	"socket-netlink": func() error { return socket(unix.AF_NETLINK, unix.SOCK_RAW) },
	"socket-unix":    func() error { return socket(unix.AF_UNIX, unix.SOCK_STREAM) },
	"socketpair-inet": func() error {
		fds, err := unix.Socketpair(unix.AF_INET, unix.SOCK_STREAM, 0)
		if err == nil {
			unix.Close(fds[0])
			unix.Close(fds[1])
		}
		return err
	},
	"socketpair-unix": func() error {
		fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM, 0)
		if err == nil {
			unix.Close(fds[0])
			unix.Close(fds[1])
		}
		return err
	},
}

func socket(family, typ int) error {
	fd, err := unix.Socket(family, typ, 0)
	if err == nil {
		unix.Close(fd)
	}
	return err
}

func raw(nr, a1, a2, a3 uintptr) error {
	_, _, e := unix.Syscall(nr, a1, a2, a3)
	if e != 0 {
		return e
	}
	return nil
}

func main() {
	for _, name := range os.Args[1:] {
		if rest, ok := strings.CutPrefix(name, "child:"); ok {
			exe, _ := os.Executable()
			p, err := os.StartProcess(exe, []string{exe, rest}, &os.ProcAttr{Files: []*os.File{nil, os.Stdout, os.Stderr}})
			if err != nil {
				fmt.Printf("%s: start child: %v\n", name, err)
				continue
			}
			st, _ := p.Wait()
			fmt.Printf("%s: child %v\n", name, st)
			continue
		}
		if a, ok := attacks[name]; ok {
			a()
			continue
		}
		f, ok := calls[name]
		if !ok {
			fmt.Printf("%s: unknown\n", name)
			os.Exit(2)
		}
		if err := f(); err != nil {
			fmt.Printf("%s: %v\n", name, err)
		} else {
			fmt.Printf("%s: ok\n", name)
		}
	}
}
