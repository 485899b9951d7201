package sandbox

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// setupTimeout bounds the time from starting the init to the program's start.
const setupTimeout = 30 * time.Second

// pollInterval is how often the parent reads the cgroup counters that end a
// run early (CPU time, refused forks).
const pollInterval = 10 * time.Millisecond

// namespaceFlags are the namespaces every sandbox gets.
const namespaceFlags = syscall.CLONE_NEWUSER | syscall.CLONE_NEWNS | syscall.CLONE_NEWPID |
	syscall.CLONE_NEWNET | syscall.CLONE_NEWIPC | syscall.CLONE_NEWUTS | syscall.CLONE_NEWCGROUP

// Run runs spec.Args under isolation and reports what happened. Zero limits
// take their defaults (see Spec.WithDefaults); the effective limits are in the
// Result.
//
// The error is nil whenever the program ran, whatever it did; the program's
// behaviour is in Result.Class. A non-nil error always comes with
// Class == ClassInfraError: the Spec is invalid (ErrInvalidSpec), a
// guarantee cannot be provided on this host (*UnavailableError), the sandbox
// failed (*SetupError), or ctx ended (the error wraps ctx.Err()). When ctx
// ends, the whole process tree is killed before Run returns.
//
// Run starts the sandbox init program (see initPath) where there is one, and
// otherwise re-executes /proc/self/exe as the init: the binary must call
// InitIfChild first thing in main.
func Run(ctx context.Context, spec Spec) (Result, error) {
	spec = spec.WithDefaults()
	res := Result{Class: ClassInfraError, ExitCode: -1, Limits: spec.Limits, Mechanisms: []string{}}
	if err := spec.Validate(); err != nil {
		res.Detail = err.Error()
		return res, err
	}
	if spec.Unsandboxed {
		return runUnsandboxed(ctx, spec, res)
	}
	r := &runner{spec: spec, res: res}
	err := r.run(ctx)
	if err != nil {
		r.res.Class = ClassInfraError
		r.res.Detail = err.Error()
	}
	r.res.Mechanisms = sortedUnique(r.res.Mechanisms)
	return r.res, err
}

type runner struct {
	spec Spec
	res  Result

	cmd       *exec.Cmd
	cg        *runCgroup
	cgAwaited bool
	cgErr     error
	initPID   int
	// cpu0 is the run's CPU counter when the program started.
	cpu0 int64
}

// config checks the spec's paths and the kernel's seccomp support and
// returns the init's configuration, but for what run adds as it starts it.
func (r *runner) config() (cfg initConfig, err error) {
	spec := r.spec
	cfg = initConfig{
		Args:        spec.Args,
		Env:         spec.Env,
		Dir:         spec.Dir,
		Socket:      spec.Socket,
		TmpBytes:    spec.Limits.TmpBytes,
		OutputBytes: spec.Limits.OutputBytes,
		OutputFiles: spec.Limits.OutputFiles,
		OpenFiles:   spec.Limits.OpenFiles,
		CPUMillis:   spec.Limits.CPUMillis,
	}
	for _, m := range spec.Inputs {
		fi, err := os.Stat(m.Source)
		if err != nil {
			return cfg, &SetupError{Stage: "input " + m.Target, Err: err}
		}
		cfg.Inputs = append(cfg.Inputs, initMount{Source: m.Source, Target: m.Target, Dir: fi.IsDir()})
	}
	if spec.OutputDir != "" {
		fi, err := os.Stat(spec.OutputDir)
		if err == nil && !fi.IsDir() {
			err = fmt.Errorf("%s is not a directory", spec.OutputDir)
		}
		if err != nil {
			return cfg, &SetupError{Stage: "output directory", Err: err}
		}
	}
	if spec.Socket != "" {
		fi, err := os.Stat(spec.Socket)
		if err == nil && fi.Mode()&fs.ModeSocket == 0 {
			err = fmt.Errorf("%s is not a socket", spec.Socket)
		}
		if err != nil {
			return cfg, &SetupError{Stage: "socket", Err: err}
		}
	}

	if !seccompActionAvailable(unix.SECCOMP_RET_KILL_PROCESS) {
		return cfg, &UnavailableError{Guarantee: GuaranteeSyscallFilter, Mechanism: "seccomp filter"}
	}
	cfg.Notify = seccompActionAvailable(unix.SECCOMP_RET_USER_NOTIF)
	if cfg.Notify {
		r.res.Mechanisms = append(r.res.Mechanisms, "seccomp-user-notify")
	} else {
		r.res.Mechanisms = append(r.res.Mechanisms, "seccomp-kill")
	}
	cfg.RefuseInotify = kernelRefusesInotify()
	if cfg.Filter, err = programFilter(cfg.Notify, cfg.RefuseInotify); err != nil {
		return cfg, &SetupError{Stage: "seccomp", Err: err}
	}
	cfg.Identity = initIdentity()
	cfg.Landlock = landlockABI() > 0
	return cfg, nil
}

