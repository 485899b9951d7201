package sandbox

import (
	"errors"
	"fmt"
	"path"
	"strings"
)

// Fixed locations inside the sandbox. A program sees the same layout on every host.
const (
	// InputRoot is the directory under which every input is mounted read-only.
	InputRoot = "/in"
	// OutputPath is the one writable directory whose contents are copied to
	// Spec.OutputDir when the program exits.
	OutputPath = "/out"
	// TmpPath is the private, size-capped scratch directory.
	TmpPath = "/tmp"
	// SocketPath is where the host Unix socket named by Spec.Socket appears.
	SocketPath = "/run/feval.sock"
	// Hostname is the host name the program sees.
	Hostname = "sandbox"
	// ListenFD is the program's descriptor of the socket Spec.Listen names.
	ListenFD = 3
	// UID and GID are the unprivileged user and group the program runs as.
	UID = 65534
	GID = 65534
)

// NoLimit, as the value of Limits.CPUMillis, Limits.MemoryBytes or
// Limits.Processes, switches that limit off deliberately. Zero never means
// "unlimited": it selects the default.
const NoLimit int64 = -1

// minOpenFiles is the smallest accepted Limits.OpenFiles: the sandbox init holds
// a dozen descriptors while it starts the program, and the limit is a limit on
// descriptor numbers.
const minOpenFiles = 32

// Mount makes one host path visible read-only inside the sandbox.
type Mount struct {
	// Source is an absolute host path to a file or directory.
	Source string `json:"source"`
	// Target is the absolute path inside the sandbox, strictly below InputRoot.
	Target string `json:"target"`
}

// Limits bounds what one run may consume. Every field carries its unit in its
// name. A zero field takes the value from DefaultLimits.
type Limits struct {
	// WallMillis is the wall-clock budget from the program's start.
	WallMillis int64 `json:"wall_millis"`
	// CPUMillis is the CPU budget of the whole process tree (user+system), or NoLimit.
	CPUMillis int64 `json:"cpu_millis"`
	// MemoryBytes bounds all memory charged to the sandbox, including files in
	// /tmp and /out, or NoLimit.
	MemoryBytes int64 `json:"memory_bytes"`
	// Processes bounds the tasks (processes and threads) the program may have
	// at once, or NoLimit.
	Processes int64 `json:"processes"`
	// OpenFiles bounds descriptor numbers per process (RLIMIT_NOFILE).
	OpenFiles int64 `json:"open_files"`
	// OutputBytes is the size of the output directory's file system.
	OutputBytes int64 `json:"output_bytes"`
	// OutputFiles bounds the number of files and directories in the output directory.
	OutputFiles int64 `json:"output_files"`
	// TmpBytes is the size of the private /tmp.
	TmpBytes int64 `json:"tmp_bytes"`
	// StdoutBytes and StderrBytes bound what is kept of each stream; the rest is
	// counted and discarded.
	StdoutBytes int64 `json:"stdout_bytes"`
	StderrBytes int64 `json:"stderr_bytes"`
}

// DefaultLimits returns the limits used for fields left zero.
func DefaultLimits() Limits {
	return Limits{
		WallMillis:  60_000,
		CPUMillis:   60_000,
		MemoryBytes: 1 << 30,
		Processes:   256,
		OpenFiles:   1024,
		OutputBytes: 64 << 20,
		OutputFiles: 4096,
		TmpBytes:    256 << 20,
		StdoutBytes: 1 << 20,
		StderrBytes: 1 << 20,
	}
}

// Spec describes one run. It is plain data: it can be stored in a run record
// and replayed.
type Spec struct {
	// Args is the program and its arguments. Args[0] is an absolute path inside
	// the sandbox, or a name looked up in the PATH given in Env (or
	// /usr/local/bin:/usr/bin:/bin when Env has none).
	Args []string `json:"args"`
	// Env is the complete environment, as KEY=VALUE. Nothing is inherited.
	Env []string `json:"env"`
	// Dir is the working directory inside the sandbox; empty means OutputPath.
	Dir string `json:"dir,omitempty"`
	// Inputs are mounted read-only, nosuid and nodev at their targets.
	Inputs []Mount `json:"inputs,omitempty"`
	// OutputDir is the host directory that receives the regular files and
	// directories the program left in OutputPath. Empty discards them. Names
	// already present are not overwritten: the copy fails instead.
	OutputDir string `json:"output_dir,omitempty"`
	// Socket is an absolute host path of a Unix socket made reachable at
	// SocketPath; it is the only route out of the sandbox. The socket must be
	// writable by UID.
	Socket string `json:"socket,omitempty"`
	// Listen is an absolute host path at which Run binds a Unix stream
	// socket, listening, before the program starts, and which it removes
	// when the run ends. The program receives the listening socket as
	// descriptor ListenFD and accepts the host's connections on it: the one
	// route in, for a program that serves (a policy server). The path must
	// not exist; its directory must.
	Listen string `json:"listen,omitempty"`
	// Limits bounds the run.
	Limits Limits `json:"limits"`
	// Unsandboxed runs the program on the host without any isolation, for
	// development only. The Result says so, and verdicts built on it must be
	// refused.
	Unsandboxed bool `json:"unsandboxed,omitempty"`
}

// ErrInvalidSpec is wrapped by every error that Validate returns.
var ErrInvalidSpec = errors.New("invalid sandbox spec")

