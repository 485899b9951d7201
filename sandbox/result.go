package sandbox

import (
	"errors"
	"fmt"
	"sort"
)

// Class says how a run ended. Every class except ClassInfraError is the
// program's own doing; ClassInfraError is never blamed on the program.
type Class string

// The classes, in the order of precedence used when several apply: a
// violation outranks an out-of-memory kill, which outranks hitting the process
// limit, and so on down to ClassOK.
const (
	ClassInfraError     Class = "infra_error"
	ClassViolation      Class = "violation"
	ClassOOM            Class = "oom"
	ClassPidsExceeded   Class = "pids_exceeded"
	ClassTimeout        Class = "timeout"
	ClassOutputExceeded Class = "output_exceeded"
	ClassExitNonzero    Class = "exit_nonzero"
	ClassOK             Class = "ok"
)

// Result is what happened in one run. It is plain data for a run record; it
// holds durations and sizes as integers with their units in the field names.
type Result struct {
	// Class is the classification of the run.
	Class Class `json:"class"`
	// Detail explains Class in words (what was missing, which limit, which
	// system call); it is empty for ClassOK and ClassExitNonzero.
	Detail string `json:"detail,omitempty"`
	// ExitCode is the program's exit status, or -1 if it was killed by a
	// signal or never ran.
	ExitCode int `json:"exit_code"`
	// Signal is the signal that killed the program, or 0.
	Signal int `json:"signal,omitempty"`
	// Violation names the denied system call that ended the run, if any.
	Violation string `json:"violation,omitempty"`

	// WallMillis is the wall time from the program's start to its end.
	WallMillis int64 `json:"wall_millis"`
	// CPUMillis is the user+system CPU time of the program's whole tree.
	CPUMillis int64 `json:"cpu_millis"`
	// PeakMemoryBytes is the peak memory charged to the sandbox (with a memory
	// cgroup) or the largest resident set of one process (without).
	PeakMemoryBytes int64 `json:"peak_memory_bytes"`

	// Stdout and Stderr are the first Limits.StdoutBytes and
	// Limits.StderrBytes of each stream.
	Stdout []byte `json:"stdout"`
	Stderr []byte `json:"stderr"`
	// StdoutBytes and StderrBytes count everything the program wrote.
	StdoutBytes int64 `json:"stdout_bytes"`
	StderrBytes int64 `json:"stderr_bytes"`
	// StdoutTruncated and StderrTruncated report that a stream was cut.
	StdoutTruncated bool `json:"stdout_truncated,omitempty"`
	StderrTruncated bool `json:"stderr_truncated,omitempty"`

	// OutputFiles and OutputBytes count the regular files and their bytes
	// copied to Spec.OutputDir (directories are not counted).
	OutputFiles int64 `json:"output_files"`
	OutputBytes int64 `json:"output_bytes"`
	// OutputSkipped counts entries of the output directory that were not
	// copied because they are neither regular files nor directories.
	OutputSkipped int64 `json:"output_skipped,omitempty"`
	// OutputFull and TmpFull report that the output directory or /tmp ran out
	// of space or inodes.
	OutputFull bool `json:"output_full,omitempty"`
	TmpFull    bool `json:"tmp_full,omitempty"`

	// Unsandboxed marks a run made without isolation (Spec.Unsandboxed).
	// Nothing derived from such a run may be accepted as a verdict.
	Unsandboxed bool `json:"unsandboxed,omitempty"`
	// Mechanisms lists, sorted, the isolation mechanisms that were in force.
	Mechanisms []string `json:"mechanisms"`
	// Limits are the limits that were in force, defaults filled in.
	Limits Limits `json:"limits"`
}

// outcome is what the sandbox observed, before classification.
type outcome struct {
	infra      string // non-empty: the sandbox failed
	violation  string
	oomKills   int64
	pidsEvents int64
	timedOut   string // non-empty: which time limit ended the run
	outputFull bool
	tmpFull    bool
	// outputRefused: the output could not be copied to the host as it is.
	outputRefused string
	exitCode      int
	signal        int
	sigsysKills   bool
}

// classify applies the precedence of the Class constants.
func classify(o outcome) (Class, string) {
	switch {
	case o.infra != "":
		return ClassInfraError, o.infra
	case o.violation != "":
		return ClassViolation, "denied system call " + o.violation
	case o.sigsysKills:
		return ClassViolation, "killed by the system call filter"
	case o.oomKills > 0:
		return ClassOOM, fmt.Sprintf("memory limit reached (%d out-of-memory kills)", o.oomKills)
	case o.pidsEvents > 0:
		return ClassPidsExceeded, fmt.Sprintf("process limit reached (%d refused forks)", o.pidsEvents)
	case o.timedOut != "":
		return ClassTimeout, o.timedOut
	case o.outputRefused != "":
		return ClassOutputExceeded, o.outputRefused
	case o.outputFull && o.tmpFull:
		return ClassOutputExceeded, "output directory and /tmp full"
	case o.outputFull:
		return ClassOutputExceeded, "output directory full"
	case o.tmpFull:
		return ClassOutputExceeded, "/tmp full"
	case o.exitCode != 0 || o.signal != 0:
		return ClassExitNonzero, ""
	default:
		return ClassOK, ""
	}
}

// UnavailableError reports that a guarantee a Spec requires cannot be provided
// on this host. Run returns it with a ClassInfraError Result; it never runs the
// program with weaker isolation instead.
type UnavailableError struct {
	// Guarantee is the guarantee that cannot hold (see Guarantee names).
	Guarantee string
	// Mechanism is what is missing, e.g. "memory cgroup".
	Mechanism string
	// Err is the underlying cause, if any.
	Err error
}

func (e *UnavailableError) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("sandbox: %s unavailable: no %s: %v", e.Guarantee, e.Mechanism, e.Err)
	}
	return fmt.Sprintf("sandbox: %s unavailable: no %s", e.Guarantee, e.Mechanism)
}

func (e *UnavailableError) Unwrap() error { return e.Err }

// Is makes errors.Is(err, ErrUnavailable) true for every *UnavailableError.
func (e *UnavailableError) Is(target error) bool { return target == ErrUnavailable }

// ErrUnavailable matches every *UnavailableError.
var ErrUnavailable = errors.New("sandbox: required mechanism unavailable")

// SetupError reports that the sandbox could not be set up or torn down. Run
// returns it with a ClassInfraError Result.
type SetupError struct {
	// Stage names the step that failed, e.g. "mount /proc".
	Stage string
	Err   error
}

func (e *SetupError) Error() string { return "sandbox: " + e.Stage + ": " + e.Err.Error() }

func (e *SetupError) Unwrap() error { return e.Err }

func sortedUnique(s []string) []string {
	sort.Strings(s)
	out := s[:0]
	for i, v := range s {
		if i == 0 || v != s[i-1] {
			out = append(out, v)
		}
	}
	return out
}