func (r *runner) run(ctx context.Context) (err error) {
	spec := r.spec
	cfg, err := r.config()
	if err != nil {
		return err
	}
	initProg, err := initPath()
	if err != nil {
		return &SetupError{Stage: "find sandbox init", Err: err}
	}

	// The run's cgroups are made while the init starts up, which joins
	// them only when it is ready; r.cg is used only after awaitCgroup.
	cgDone := make(chan error, 1)
	go func() {
		l, fresh := runLayout()
		cg, err := newRunCgroup(l, spec.Limits)
		if err != nil && !fresh {
			forgetLayout()
			l, _ = runLayout()
			cg, err = newRunCgroup(l, spec.Limits)
		}
		r.cg = cg
		cgDone <- err
	}()
	defer func() {
		if r.awaitCgroup(cgDone) != nil {
			return
		}
		if rerr := r.cg.remove(); rerr != nil && err == nil {
			err = &SetupError{Stage: "remove cgroup", Err: rerr}
		}
	}()

	var listen *os.File
	if spec.Listen != "" {
		listen, err = listenUnix(spec.Listen)
		if err != nil {
			return &SetupError{Stage: "listen", Err: err}
		}
		defer os.Remove(spec.Listen)
		defer listen.Close()
		cfg.Listen = true
	}

	cfg.RootDir, err = os.MkdirTemp("", runDirPrefix()+"root-")
	if err != nil {
		return &SetupError{Stage: "create root mount point", Err: err}
	}
	defer os.Remove(cfg.RootDir)

	var p pipes
	if err := p.open(); err != nil {
		return &SetupError{Stage: "create pipes", Err: err}
	}
	defer p.closeAll()

	cmd := &exec.Cmd{
		Path:       initProg,
		Args:       []string{InitProgram},
		Env:        []string{initEnv + "=run", "GOMAXPROCS=1"},
		Stdout:     p.stdoutW,
		Stderr:     p.initErrW,
		ExtraFiles: []*os.File{p.configR, p.statusW, p.controlR, p.stderrW},
		SysProcAttr: &syscall.SysProcAttr{
			Cloneflags: namespaceFlags,
			Pdeathsig:  syscall.SIGKILL,
		},
	}
	if listen != nil {
		cmd.ExtraFiles = append(cmd.ExtraFiles, listen) // fdListen
	}
	cfg.SetUID = setIDMappings(cmd.SysProcAttr)
	// The config fits in the pipe's buffer: the init finds it waiting.
	b, _ := json.Marshal(cfg)
	if _, err := p.configW.Write(b); err != nil {
		return &SetupError{Stage: "send config", Err: err}
	}
	p.configW.Close()
	p.configW = nil
	// Pdeathsig follows the thread that started the child: keep it alive.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := cmd.Start(); err != nil {
		return startError(err)
	}
	r.cmd = cmd
	r.initPID = cmd.Process.Pid
	r.res.Mechanisms = append(r.res.Mechanisms, "user-namespace", "mount-namespace", "pid-namespace",
		"network-namespace", "ipc-namespace", "uts-namespace", "cgroup-namespace",
		"pivot-root", "no-new-privs", "rlimit-nofile", "capabilities-dropped",
		"user-namespace-limits", "unix-sockets-only", "read-only-devices")
	if len(spec.Inputs) > 0 {
		r.res.Mechanisms = append(r.res.Mechanisms, "overlay-inputs")
	}
	if spec.Limits.CPUMillis != NoLimit {
		r.res.Mechanisms = append(r.res.Mechanisms, "rlimit-cpu")
	}
	p.closeChildEnds()
	killed := false
	defer func() {
		if !killed {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	}()

	events := make(chan initEvent, 16)
	go readEvents(p.statusR, events)
	stdout := &capture{max: spec.Limits.StdoutBytes}
	stderr := &capture{max: spec.Limits.StderrBytes}
	initErr := &capture{max: 64 << 10}
	drained := make(chan struct{}, 3)
	for _, c := range []struct {
		c *capture
		r io.Reader
	}{{stdout, p.stdoutR}, {stderr, p.stderrR}, {initErr, p.initErrR}} {
		go func() {
			_ = c.c.drain(c.r)
			drained <- struct{}{}
		}()
	}

	var (
		o        outcome
		counters *cgroupCounters
		exited   *initEvent
		setupErr error
		start    time.Time
		end      time.Time
		cpu0     int64
		wall     *time.Timer
		wallC    <-chan time.Time
		tick     *time.Ticker
		tickC    <-chan time.Time
	)
	setup := time.NewTimer(setupTimeout)
	defer setup.Stop()
	kill := func() {
		if !killed {
			_ = cmd.Process.Kill()
			killed = true
		}
	}
loop:
	for {
		select {
		case ev, ok := <-events:
			if !ok {
				break loop
			}
			switch ev.Event {
			case evReady:
				if err := r.awaitCgroup(cgDone); err != nil {
					setupErr = err
					kill()
					continue
				}
				if ev.Identity != cfg.Identity {
					setupErr = &SetupError{Stage: "handshake", Err: staleInitError(initProg)}
					kill()
					continue
				}
				// The program is forked from the init, so it starts in
				// the run's cgroups; the init waits for the go byte
				// before forking. Its own start-up ran outside them, at
				// the host's CPU share rather than the run's.
				if err := r.cg.addProcess(r.initPID); err != nil {
					setupErr = &SetupError{Stage: "add init to cgroup", Err: err}
					kill()
					continue
				}
				lim := spec.Limits.Processes
				if lim != NoLimit {
					lim += ev.Tasks + initTaskSlack
				}
				if err := r.cg.setPids(lim); err != nil {
					setupErr = &SetupError{Stage: "set process limit", Err: err}
					kill()
					continue
				}
				if _, err := p.controlW.Write([]byte{'g'}); err != nil {
					setupErr = &SetupError{Stage: "start program", Err: err}
					kill()
				}
			case evStarted:
				setup.Stop()
				start = time.Now()
				// From now on the run's cgroups hold only the program.
				if err := r.cg.moveOut(r.initPID); err != nil {
					setupErr = &SetupError{Stage: "move init out of the run's cgroup", Err: err}
					kill()
					continue
				}
				if err := r.cg.setPids(spec.Limits.Processes); err != nil {
					setupErr = &SetupError{Stage: "set process limit", Err: err}
					kill()
					continue
				}
				cpu0 = r.cg.cpuNanos()
				r.cpu0 = cpu0
				if ev.Landlock > 0 {
					r.res.Mechanisms = append(r.res.Mechanisms, "landlock-abi-"+strconv.Itoa(ev.Landlock))
				}
				wall = time.NewTimer(time.Duration(spec.Limits.WallMillis) * time.Millisecond)
				defer wall.Stop()
				wallC = wall.C
				if _, ok := r.cg.dirs[ctlPids]; ok || spec.Limits.CPUMillis != NoLimit {
					tick = time.NewTicker(pollInterval)
					defer tick.Stop()
					tickC = tick.C
				}
			case evExited:
				end = time.Now()
				ev.Violation = violationName(ev.Violation)
				e := ev
				exited = &e
				if err := r.finish(ctx, &o, e); err != nil {
					setupErr = err
				}
				p.controlW.Close()
				p.controlW = nil
				// The program's processes are all gone: read the
				// cgroups' counters and remove them while the init
				// exits.
				counters = r.cg.counters()
				if err := r.cg.remove(); err != nil && setupErr == nil {
					setupErr = &SetupError{Stage: "remove cgroup", Err: err}
				}
			case evError:
				setupErr = &SetupError{Stage: ev.Stage, Err: errors.New(ev.Message)}
				if ev.Stage == "handshake" {
					setupErr = &SetupError{Stage: ev.Stage, Err: staleInitError(initProg)}
				}
			}
		case <-setup.C:
			setupErr = &SetupError{Stage: "start", Err: fmt.Errorf("the sandbox init %s did not start the program within %v (is it feval-sandbox-init, or a binary whose main calls sandbox.InitIfChild first?)", initProg, setupTimeout)}
			kill()
		case <-wallC:
			o.timedOut = fmt.Sprintf("wall time limit of %d ms reached", spec.Limits.WallMillis)
			end = time.Now()
			kill()
			wallC, tickC = nil, nil
		case <-tickC:
			if r.cg.pidsEvents() > 0 {
				end = time.Now()
				kill()
				wallC, tickC = nil, nil
				continue
			}
			if lim := spec.Limits.CPUMillis; lim != NoLimit {
				if used := r.cg.cpuNanos() - cpu0; used > lim*1e6 {
					o.timedOut = fmt.Sprintf("CPU time limit of %d ms reached", lim)
					end = time.Now()
					kill()
					wallC, tickC = nil, nil
				}
			}
		case <-ctx.Done():
			kill()
			_ = cmd.Wait()
			return fmt.Errorf("sandbox: run cancelled: %w", ctx.Err())
		}
	}
	waitErr := cmd.Wait()

	killed = true
	for range 3 {
		<-drained
	}

	r.res.Stdout, r.res.StdoutBytes, r.res.StdoutTruncated = stdout.buf, stdout.total, stdout.truncated()
	r.res.Stderr, r.res.StderrBytes, r.res.StderrTruncated = stderr.buf, stderr.total, stderr.truncated()
	if !start.IsZero() && !end.IsZero() {
		r.res.WallMillis = end.Sub(start).Milliseconds()
	}
	if err := r.awaitCgroup(cgDone); err != nil {
		if setupErr == nil {
			setupErr = err
		}
		return setupErr
	}
	if counters == nil {
		counters = r.cg.counters()
	}
	o.oomKills, o.pidsEvents, r.res.PeakMemoryBytes = counters.oomKills, counters.pidsEvents, counters.peakMemory
	if exited != nil {
		r.res.CPUMillis = (exited.UserMicros + exited.SysMicros) / 1000
		if r.res.PeakMemoryBytes < 0 {
			r.res.PeakMemoryBytes = exited.MaxRSSKiB * 1024
		}
		o.exitCode, o.signal = exited.ExitCode, exited.Signal
		o.violation, o.sigsysKills = exited.Violation, exited.Sigsys
		r.res.ExitCode, r.res.Signal, r.res.Violation = exited.ExitCode, exited.Signal, exited.Violation
	} else {
		if c := r.cg.cpuNanos(); c >= 0 && cpu0 >= 0 {
			r.res.CPUMillis = (c - cpu0) / 1e6
		}
		r.res.Signal = int(syscall.SIGKILL)
	}
	r.res.PeakMemoryBytes = max(r.res.PeakMemoryBytes, 0)
	r.res.OutputFull, r.res.TmpFull = o.outputFull, o.tmpFull

	// The init died without reporting: by the limits, or the sandbox broke.
	if exited == nil && o.timedOut == "" && o.oomKills == 0 && o.pidsEvents == 0 && setupErr == nil {
		setupErr = &SetupError{Stage: "init", Err: fmt.Errorf("%s exited without a report (%v): %s", initProg, waitErr, initErr.buf)}
	}
	if setupErr != nil && start.IsZero() {
		return setupErr
	}
	if setupErr != nil && o.oomKills == 0 && o.pidsEvents == 0 {
		return setupErr
	}
	r.res.Class, r.res.Detail = classify(o)
	return nil
}

