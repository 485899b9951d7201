package sandbox

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// violationSyscalls end the run as a violation: there is no legitimate use for
// them in a submission, and each is a step towards leaving the sandbox or
// attacking the kernel (taking control of other processes, changing mounts
// or namespaces, loading code into the kernel). Reading and writing the
// memory of the program's own processes is not among them: the kernel grants
// it through /proc/PID/mem to every process of the same user, and
// process_vm_readv and process_vm_writev make the same permission check (see
// docs/SANDBOX.md, "One program, one trust domain").
var violationSyscalls = []string{
	"ptrace", "pidfd_getfd", "kcmp",
	"mount", "umount2", "pivot_root", "chroot", "mount_setattr", "move_mount",
	"open_tree", "open_tree_attr", "fsopen", "fsconfig", "fsmount", "fspick",
	"unshare", "setns",
	"kexec_load", "kexec_file_load", "reboot",
	"bpf", "init_module", "finit_module", "delete_module",
	"swapon", "swapoff", "acct",
}

// deniedSyscalls fail with EPERM without ending the run: libraries probe some
// of them, and none of them can do anything useful in the sandbox.
var deniedSyscalls = []string{
	"keyctl", "add_key", "request_key",
	"userfaultfd", "perf_event_open", "fanotify_init",
	"io_uring_setup", "io_uring_enter", "io_uring_register",
	"open_by_handle_at", "name_to_handle_at",
	"quotactl", "quotactl_fd", "syslog", "iopl", "ioperm", "uselib", "vhangup",
	"settimeofday", "clock_settime", "clock_adjtime", "adjtimex",
	"sethostname", "setdomainname", "lookup_dcookie",
}

// nsCloneFlags are the clone flags that create namespaces.
const nsCloneFlags = unix.CLONE_NEWNS | unix.CLONE_NEWCGROUP | unix.CLONE_NEWUTS | unix.CLONE_NEWIPC |
	unix.CLONE_NEWUSER | unix.CLONE_NEWPID | unix.CLONE_NEWNET

// allowedSocketFamilies may be passed to socket(2) and socketpair(2); other
// families fail with EAFNOSUPPORT. The program has no network, and the routes
// it has (the granted socket, local IPC) are Unix sockets, whose buffers are
// charged to the run's memory cgroup. IPv4, IPv6 and netlink sockets are
// refused because their buffers are not reliably charged (TCP memory is
// outside cgroup v1's memory limit; netlink queues are outside either
// version's); AF_VSOCK is not even confined by the network namespace.
var allowedSocketFamilies = []uint64{unix.AF_UNIX}

// inotifySyscalls are refused on kernels that cannot bound inotify inside a
// user namespace.
var inotifySyscalls = []string{"inotify_init", "inotify_init1"}

// encodeFilter returns prog as raw struct sock_filter bytes in the host's
// byte order.
func encodeFilter(prog []unix.SockFilter) []byte {
	out := make([]byte, 0, 8*len(prog))
	for _, f := range prog {
		out = binary.NativeEndian.AppendUint16(out, f.Code)
		out = append(out, f.Jt, f.Jf)
		out = binary.NativeEndian.AppendUint32(out, f.K)
	}
	return out
}

// decodeFilter is the inverse of encodeFilter.
func decodeFilter(b []byte) ([]unix.SockFilter, error) {
	if len(b) == 0 || len(b)%8 != 0 || len(b)/8 > unix.BPF_MAXINSNS {
		return nil, fmt.Errorf("seccomp: filter of %d bytes is not a program of 1 to %d instructions", len(b), unix.BPF_MAXINSNS)
	}
	prog := make([]unix.SockFilter, len(b)/8)
	for i := range prog {
		f := b[8*i:]
		prog[i] = unix.SockFilter{Code: binary.NativeEndian.Uint16(f), Jt: f[2], Jf: f[3], K: binary.NativeEndian.Uint32(f[4:])}
	}
	return prog, nil
}

// kernelRefusesInotify reports whether this kernel lacks per-user-namespace
// inotify limits (before Linux 5.11), so that the filter must refuse inotify
// (see setUserNamespaceLimits).
func kernelRefusesInotify() bool {
	for _, n := range []string{"max_inotify_instances", "max_inotify_watches"} {
		if _, err := os.Stat("/proc/sys/user/" + n); errors.Is(err, os.ErrNotExist) {
			return true
		}
	}
	return false
}

// syscallViolation is how the init records a denied call: by number, which
// the parent names (violationName).
func syscallViolation(nr int32) string { return "syscall " + strconv.Itoa(int(nr)) }