// WithDefaults returns a copy of s with zero limits replaced by DefaultLimits
// and an empty Dir replaced by OutputPath.
func (s Spec) WithDefaults() Spec {
	d := DefaultLimits()
	l := &s.Limits
	fill := func(v *int64, def int64) {
		if *v == 0 {
			*v = def
		}
	}
	fill(&l.WallMillis, d.WallMillis)
	fill(&l.CPUMillis, d.CPUMillis)
	fill(&l.MemoryBytes, d.MemoryBytes)
	fill(&l.Processes, d.Processes)
	fill(&l.OpenFiles, d.OpenFiles)
	fill(&l.OutputBytes, d.OutputBytes)
	fill(&l.OutputFiles, d.OutputFiles)
	fill(&l.TmpBytes, d.TmpBytes)
	fill(&l.StdoutBytes, d.StdoutBytes)
	fill(&l.StderrBytes, d.StderrBytes)
	if s.Dir == "" {
		s.Dir = OutputPath
	}
	s.Args = append([]string(nil), s.Args...)
	s.Env = append([]string(nil), s.Env...)
	s.Inputs = append([]Mount(nil), s.Inputs...)
	return s
}

// Validate reports the first problem that makes s unusable, wrapping
// ErrInvalidSpec. It expects a Spec that went through WithDefaults; zero
// limits are rejected.
func (s Spec) Validate() error {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("%w: %s", ErrInvalidSpec, fmt.Sprintf(format, a...))
	}
	if len(s.Args) == 0 || s.Args[0] == "" {
		return bad("args: no program")
	}
	for i, a := range s.Args {
		if strings.IndexByte(a, 0) >= 0 {
			return bad("args[%d]: contains NUL", i)
		}
	}
	for i, e := range s.Env {
		k, _, ok := strings.Cut(e, "=")
		if !ok || k == "" || strings.IndexByte(e, 0) >= 0 {
			return bad("env[%d]: %q is not KEY=VALUE", i, e)
		}
	}
	if !isCleanAbs(s.Dir) {
		return bad("dir: %q is not a clean absolute path", s.Dir)
	}
	targets := make([]string, 0, len(s.Inputs))
	for i, m := range s.Inputs {
		if !path.IsAbs(m.Source) || strings.IndexByte(m.Source, 0) >= 0 {
			return bad("inputs[%d].source: %q is not an absolute path", i, m.Source)
		}
		if !isCleanAbs(m.Target) || !strings.HasPrefix(m.Target, InputRoot+"/") {
			return bad("inputs[%d].target: %q is not a clean absolute path below %s", i, m.Target, InputRoot)
		}
		for _, t := range targets {
			if t == m.Target || strings.HasPrefix(m.Target, t+"/") || strings.HasPrefix(t, m.Target+"/") {
				return bad("inputs[%d].target: %q overlaps %q", i, m.Target, t)
			}
		}
		targets = append(targets, m.Target)
	}
	if s.OutputDir != "" && !path.IsAbs(s.OutputDir) {
		return bad("output_dir: %q is not an absolute path", s.OutputDir)
	}
	if s.Socket != "" && !path.IsAbs(s.Socket) {
		return bad("socket: %q is not an absolute path", s.Socket)
	}
	if s.Listen != "" && (!isCleanAbs(s.Listen) || s.Listen == "/") {
		return bad("listen: %q is not a clean absolute path", s.Listen)
	}
	l := s.Limits
	positive := []struct {
		name string
		v    int64
	}{
		{"wall_millis", l.WallMillis},
		{"output_bytes", l.OutputBytes},
		{"output_files", l.OutputFiles},
		{"tmp_bytes", l.TmpBytes},
		{"stdout_bytes", l.StdoutBytes},
		{"stderr_bytes", l.StderrBytes},
	}
	for _, p := range positive {
		if p.v <= 0 {
			return bad("limits.%s: %d must be positive", p.name, p.v)
		}
	}
	optional := []struct {
		name string
		v    int64
	}{
		{"cpu_millis", l.CPUMillis},
		{"memory_bytes", l.MemoryBytes},
		{"processes", l.Processes},
	}
	for _, p := range optional {
		if p.v <= 0 && p.v != NoLimit {
			return bad("limits.%s: %d must be positive or NoLimit (-1)", p.name, p.v)
		}
	}
	if l.OpenFiles < minOpenFiles {
		return bad("limits.openFiles: %d is below the minimum %d", l.OpenFiles, minOpenFiles)
	}
	return nil
}

func isCleanAbs(p string) bool {
	return path.IsAbs(p) && path.Clean(p) == p && strings.IndexByte(p, 0) < 0
}

// lookPath resolves a program name the way a shell would, using the PATH from
// env (not from the calling process). exists reports whether a candidate is an
// executable regular file.
func lookPath(name string, env []string, exists func(string) bool) (string, error) {
	if strings.Contains(name, "/") {
		return name, nil
	}
	p := "/usr/local/bin:/usr/bin:/bin"
	for _, e := range env {
		if v, ok := strings.CutPrefix(e, "PATH="); ok {
			p = v
		}
	}
	for _, dir := range strings.Split(p, ":") {
		if dir == "" {
			dir = "."
		}
		c := path.Join(dir, name)
		if exists(c) {
			return c, nil
		}
	}
	return "", fmt.Errorf("program %q not found in PATH %q", name, p)
}