// finish runs after the program and everything it started are dead and before
// the init exits: it inspects /out and /tmp through the init's root, checks
// the CPU limit once more, and copies the output out unless a limit or a
// violation ended the run.
func (r *runner) finish(ctx context.Context, o *outcome, ev initEvent) error {
	root := fmt.Sprintf("/proc/%d/root", r.initPID)
	var err error
	if o.outputFull, err = fsFull(root + OutputPath); err != nil {
		return &SetupError{Stage: "inspect /out", Err: err}
	}
	if o.tmpFull, err = fsFull(root + TmpPath); err != nil {
		return &SetupError{Stage: "inspect /tmp", Err: err}
	}
	// The last poll may have been up to an interval before the end.
	if lim := r.spec.Limits.CPUMillis; lim != NoLimit && o.timedOut == "" {
		if used := r.cg.cpuNanos() - r.cpu0; r.cpu0 >= 0 && used > lim*1e6 {
			o.timedOut = fmt.Sprintf("CPU time limit of %d ms reached", lim)
		}
	}
	if r.spec.OutputDir == "" {
		return nil
	}
	pre := *o
	pre.violation, pre.sigsysKills = ev.Violation, ev.Sigsys
	pre.oomKills, pre.pidsEvents = r.cg.oomKills(), r.cg.pidsEvents()
	pre.exitCode, pre.signal = ev.ExitCode, ev.Signal
	if c, _ := classify(pre); c != ClassOK && c != ClassExitNonzero {
		return nil
	}
	cctx, cancel := context.WithTimeout(ctx, copyOutTimeout(r.spec.Limits.OutputBytes))
	defer cancel()
	st, err := copyTree(cctx, root+OutputPath, r.spec.OutputDir,
		copyLimits{bytes: r.spec.Limits.OutputBytes, entries: r.spec.Limits.OutputFiles})
	r.res.OutputFiles, r.res.OutputBytes, r.res.OutputSkipped = st.files, st.bytes, st.skipped
	var refused *outputRefusedError
	if errors.As(err, &refused) {
		o.outputRefused = refused.Error()
		return nil
	}
	if err != nil {
		return &SetupError{Stage: "copy output", Err: err}
	}
	return nil
}

