// Command feval-sandbox-init is the init of feval's sandbox: feval starts it
// as pid 1 of each sandboxed run's namespaces, where it builds the root file
// system, starts the program under its restrictions, and reports to feval
// (docs/SANDBOX.md). It is a separate, small, static program so that a run
// does not pay for starting the whole feval binary; it links the sandbox
// package and nothing else of feval. Build it as make build does:
//
//	CGO_ENABLED=0 go build -trimpath -tags feval_sandbox_init ./cmd/feval-sandbox-init
//
// (the tag leaves out the caller's side of the seccomp filter, which the init
// never needs). Built from other source than the feval beside it, it refuses
// to run (the handshake of sandbox/protocol.go).
package main

import "github.com/feval/feval/sandbox"

func main() {
	sandbox.InitMain()
}
