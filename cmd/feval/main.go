// Command feval is the command-line interface of feval: verifiable evaluation for
// open competitions. Each command parses its options, calls one library function
// and renders the result; see 'feval --help'.
package main

import (
	"io"
	"os"

	"github.com/feval/feval/sandbox"
)

func main() {
	// The sandbox re-executes this binary as the init of each sandboxed run;
	// that must be decided before anything else happens.
	sandbox.InitIfChild()
	os.Exit(run(os.Args, os.Stdin, os.Stdout, os.Stderr))
}

// run executes the command line and returns the process exit code.
func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	app := newApp(stdin, stdout, stderr)
	args, err := prepareArgs(app, args)
	if err == nil {
		err = app.Run(args)
	}
	return report(err, stderr)
}