// awaitCgroup waits for the run's cgroups that run started making, once,
// and returns the error that made them unavailable.
func (r *runner) awaitCgroup(done <-chan error) error {
	if !r.cgAwaited {
		r.cgAwaited = true
		r.cgErr = <-done
		if r.cgErr == nil {
			r.res.Mechanisms = append(r.res.Mechanisms, r.cg.mechanisms()...)
		}
	}
	return r.cgErr
}

func readEvents(r io.Reader, out chan<- initEvent) {
	defer close(out)
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		var ev initEvent
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			out <- initEvent{Event: evError, Stage: "init report", Message: err.Error()}
			continue
		}
		out <- ev
	}
}

// setIDMappings fills the user and group mappings of the init and reports
// whether the init must switch the program to UID/GID. As root, the init is
// root inside (mapped to host root, holding capabilities only in its own
// namespaces) and the program runs as UID, mapped to the host's unprivileged
// UID. Otherwise only the caller's own ids can be mapped: they become UID and
// GID inside, and the init keeps the capabilities it needs as ambient ones.
func setIDMappings(a *syscall.SysProcAttr) (setUID bool) {
	uid, gid := os.Geteuid(), os.Getegid()
	if uid == 0 {
		a.UidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: 0, Size: 1}, {ContainerID: UID, HostID: UID, Size: 1}}
		a.GidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: gid, Size: 1}, {ContainerID: GID, HostID: GID, Size: 1}}
		a.GidMappingsEnableSetgroups = true
		a.Credential = &syscall.Credential{Uid: 0, Gid: 0}
		return true
	}
	a.UidMappings = []syscall.SysProcIDMap{{ContainerID: UID, HostID: uid, Size: 1}}
	a.GidMappings = []syscall.SysProcIDMap{{ContainerID: GID, HostID: gid, Size: 1}}
	a.Credential = &syscall.Credential{Uid: UID, Gid: GID, NoSetGroups: true}
	a.AmbientCaps = []uintptr{unix.CAP_SYS_ADMIN, unix.CAP_NET_ADMIN, unix.CAP_SETPCAP, unix.CAP_DAC_OVERRIDE, unix.CAP_SYS_RESOURCE}
	return false
}

