//go:build feval_sandbox_init

package sandbox

import "errors"

// The init program (built with the tag feval_sandbox_init) never calls Run:
// the caller assembles the filter and names violations
// (seccomp_assemble_linux.go). These keep the package whole without
// linking go-seccomp-bpf, whose system call tables cost every start of the
// init a few tenths of a millisecond of package initialisation.

var errInitProgram = errors.New("sandbox: the init program does not run sandboxes")

func programFilter(notify, refuseInotify bool) ([]byte, error) { return nil, errInitProgram }

func violationName(v string) string { return v }
