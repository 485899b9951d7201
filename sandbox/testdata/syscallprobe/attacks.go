//go:build linux

package main

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// attacks are the commands that print their own result. Each is bounded: it
// stops at countCap or after a few seconds, so that a failing guarantee does
// not take the host's whole share with it.
var attacks = map[string]func(){
	"count:inotify":  countInotify,
	"count:watches":  countWatches,
	"count:timers":   countTimers,
	"count:mqueues":  countMqueues,
	"race:ptrace":    racePtrace,
	"sibling-memory": siblingMemory,
	"memtarget":      memTarget,
	"pingpong":       pingPong,
}

// countCap bounds every counting loop.
const countCap = 2048

// countInotify opens inotify instances until the kernel refuses one.
func countInotify() {
	n := 0
	var err error
	for n < countCap {
		if _, err = unix.InotifyInit1(unix.IN_CLOEXEC); err != nil {
			break
		}
		n++
	}
	fmt.Printf("inotify instances: %d (%v)\n", n, err)
}

// countWatches adds inotify watches on distinct directories until the kernel
// refuses one (or the directories run out).
func countWatches() {
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC)
	if err != nil {
		fmt.Printf("inotify watches: 0 (%v)\n", err)
		return
	}
	n := 0
	limit := 4*countCap + 1024
	_ = filepath.WalkDir("/usr", func(p string, d os.DirEntry, werr error) error {
		if werr != nil || !d.IsDir() {
			return nil
		}
		if _, err = unix.InotifyAddWatch(fd, p, unix.IN_CREATE); err != nil {
			return filepath.SkipAll
		}
		if n++; n >= limit {
			return filepath.SkipAll
		}
		return nil
	})
	fmt.Printf("inotify watches: %d (%v)\n", n, err)
}

// countTimers creates POSIX timers until the kernel refuses one.
func countTimers() {
	n := 0
	var errno unix.Errno
	for n < countCap {
		var id int32
		_, _, errno = unix.Syscall(unix.SYS_TIMER_CREATE, unix.CLOCK_MONOTONIC, 0, uintptr(unsafe.Pointer(&id)))
		if errno != 0 {
			break
		}
		n++
	}
	fmt.Printf("posix timers: %d (%v)\n", n, errno)
}

// countMqueues creates small POSIX message queues until the kernel refuses one.
func countMqueues() {
	n := 0
	var errno unix.Errno
	for n < countCap {
		name, _ := unix.BytePtrFromString(fmt.Sprintf("feval-probe-%d", n))
		attr := [8]int64{0, 1, 1} // struct mq_attr: flags, maxmsg, msgsize, …
		fd, _, e := unix.Syscall6(unix.SYS_MQ_OPEN, uintptr(unsafe.Pointer(name)), unix.O_CREAT|unix.O_RDWR|unix.O_CLOEXEC, 0o600, uintptr(unsafe.Pointer(&attr)), 0, 0)
		if e != 0 {
			errno = e
			break
		}
		_ = fd
		n++
	}
	fmt.Printf("message queues: %d (%v)\n", n, errno)
}

// racePtrace makes a denied call on one thread and exits the process from
// another as soon as that call is waiting for the sandbox's answer.
func racePtrace() {
	tid := make(chan int)
	go func() {
		runtime.LockOSThread()
		tid <- unix.Gettid()
		unix.Syscall(unix.SYS_PTRACE, ^uintptr(0), 0, 0)
	}()
	waiting := fmt.Sprintf("%d ", unix.SYS_PTRACE)
	p := fmt.Sprintf("/proc/self/task/%d/syscall", <-tid)
	for deadline := time.Now().Add(2 * time.Second); time.Now().Before(deadline); {
		if b, err := os.ReadFile(p); err == nil && strings.HasPrefix(string(b), waiting) {
			break
		}
	}
	os.Exit(0)
}

var target = [64]byte{'f', 'e', 'v', 'a', 'l', '-', 'm', 'a', 'r', 'k', 'e', 'r'}

// memTarget prints the address of a marker in its memory and waits.
func memTarget() {
	fmt.Printf("%d\n", uintptr(unsafe.Pointer(&target[0])))
	time.Sleep(10 * time.Second)
}

// siblingMemory starts a sibling (memtarget) and reads its marker through
// /proc/PID/mem and through process_vm_readv, then tries the same on the
// sandbox's init (pid 1).
func siblingMemory() {
	exe, _ := os.Executable()
	r, w, _ := os.Pipe()
	p, err := os.StartProcess(exe, []string{exe, "memtarget"}, &os.ProcAttr{Files: []*os.File{nil, w, os.Stderr}})
	if err != nil {
		fmt.Println("start sibling:", err)
		return
	}
	w.Close()
	line, _ := bufio.NewReader(r).ReadString('\n')
	addr, _ := strconv.ParseUint(strings.TrimSpace(line), 10, 64)
	defer p.Kill()
	for _, pid := range []int{p.Pid, 1} {
		who := "sibling"
		if pid == 1 {
			who = "init"
		}
		buf := make([]byte, 12)
		f, err := os.Open(fmt.Sprintf("/proc/%d/mem", pid))
		if err == nil {
			_, err = f.ReadAt(buf, int64(addr))
			f.Close()
		}
		fmt.Printf("%s /proc/PID/mem: %s\n", who, memResult(buf, err))
		buf = make([]byte, 12)
		local := []unix.Iovec{{Base: &buf[0], Len: uint64(len(buf))}}
		remote := []unix.RemoteIovec{{Base: uintptr(addr), Len: len(buf)}}
		_, err = unix.ProcessVMReadv(pid, local, remote, 0)
		fmt.Printf("%s process_vm_readv: %s\n", who, memResult(buf, err))
	}
}

func memResult(buf []byte, err error) string {
	switch {
	case err != nil:
		return "refused"
	case bytes.Equal(buf, target[:12]):
		return "read"
	default:
		return "other"
	}
}

// pingPong saturates every core with pairs of threads passing a byte back and
// forth through pipes, the load that starves a supervisor's timers.
func pingPong() {
	const pairs = 100
	for i := 0; i < pairs; i++ {
		var a, b [2]int
		_ = unix.Pipe2(a[:], unix.O_CLOEXEC)
		_ = unix.Pipe2(b[:], unix.O_CLOEXEC)
		go func() {
			runtime.LockOSThread()
			buf := []byte{1}
			for {
				unix.Write(a[1], buf)
				unix.Read(b[0], buf)
			}
		}()
		go func() {
			runtime.LockOSThread()
			buf := []byte{0}
			for {
				unix.Read(a[0], buf)
				unix.Write(b[1], buf)
			}
		}()
	}
	// And one spinner per core besides.
	for i := 0; i < runtime.NumCPU(); i++ {
		go func() {
			for {
			}
		}()
	}
	select {}
}