// listenUnix binds a listening Unix stream socket at path, which must not
// exist.
func listenUnix(path string) (*os.File, error) {
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	if err := unix.Bind(fd, &unix.SockaddrUnix{Name: path}); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("binding %s: %w", path, err)
	}
	if err := unix.Listen(fd, 128); err != nil {
		unix.Close(fd)
		os.Remove(path)
		return nil, fmt.Errorf("listening on %s: %w", path, err)
	}
	return os.NewFile(uintptr(fd), path), nil
}

// pipes are the descriptors between Run and the init.
type pipes struct {
	stdoutR, stdoutW   *os.File
	stderrR, stderrW   *os.File
	initErrR, initErrW *os.File
	configR, configW   *os.File
	statusR, statusW   *os.File
	controlR, controlW *os.File
}

func (p *pipes) open() error {
	for _, pair := range []struct{ r, w **os.File }{
		{&p.stdoutR, &p.stdoutW}, {&p.stderrR, &p.stderrW}, {&p.initErrR, &p.initErrW},
		{&p.configR, &p.configW}, {&p.statusR, &p.statusW}, {&p.controlR, &p.controlW},
	} {
		r, w, err := os.Pipe()
		if err != nil {
			p.closeAll()
			return err
		}
		*pair.r, *pair.w = r, w
	}
	return nil
}

func (p *pipes) closeChildEnds() {
	for _, f := range []**os.File{&p.stdoutW, &p.stderrW, &p.initErrW, &p.configR, &p.statusW, &p.controlR} {
		if *f != nil {
			(*f).Close()
			*f = nil
		}
	}
}

func (p *pipes) closeAll() {
	p.closeChildEnds()
	for _, f := range []**os.File{&p.stdoutR, &p.stderrR, &p.initErrR, &p.configW, &p.statusR, &p.controlW} {
		if *f != nil {
			(*f).Close()
			*f = nil
		}
	}
}

// startError explains a failure to start the init: usually a namespace the
// host does not allow.
func startError(err error) error {
	missing := missingNamespaces()
	if len(missing) == 0 {
		return &SetupError{Stage: "start init", Err: err}
	}
	return &UnavailableError{Guarantee: namespaceGuarantee(missing[0]), Mechanism: missing[0] + " namespace", Err: err}
}
