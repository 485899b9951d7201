package sandbox

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"
)

// InitIfChild must be the first call in main (and in TestMain of any test
// binary that calls Run or Check). In a process that Run or Check started as
// a sandbox init, it does the init's work and exits the process; everywhere
// else it returns at once without side effects.
//
// Run starts the separate init program (InitMain) where it finds one, and
// otherwise re-executes /proc/self/exe with a marker in the environment, so
// every binary that calls Run must call InitIfChild first.
func InitIfChild() {
	mode, ok := os.LookupEnv(initEnv)
	if !ok {
		return
	}
	initMode(mode)
}

// InitMain is the whole main function of the separate sandbox init program
// (cmd/feval-sandbox-init): it does the init's work and exits. Started by
// anything but Run or Check, it says so and exits with status 2.
func InitMain() {
	mode, ok := os.LookupEnv(initEnv)
	if !ok {
		fmt.Fprintf(os.Stderr, "%s: the sandbox init of feval; feval starts it for each sandboxed run, it is not run by hand\n", InitProgram)
		os.Exit(2)
	}
	initMode(mode)
}

func initMode(mode string) {
	switch mode {
	case "run":
		os.Exit(initRun())
	case "probe":
		os.Exit(initProbe())
	case "exit":
		os.Exit(0)
	default:
		os.Exit(125)
	}
}

// deadlySignals are the signals whose Go runtime handler ends the process
// when they are sent by another process and nobody asked for them (see
// runtime/sigtab_linux_generic.go); for any other signal the handler
// returns. Asking only for these, rather than for every signal, saves a
// round trip to the runtime's signal-mask thread per signal at start-up
// (about half a millisecond).
var deadlySignals = []os.Signal{
	unix.SIGHUP, unix.SIGINT, unix.SIGQUIT, unix.SIGILL, unix.SIGTRAP, unix.SIGABRT,
	unix.SIGBUS, unix.SIGFPE, unix.SIGSEGV, unix.SIGTERM, unix.SIGSTKFLT, unix.SIGSYS,
}

