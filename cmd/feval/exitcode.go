package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"strings"

	"github.com/feval/feval/bundle"
	"github.com/feval/feval/cas"
	"github.com/feval/feval/model"
	"github.com/feval/feval/policy"
	"github.com/feval/feval/protocol"
	"github.com/feval/feval/protocol/rollouts"
	"github.com/feval/feval/replay"
	"github.com/feval/feval/sandbox"
)

// Exit codes. They are part of feval's interface: scripts test them.
const (
	exitOK          = 0 // success
	exitError       = 1 // an unexpected failure (I/O, a bug)
	exitUsage       = 2 // bad flags, arguments or input; nothing was done
	exitNotFound    = 3 // a digest, tag, file, key or store does not exist
	exitVerify      = 4 // a digest, signature or closure check failed
	exitDiffers     = 5 // replay regenerated a different verdict
	exitRejected    = 6 // a submission failed a protocol check
	exitUnavailable = 7 // a registry, sandbox or other service could not be used
	exitUnchecked   = 8 // replay regenerated the verdict but left observations unchecked
)

var exitCodeHelp = `EXIT CODES:
   0  success
   1  unexpected failure (I/O error, bug)
   2  usage: bad flags, arguments, password or input; nothing was changed
   3  not found: digest, tag, file, key or store
   4  verification failed: digest, signature or closure check
   5  replay differs: the regenerated verdict is not identical
   6  rejected: a submission failed a protocol check
   7  unavailable: registry unreachable or sandbox unavailable
   8  replay unchecked: identical as far as it went; recorded outcomes not re-run
`

// usageError is a mistake in how feval was invoked.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, a ...any) error { return &usageError{fmt.Sprintf(format, a...)} }

// exitCoder lets library error types that know their class say so.
type exitCoder interface{ ExitCode() int }

// exitCode maps an error to the documented exit code. It is the only place that
// does.
func exitCode(err error) int {
	var ue *usageError
	var amb *cas.AmbiguousError
	var ec exitCoder
	switch {
	case err == nil:
		return exitOK
	case errors.As(err, &ec):
		return ec.ExitCode()
	case errors.As(err, &ue), errors.As(err, &amb), errors.Is(err, cas.ErrBadReference),
		errors.Is(err, bundle.ErrBadPassword), errors.Is(err, cas.ErrTooLarge), errors.Is(err, protocol.ErrDamaged),
		errors.Is(err, rollouts.ErrProtocol), errors.Is(err, replay.ErrNoTrustedKeys),
		errors.Is(err, protocol.ErrWrongKind), errors.Is(err, bundle.ErrUnsafeEntry), errors.Is(err, rollouts.ErrGenerate):
		return exitUsage
	case errors.Is(err, protocol.ErrGate), errors.Is(err, rollouts.ErrModelRefused), errors.Is(err, bundle.ErrMalformedRecord), errors.Is(err, protocol.ErrMalformed),
		errors.Is(err, rollouts.ErrTask), errors.Is(err, policy.ErrPack), errors.Is(err, policy.ErrStart):
		return exitRejected
	case errors.Is(err, cas.ErrUnreachable), errors.Is(err, cas.ErrRegistry), errors.Is(err, sandbox.ErrUnavailable), errors.Is(err, model.ErrRuntime):
		return exitUnavailable
	case errors.Is(err, bundle.ErrVerify), errors.Is(err, cas.ErrDigestMismatch), errors.Is(err, cas.ErrSizeMismatch),
		errors.Is(err, bundle.ErrNoTrustedSignature), errors.Is(err, bundle.ErrBadSignature),
		errors.Is(err, bundle.ErrNotArtifact), errors.Is(err, replay.ErrUntrusted), errors.Is(err, cas.ErrInvalid):
		return exitVerify
	case errors.Is(err, cas.ErrNotFound), errors.Is(err, cas.ErrNoStore), errors.Is(err, errNoKey), errors.Is(err, fs.ErrNotExist),
		errors.Is(err, protocol.ErrUnknownCommitment):
		return exitNotFound
	}
	return exitError
}

// batchExitCode is the exit code of a command that handled several items
// (feval evaluate REVEAL..., feval replay DIGEST...), given the code each
// item alone exits with: 0 when every item succeeded; when every item got
// its answer and some are not success, the gravest of those answers, 6
// (rejected) before 5 (differs) before 8 (unchecked); otherwise the code of
// the first item that got no answer.
func batchExitCode(codes []int) int {
	gravity := map[int]int{exitOK: 0, exitUnchecked: 1, exitDiffers: 2, exitRejected: 3}
	out := exitOK
	for _, c := range codes {
		g, answered := gravity[c]
		if !answered {
			return c
		}
		if g > gravity[out] {
			out = c
		}
	}
	return out
}

// report prints err as one line on stderr and returns its exit code. Joined
// errors (findings) are printed one per line after the first.
func report(err error, stderr io.Writer) int {
	if err == nil {
		return exitOK
	}
	code := exitCode(err)
	var rendered *renderedError
	if errors.As(err, &rendered) {
		fmt.Fprintf(stderr, "feval: %s\n", rendered.summary)
		return code
	}
	lines := strings.Split(err.Error(), "\n")
	fmt.Fprintf(stderr, "feval: %s\n", lines[0])
	for _, l := range lines[1:] {
		fmt.Fprintf(stderr, "  %s\n", l)
	}
	return code
}

// renderedError is a failure whose details are already rendered on stdout (a
// failed verify, a replay that differs): stderr gets only its one-line summary.
type renderedError struct {
	code    int
	summary string
	err     error
}

func (e *renderedError) Error() string { return e.err.Error() }
func (e *renderedError) Unwrap() error { return e.err }
func (e *renderedError) ExitCode() int { return e.code }
