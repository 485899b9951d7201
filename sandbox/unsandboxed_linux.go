package sandbox

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"time"
)

// runUnsandboxed runs the program directly on the host: explicit environment,
// working directory Spec.OutputDir (or a temporary directory), the wall-time
// limit, bounded stdout and stderr, and nothing else. Inputs are not mounted:
// the program sees the host file system as it is.
func runUnsandboxed(ctx context.Context, spec Spec, res Result) (Result, error) {
	res.Unsandboxed = true
	fail := func(err error) (Result, error) {
		res.Class, res.Detail = ClassInfraError, err.Error()
		return res, err
	}
	prog, err := lookPath(spec.Args[0], spec.Env, isExecutable)
	if err != nil {
		return fail(&SetupError{Stage: "find program", Err: err})
	}
	dir := spec.OutputDir
	if dir == "" {
		d, err := os.MkdirTemp("", "feval-unsandboxed-")
		if err != nil {
			return fail(&SetupError{Stage: "create working directory", Err: err})
		}
		defer os.RemoveAll(d)
		dir = d
	}
	stdout := &capture{max: spec.Limits.StdoutBytes}
	stderr := &capture{max: spec.Limits.StderrBytes}
	cmd := &exec.Cmd{
		Path:        prog,
		Args:        spec.Args,
		Env:         spec.Env,
		Dir:         dir,
		Stdout:      stdout,
		Stderr:      stderr,
		WaitDelay:   time.Second,
		SysProcAttr: &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL},
	}
	if spec.Listen != "" {
		listen, err := listenUnix(spec.Listen)
		if err != nil {
			return fail(&SetupError{Stage: "listen", Err: err})
		}
		defer os.Remove(spec.Listen)
		defer listen.Close()
		cmd.ExtraFiles = []*os.File{listen} // ListenFD
	}
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return fail(&SetupError{Stage: "start program", Err: err})
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	wall := time.NewTimer(time.Duration(spec.Limits.WallMillis) * time.Millisecond)
	defer wall.Stop()
	var o outcome
	var waitErr error
	select {
	case waitErr = <-done:
	case <-wall.C:
		o.timedOut = fmt.Sprintf("wall time limit of %d ms reached", spec.Limits.WallMillis)
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		waitErr = <-done
	case <-ctx.Done():
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-done
		return fail(fmt.Errorf("sandbox: run cancelled: %w", ctx.Err()))
	}
	res.WallMillis = time.Since(start).Milliseconds()
	if waitErr != nil && !errors.As(waitErr, new(*exec.ExitError)) && !errors.Is(waitErr, exec.ErrWaitDelay) {
		return fail(&SetupError{Stage: "wait for program", Err: waitErr})
	}
	ps := cmd.ProcessState
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok {
		if ws.Signaled() {
			o.signal = int(ws.Signal())
			o.exitCode = -1
		} else {
			o.exitCode = ws.ExitStatus()
		}
	}
	if ru, ok := ps.SysUsage().(*syscall.Rusage); ok {
		res.CPUMillis = (ru.Utime.Sec*1e6 + ru.Utime.Usec + ru.Stime.Sec*1e6 + ru.Stime.Usec) / 1000
		res.PeakMemoryBytes = ru.Maxrss * 1024
	}
	res.ExitCode, res.Signal = o.exitCode, o.signal
	res.Stdout, res.StdoutBytes, res.StdoutTruncated = stdout.buf, stdout.total, stdout.truncated()
	res.Stderr, res.StderrBytes, res.StderrTruncated = stderr.buf, stderr.total, stderr.truncated()
	res.Class, res.Detail = classify(o)
	return res, nil
}