// initRun is the sandbox init: pid 1 of the new pid namespace. It builds the
// root file system, starts the program under its restrictions, reaps every
// process, and reports to the parent.
func initRun() int {
	_ = unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0)
	// Descriptors the caller inherited without close-on-exec (a shell's,
	// a supervisor's) must not reach the program: only 0, 1 and 2 do.
	if err := unix.CloseRange(fdConfig, ^uint(0)>>1, unix.CLOSE_RANGE_CLOEXEC); err != nil {
		ents, _ := os.ReadDir("/proc/self/fd")
		for _, e := range ents {
			if fd, err := strconv.Atoi(e.Name()); err == nil && fd >= fdConfig {
				unix.CloseOnExec(fd)
			}
		}
	}
	status := os.NewFile(fdStatus, "status")
	report := func(ev initEvent) {
		b, _ := json.Marshal(ev)
		_, _ = status.Write(append(b, '\n'))
	}
	fail := func(stage string, err error) int {
		var se *stageError
		if errors.As(err, &se) {
			stage, err = se.stage, se.err
		}
		report(initEvent{Event: evError, Stage: stage, Message: err.Error()})
		return 1
	}

	var cfg initConfig
	cfgFile := os.NewFile(fdConfig, "config")
	b, err := io.ReadAll(cfgFile)
	cfgFile.Close()
	if err != nil {
		return fail("read config", err)
	}
	if err := json.Unmarshal(b, &cfg); err != nil {
		return fail("decode config", err)
	}
	if cfg.Identity != initIdentity() {
		return fail("handshake", ErrStaleInit)
	}
	// Signals from the program must not reach the init's runtime handlers
	// that end the process: relay them to a channel nobody reads. Where the
	// init is root inside (SetUID), the program, of another uid and without
	// capabilities, cannot signal it at all, and the round trips to the
	// runtime's signal thread are saved. Nothing inside the namespaces
	// exists before this point.
	if !cfg.SetUID {
		signal.Notify(make(chan os.Signal, 1), deadlySignals...)
	}
	refuseInotify, err := setUserNamespaceLimits()
	if err != nil {
		return fail("user namespace limits", err)
	}
	if refuseInotify && !cfg.RefuseInotify {
		return fail("seccomp", errors.New("this kernel cannot bound inotify in a user namespace, but the filter does not refuse it"))
	}
	filter, err := decodeFilter(cfg.Filter)
	if err != nil {
		return fail("seccomp", err)
	}
	if err := buildRoot(&cfg); err != nil {
		return fail("build root", err)
	}
	if err := unix.Sethostname([]byte(Hostname)); err != nil {
		return fail("set host name", err)
	}
	if err := loopbackUp(); err != nil {
		return fail("loopback", err)
	}
	prog, err := lookPath(cfg.Args[0], cfg.Env, isExecutable)
	if err != nil {
		return fail("find program", err)
	}
	devnull, err := os.OpenFile("/dev/null", os.O_RDWR, 0)
	if err != nil {
		return fail("open /dev/null", err)
	}
	llFD, llFlags, llABI := -1, uint32(0), 0
	if cfg.Landlock {
		llFD, llFlags, err = landlockRuleset()
		if err != nil {
			return fail("landlock", err)
		}
		llABI = landlockABI()
	}

	ctl := os.NewFile(fdControl, "control")
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return fail("count tasks", err)
	}
	report(initEvent{Event: evReady, Tasks: int64(len(tasks)), Identity: initIdentity()})
	var goByte [1]byte
	if _, err := io.ReadFull(ctl, goByte[:]); err != nil {
		return 1 // the parent gave up
	}

	started := make(chan startResult)
	go func() {
		// This thread takes on the program's restrictions and is never
		// returned to the runtime: it ends with the goroutine, or, once
		// the program has started, with the init.
		runtime.LockOSThread()
		st := startProgram(&cfg, prog, devnull, filter, llFD, llFlags)
		if st.err == nil {
			// The program holds its stdout and stderr; the init must not.
			_ = unix.Close(1)
			_ = unix.Close(fdTargetStderr)
			if cfg.Listen {
				_ = unix.Close(fdListen)
			}
			report(initEvent{Event: evStarted, Landlock: llABI})
		}
		started <- st
		if st.err == nil {
			// The thread stays, holding the filter: while it lives, a
			// denied call whose caller died before the init read it still
			// shows as a pending request on the listener (see
			// serveNotifications), even after the whole program is gone.
			select {}
		}
	}()
	st := <-started
	devnull.Close()
	if st.err != nil {
		return fail(st.stage, st.err)
	}

	var violations violationRecord
	server := make(chan int, 1)
	if st.listener >= 0 {
		go serveNotifications(st.listener, server, func(name string) {
			violations.add(name)
			_ = syscall.Kill(-1, syscall.SIGKILL)
		})
	}

	ev := initEvent{Event: evExited, ExitCode: -1}
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, 0, nil)
		if errors.Is(err, syscall.EINTR) {
			continue
		}
		if err != nil {
			break // ECHILD: everyone is reaped
		}
		if ws.Signaled() && ws.Signal() == syscall.SIGSYS {
			ev.Sigsys = true
		}
		if pid == st.pid {
			if ws.Exited() {
				ev.ExitCode = ws.ExitStatus()
			} else if ws.Signaled() {
				ev.Signal = int(ws.Signal())
			}
			// The program's end is the sandbox's end.
			_ = syscall.Kill(-1, syscall.SIGKILL)
		}
	}
	if st.listener >= 0 {
		// Every process of the program is gone: once the server is back
		// waiting for a request, it has handled every denied call made.
		// Reading its state needs the init's /proc files to be its own,
		// which they are only while it is dumpable; with nothing left in
		// the namespace, nothing can take advantage.
		_ = unix.Prctl(unix.PR_SET_DUMPABLE, 1, 0, 0, 0)
		if err := awaitServerIdle(<-server, st.listener); err != nil {
			return fail("seccomp notifications", err)
		}
	}
	ev.Violation = violations.get()
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_CHILDREN, &ru); err == nil {
		ev.UserMicros = ru.Utime.Sec*1e6 + ru.Utime.Usec
		ev.SysMicros = ru.Stime.Sec*1e6 + ru.Stime.Usec
		ev.MaxRSSKiB = ru.Maxrss
	}
	report(ev)
	// Stay alive, keeping /out reachable, until the parent has copied it.
	_, _ = io.Copy(io.Discard, ctl)
	return 0
}

type startResult struct {
	pid      int
	listener int
	stage    string
	err      error
}

