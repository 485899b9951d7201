package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/feval/feval/bundle"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"github.com/urfave/cli/v2"
)

type ociDesc = ocispec.Descriptor

type signerT = bundle.Signer

// appEnv is what every command gets instead of globals: the standard streams.
type appEnv struct {
	stdin          io.Reader
	stdout, stderr io.Writer
}

func newApp(stdin io.Reader, stdout, stderr io.Writer) *cli.App {
	a := &appEnv{stdin: stdin, stdout: stdout, stderr: stderr}
	cli.AppHelpTemplate = cli.AppHelpTemplate + "\n" + exitCodeHelp
	cli.FlagStringer = flagString
	app := &cli.App{
		Name:  "feval",
		Usage: "verifiable evaluation for open competitions: signed OCI artifacts, replayable verdicts",
		Description: "Miners run 'feval commit' and 'feval reveal'; validators run 'feval evaluate';\n" +
			"auditors run 'feval replay DIGEST'. Every record is a signed OCI artifact in a\n" +
			"content-addressed store (a local OCI layout, or any OCI registry).",
		Writer:          stdout,
		ErrWriter:       stderr,
		Reader:          stdin,
		HideHelpCommand: true,
		ExitErrHandler:  func(*cli.Context, error) {},
		Commands: []*cli.Command{
			initCommand(a),
			keyCommand(a),
			packCommand(a),
			lsCommand(a),
			inspectCommand(a),
			verifyCommand(a),
			pushCommand(a),
			pullCommand(a),
			fsckCommand(a),
			envCommand(a),
			taskCommand(a),
			roundCommand(a),
			commitCommand(a),
			revealCommand(a),
			revealsCommand(a),
			sampleCommand(a),
			evaluateCommand(a),
			replayCommand(a),
			consensusCommand(a),
			leaderboardCommand(a),
			frontierCommand(a),
			emissionCommand(a),
			recordCommand(a),
			sandboxCommand(a),
			unpackCommand(a),
			versionCommand(a),
			completionCommand(a),
			manCommand(a),
			meterCommand(a),
			serveCommand(a),
			policyCommand(a),
			rolloutsCommand(a),
		},
	}
	applyConventions(app)
	return app
}

// render prints a result: JSON when asked, else the text the command draws.
func (a *appEnv) render(o *outputOptions, v any, text func(w *tabw)) error {
	if o.JSON {
		enc := json.NewEncoder(a.stdout)
		enc.SetIndent("", "  ")
		enc.SetEscapeHTML(false)
		return enc.Encode(v)
	}
	w := &tabw{tw: tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)}
	text(w)
	return w.tw.Flush()
}

// tabw writes aligned columns.
type tabw struct{ tw *tabwriter.Writer }

func (w *tabw) row(cols ...string) { fmt.Fprintln(w.tw, strings.Join(cols, "\t")) }
func (w *tabw) line(format string, a ...any) {
	fmt.Fprintf(w.tw, format+"\n", a...)
}

func shortDigest(d fmt.Stringer) string {
	s := d.String()
	if i := strings.IndexByte(s, ':'); i >= 0 && len(s) > i+13 {
		return s[i+1 : i+13]
	}
	return s
}

// args checks the positional argument count.
func args(c *cli.Context, n int, names string) error {
	if c.NArg() != n {
		got := fmt.Sprintf("%d arguments", c.NArg())
		if c.NArg() == 1 {
			got = "1 argument"
		}
		return usagef("'%s' takes %s (got %s)\n%s", c.Command.HelpName, names, got, usageText(strings.Fields(c.Command.HelpName), c.Command))
	}
	return nil
}

// flagSet joins a command's own flags with its option groups' flags.
func flagSet(groups ...[]cli.Flag) []cli.Flag {
	var out []cli.Flag
	for _, g := range groups {
		out = append(out, g...)
	}
	return out
}
