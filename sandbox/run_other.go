//go:build !linux

package sandbox

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
)

var errNotLinux = errors.New("the sandbox needs Linux, this is " + runtime.GOOS)

// InitIfChild does nothing outside Linux.
func InitIfChild() {}

// InitMain fails outside Linux.
func InitMain() {
	fmt.Fprintln(os.Stderr, "feval-sandbox-init: "+errNotLinux.Error())
	os.Exit(2)
}

// Run fails outside Linux: none of the guarantees can be provided.
func Run(ctx context.Context, spec Spec) (Result, error) {
	spec = spec.WithDefaults()
	err := &UnavailableError{Guarantee: GuaranteeReadOnlyHost, Mechanism: "Linux namespaces", Err: errNotLinux}
	return Result{Class: ClassInfraError, Detail: err.Error(), ExitCode: -1, Limits: spec.Limits, Unsandboxed: spec.Unsandboxed, Mechanisms: []string{}}, err
}

// Check reports no mechanisms outside Linux.
func Check() Capabilities {
	return Capabilities{Problems: []string{errNotLinux.Error()}}
}