// startProgram runs on a locked thread that it restricts before forking the
// program, which inherits every restriction: no capabilities, rlimits,
// no_new_privs, Landlock, seccomp.
func startProgram(cfg *initConfig, prog string, devnull *os.File, filter []unix.SockFilter, llFD int, llFlags uint32) startResult {
	bad := func(stage string, err error) startResult { return startResult{stage: stage, err: err, listener: -1} }
	// Ambient capabilities would survive exec; the bounding set is dropped so
	// that nothing the program executes can gain a capability.
	if err := unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0); err != nil {
		return bad("clear ambient capabilities", err)
	}
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var caps [2]unix.CapUserData
	if err := unix.Capget(&hdr, &caps[0]); err != nil {
		return bad("read capabilities", err)
	}
	caps[0].Inheritable, caps[1].Inheritable = 0, 0
	if err := unix.Capset(&hdr, &caps[0]); err != nil {
		return bad("clear inheritable capabilities", err)
	}
	for c := 0; c < 64; c++ {
		if err := unix.Prctl(unix.PR_CAPBSET_DROP, uintptr(c), 0, 0, 0); err != nil && !errors.Is(err, unix.EINVAL) {
			return bad("drop capability bounding set", err)
		}
	}
	limits := []struct {
		res      int
		cur, max uint64
	}{
		{unix.RLIMIT_NOFILE, uint64(cfg.OpenFiles), uint64(cfg.OpenFiles)},
		{unix.RLIMIT_CORE, 0, 0},
		// Counted per user, and charged to the host user too: POSIX
		// message queues are refused, queued signals and POSIX timers
		// bounded.
		{unix.RLIMIT_MSGQUEUE, 0, 0},
		{unix.RLIMIT_SIGPENDING, MaxPendingSignals, MaxPendingSignals},
	}
	if cfg.CPUMillis != NoLimit {
		// A backstop behind the cgroup's accounting: no single process
		// can use much more than the whole tree may.
		secs := uint64(cfg.CPUMillis+999)/1000 + 1
		limits = append(limits, struct {
			res      int
			cur, max uint64
		}{unix.RLIMIT_CPU, secs, secs + 1})
	}
	for _, l := range limits {
		// syscall.Setrlimit, unlike a raw call, also stops ForkExec from
		// restoring the runtime's original RLIMIT_NOFILE in the child.
		if err := syscall.Setrlimit(l.res, &syscall.Rlimit{Cur: l.cur, Max: l.max}); err != nil {
			return bad(fmt.Sprintf("set rlimit %d", l.res), err)
		}
	}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return bad("set no_new_privs", err)
	}
	if llFD >= 0 {
		if err := landlockRestrict(llFD, llFlags); err != nil {
			return bad("landlock", err)
		}
		_ = unix.Close(llFD)
	}
	listener, err := loadSeccomp(filter, cfg.Notify)
	if err != nil {
		return bad("seccomp", err)
	}
	attr := &syscall.ProcAttr{
		Dir:   cfg.Dir,
		Env:   cfg.Env,
		Files: []uintptr{devnull.Fd(), 1, fdTargetStderr},
		Sys:   &syscall.SysProcAttr{Setsid: true},
	}
	if cfg.Listen {
		attr.Files = append(attr.Files, fdListen) // becomes ListenFD
	}
	if cfg.SetUID {
		attr.Sys.Credential = &syscall.Credential{Uid: UID, Gid: GID, Groups: []uint32{}}
	}
	argv := append([]string{cfg.Args[0]}, cfg.Args[1:]...)
	pid, err := syscall.ForkExec(prog, argv, attr)
	if err != nil {
		return startResult{stage: "start program", err: err, listener: listener}
	}
	return startResult{pid: pid, listener: listener}
}

// userNamespaceLimits are written to /proc/sys/user in the sandbox's user
// namespace. The kernel charges what the program holds against these and,
// level by level, against the host user's own limits, so a run can take at
// most this much of the host user's allowance. Namespace creation is denied
// by the filter anyway; zero makes sure.
var userNamespaceLimits = []struct {
	name string
	v    int
}{
	{"max_inotify_instances", MaxInotifyInstances},
	{"max_inotify_watches", MaxInotifyWatches},
	{"max_fanotify_groups", 0},
	{"max_fanotify_marks", 0},
	{"max_cgroup_namespaces", 0},
	{"max_ipc_namespaces", 0},
	{"max_mnt_namespaces", 0},
	{"max_net_namespaces", 0},
	{"max_pid_namespaces", 0},
	{"max_time_namespaces", 0},
	{"max_user_namespaces", 0},
	{"max_uts_namespaces", 0},
}

// setUserNamespaceLimits writes userNamespaceLimits for the init's user
// namespace. A kernel without per-namespace inotify limits (before Linux
// 5.11) counts inotify against the host user alone: then refuseInotify is
// true and the filter refuses inotify instead.
func setUserNamespaceLimits() (refuseInotify bool, err error) {
	for _, l := range userNamespaceLimits {
		p := "/proc/sys/user/" + l.name
		if _, err := os.Stat(p); errors.Is(err, os.ErrNotExist) {
			if l.name == "max_inotify_instances" || l.name == "max_inotify_watches" {
				refuseInotify = true
			}
			continue
		}
		if err := os.WriteFile(p, []byte(strconv.Itoa(l.v)), 0); err != nil {
			return false, err
		}
	}
	return refuseInotify, nil
}

func isExecutable(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0
}

// initProbe checks, inside fresh namespaces, the steps Run needs that a
// clone alone does not prove. It prints a JSON object of step -> error
// ("" when the step worked) on stdout.
func initProbe() int {
	runtime.LockOSThread()
	res := map[string]string{}
	note := func(step string, err error) bool {
		res[step] = ""
		if err != nil {
			res[step] = err.Error()
		}
		return err == nil
	}
	if note("mount", unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, "")) {
		dir, err := os.MkdirTemp("", "feval-sandbox-probe-")
		if note("tmpfs", err) {
			if note("tmpfs", unix.Mount("tmpfs", dir, "tmpfs", 0, "size=64k")) {
				p := dir + "/proc"
				if note("proc", os.Mkdir(p, 0o755)) {
					note("proc", unix.Mount("proc", p, "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""))
				}
			}
			_ = unix.Unmount(dir, unix.MNT_DETACH)
			_ = os.Remove(dir)
		}
	}
	note("loopback", loopbackUp())
	b, _ := json.Marshal(res)
	_, _ = os.Stdout.Write(b)
	return 0
}
