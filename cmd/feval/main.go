// Command feval is the command-line interface of feval: verifiable evaluation for
// open competitions. Each command parses its options, calls one library function
// and renders the result; see 'feval --help'.
package main

import (
	"io"
	"os"
)

func main() {
	os.Exit(run(os.Args, os.Stdin, os.Stdout, os.Stderr))
}

// run executes the command line and returns the process exit code.
func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	app := newApp(stdin, stdout, stderr)
	err := app.Run(args)
	return report(err, stderr)
}