// loadSeccomp installs prog on the calling thread. With notify it returns the
// user-notification listener descriptor, otherwise -1.
func loadSeccomp(prog []unix.SockFilter, notify bool) (int, error) {
	fprog := unix.SockFprog{Len: uint16(len(prog)), Filter: &prog[0]}
	var flags uintptr
	if notify {
		flags = unix.SECCOMP_FILTER_FLAG_NEW_LISTENER
	}
	r, _, e := unix.RawSyscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, flags, uintptr(unsafe.Pointer(&fprog)))
	if e != 0 {
		return -1, fmt.Errorf("seccomp: loading filter: %w", e)
	}
	if !notify {
		return -1, nil
	}
	return int(r), nil
}

// seccompActionAvailable reports whether the kernel supports a filter action.
func seccompActionAvailable(a uint32) bool {
	_, _, e := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_GET_ACTION_AVAIL, 0, uintptr(unsafe.Pointer(&a)))
	return e == 0
}

// seccompNotif and seccompNotifResp mirror struct seccomp_notif and struct
// seccomp_notif_resp of linux/seccomp.h.
type seccompNotif struct {
	ID    uint64
	PID   uint32
	Flags uint32
	Nr    int32
	Arch  uint32
	IP    uint64
	Args  [6]uint64
}

type seccompNotifResp struct {
	ID    uint64
	Val   int64
	Error int32
	Flags uint32
}

// unidentifiedViolation is the name recorded for a denied call whose caller
// was killed (by its own process exiting, say) before the init could read
// which call it was.
const unidentifiedViolation = "unidentified (its caller exited before the call was read)"

// violationRecord keeps the first denied call of a run, preferring a named
// one to an unidentified one.
type violationRecord struct {
	mu   sync.Mutex
	name string
}

func (v *violationRecord) add(name string) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.name == "" || (v.name == unidentifiedViolation && name != unidentifiedViolation) {
		v.name = name
	}
}

func (v *violationRecord) get() string {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.name
}

// serveNotifications answers every notification on listener with EPERM and
// calls onViolation with the system call (syscallViolation). It runs on its own thread,
// whose id it sends on tid first. It returns when the listener fails (the
// init is exiting).
//
// A request whose caller died before it was read (a thread in a denied call
// while another thread exits the process) leaves the listener's request
// count raised with no notification to read: RECV then fails with ENOENT.
// That is a denied call too, reported as unidentifiedViolation. (While the
// filter has users; the init keeps the thread that installed it alive.)
func serveNotifications(listener int, tid chan<- int, onViolation func(name string)) {
	runtime.LockOSThread()
	tid <- unix.Gettid()
	for {
		var n seccompNotif
		_, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(listener), unix.SECCOMP_IOCTL_NOTIF_RECV, uintptr(unsafe.Pointer(&n)))
		if e == unix.EINTR {
			continue
		}
		if e == unix.ENOENT {
			onViolation(unidentifiedViolation)
			continue
		}
		if e != 0 {
			return
		}
		onViolation(syscallViolation(n.Nr))
		resp := seccompNotifResp{ID: n.ID, Error: -int32(unix.EPERM)}
		_, _, e = unix.Syscall(unix.SYS_IOCTL, uintptr(listener), unix.SECCOMP_IOCTL_NOTIF_SEND, uintptr(unsafe.Pointer(&resp)))
		if e != 0 && !errors.Is(e, syscall.ENOENT) {
			return
		}
	}
}

// serverIdleTimeout bounds the wait for the notification server to catch up
// after the program ended.
const serverIdleTimeout = 30 * time.Second

// awaitServerIdle waits until thread tid sleeps in SECCOMP_IOCTL_NOTIF_RECV
// on listener. Called when no process of the program is left, it returns
// once every request they made has been handled: the kernel lets RECV sleep
// only when no request is pending.
func awaitServerIdle(tid, listener int) error {
	want := fmt.Sprintf("%d 0x%x 0x%x ", unix.SYS_IOCTL, listener, uint64(unix.SECCOMP_IOCTL_NOTIF_RECV))
	dir := fmt.Sprintf("/proc/self/task/%d/", tid)
	deadline := time.Now().Add(serverIdleTimeout)
	for {
		stat, err := os.ReadFile(dir + "stat")
		if err != nil {
			return err
		}
		// The state follows the parenthesised command name.
		if i := bytes.LastIndexByte(stat, ')'); i >= 0 && i+2 < len(stat) && stat[i+2] == 'S' {
			sc, err := os.ReadFile(dir + "syscall")
			if err != nil {
				return err
			}
			if strings.HasPrefix(string(sc), want) {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the notification server did not catch up within %v", serverIdleTimeout)
		}
		time.Sleep(100 * time.Microsecond)
	}
}
