package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/feval/feval/bundle"
	"github.com/feval/feval/cas"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"github.com/urfave/cli/v2"
	"golang.org/x/term"
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
	return &cli.App{
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
		OnUsageError: func(c *cli.Context, err error, _ bool) error {
			return usagef("%v (see 'feval %s --help')", err, c.Command.Name)
		},
		CommandNotFound: func(c *cli.Context, name string) {
			fmt.Fprintf(stderr, "feval: unknown command %q: see 'feval --help'\n", name)
		},
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
			serveCommand(a),
		},
	}
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

// progress returns a terminal progress bar on stderr, or cas.NoProgress when
// stderr is not a terminal or output is --json or --quiet.
func (a *appEnv) progress(o *outputOptions, label string) cas.Progress {
	f, ok := a.stderr.(*os.File)
	if o.JSON || o.Quiet || !ok || !term.IsTerminal(int(f.Fd())) {
		return cas.NoProgress
	}
	return &bar{w: f, label: label}
}

// bar is a one-line progress bar redrawn at most ten times a second.
type bar struct {
	w     io.Writer
	label string
	mu    sync.Mutex
	total int64
	done  int64
	last  time.Time
}

func (b *bar) Start(total int64) { b.mu.Lock(); b.total = total; b.mu.Unlock() }

func (b *bar) Add(n int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.done += n
	if time.Since(b.last) > 100*time.Millisecond {
		b.draw()
		b.last = time.Now()
	}
}

func (b *bar) Done() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.total > 0 {
		b.draw()
		fmt.Fprintln(b.w)
	}
}

func (b *bar) draw() {
	if b.total <= 0 {
		return
	}
	const width = 30
	frac := float64(b.done) / float64(b.total)
	if frac > 1 {
		frac = 1
	}
	n := int(frac * width)
	fmt.Fprintf(b.w, "\r%s [%s%s] %s / %s", b.label, strings.Repeat("=", n), strings.Repeat(" ", width-n), humanBytes(b.done), humanBytes(b.total))
}

func humanBytes(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
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
		return usagef("'feval %s' takes %s (got %d arguments); flags go before arguments", c.Command.FullName(), names, c.NArg())
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
