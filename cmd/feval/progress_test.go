package main

import (
	"bytes"
	"context"
	"flag"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/feval/feval/cas"
	"github.com/urfave/cli/v2"
)

// fakeTerminal is a stderr that says it is a terminal and records what is drawn.
type fakeTerminal struct{ bytes.Buffer }

func (*fakeTerminal) IsTerminal() bool { return true }

// fakeClock advances only when told.
type fakeClock struct{ t time.Time }

func newFakeClock() *fakeClock               { return &fakeClock{t: time.Unix(1000, 0)} }
func (c *fakeClock) now() time.Time          { return c.t }
func (c *fakeClock) advance(d time.Duration) { c.t = c.t.Add(d) }

func newBar(w io.Writer, c *fakeClock) *bar { return &bar{w: w, label: "commit", now: c.now} }

func mib(n float64) int64 { return int64(n * (1 << 20)) }

// lineOf returns the line last drawn in buf, without the erase-to-end code.
func lineOf(buf *bytes.Buffer) string {
	s := buf.String()
	s = s[strings.LastIndexByte(s, '\r')+1:]
	return strings.TrimSuffix(strings.TrimSuffix(s, "\n"), "\x1b[K")
}

func draws(s string) int { return strings.Count(s, "\r") }

func addAll(p cas.Progress, n int64, step int64) {
	for ; n > 0; n -= step {
		p.Add(min(step, n))
	}
}

// flagSetFor parses args with the flags of c, as urfave/cli would.
func flagSetFor(t *testing.T, c *cli.Command, args []string) *flag.FlagSet {
	t.Helper()
	fs := flag.NewFlagSet(c.Name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	for _, f := range c.Flags {
		if err := f.Apply(fs); err != nil {
			t.Fatal(err)
		}
	}
	if err := fs.Parse(args); err != nil {
		t.Fatalf("%s %v: %v", c.Name, args, err)
	}
	return fs
}

func TestBarRendering(t *testing.T) {
	var buf bytes.Buffer
	clk := newFakeClock()
	b := newBar(&buf, clk)

	b.Start(mib(10))
	clk.advance(500 * time.Millisecond)
	b.Add(mib(1))
	if got, want := lineOf(&buf), "commit [===                           ]  10% 1.0 MiB / 10.0 MiB  2.0 MiB/s  ETA 0:05"; got != want {
		t.Errorf("first draw\n got %q\nwant %q", got, want)
	}
	// Redrawn at most ten times a second.
	clk.advance(50 * time.Millisecond)
	b.Add(mib(1))
	if n := draws(buf.String()); n != 1 {
		t.Errorf("%d draws within 100 ms, want 1", n)
	}
	clk.advance(1450 * time.Millisecond) // 2 s in, 4 MiB done
	b.Add(mib(2))
	if got, want := lineOf(&buf), "commit [============                  ]  40% 4.0 MiB / 10.0 MiB  2.0 MiB/s  ETA 0:03"; got != want {
		t.Errorf("second draw\n got %q\nwant %q", got, want)
	}
	clk.advance(3 * time.Second)
	b.Add(mib(6))
	b.Done()
	if got, want := lineOf(&buf), "commit [==============================] 100% 10.0 MiB / 10.0 MiB  2.0 MiB/s  in 0:05"; got != want {
		t.Errorf("final line\n got %q\nwant %q", got, want)
	}
	if !strings.HasSuffix(buf.String(), "\x1b[K\n") || strings.Count(buf.String(), "\n") != 1 {
		t.Errorf("want one finished line, got %q", buf.String())
	}

	// A second phase starts a new line.
	buf.Reset()
	b.Start(mib(2))
	clk.advance(time.Second)
	b.Add(mib(2))
	b.Done()
	if got, want := lineOf(&buf), "commit [==============================] 100% 2.0 MiB / 2.0 MiB  2.0 MiB/s  in 0:01"; got != want {
		t.Errorf("second phase\n got %q\nwant %q", got, want)
	}
}

func TestBarSmallTransfersDrawNothing(t *testing.T) {
	var buf bytes.Buffer
	clk := newFakeClock()
	b := newBar(&buf, clk)
	b.Start(progressMinBytes - 1)
	clk.advance(time.Second)
	addAll(b, progressMinBytes-1, 4096)
	b.Done()
	if buf.Len() != 0 {
		t.Errorf("drew %q for a small transfer", buf.String())
	}
}

func TestBarUnknownTotal(t *testing.T) {
	var buf bytes.Buffer
	clk := newFakeClock()
	b := newBar(&buf, clk)
	b.Start(0)
	clk.advance(time.Second)
	b.Add(progressMinBytes / 2)
	if buf.Len() != 0 {
		t.Fatalf("drew %q before a megabyte moved", buf.String())
	}
	b.Add(mib(2.5))
	if got, want := lineOf(&buf), "commit 3.0 MiB  3.0 MiB/s"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	clk.advance(time.Second)
	b.Done()
	if got, want := lineOf(&buf), "commit 3.0 MiB  1.5 MiB/s  in 0:02"; got != want {
		t.Errorf("final got %q, want %q", got, want)
	}
}

func TestClock(t *testing.T) {
	for d, want := range map[time.Duration]string{
		0: "0:00", 400 * time.Millisecond: "0:01", 59 * time.Second: "0:59", 61 * time.Second: "1:01",
		3*time.Hour + 2*time.Minute + 5*time.Second: "3:02:05",
	} {
		if got := clock(d); got != want {
			t.Errorf("clock(%v) = %q, want %q", d, got, want)
		}
	}
}

// TestNewProgress: a bar only on a terminal and without --json or --quiet.
func TestNewProgress(t *testing.T) {
	if _, ok := newProgress(&fakeTerminal{}, false, "x").(*bar); !ok {
		t.Error("no bar on a terminal")
	}
	if p := newProgress(&fakeTerminal{}, true, "x"); p != cas.NoProgress {
		t.Error("a bar although quiet")
	}
	if p := newProgress(&bytes.Buffer{}, false, "x"); p != cas.NoProgress {
		t.Error("a bar on a plain writer")
	}
	f, err := os.CreateTemp(t.TempDir(), "stderr")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if p := newProgress(f, false, "x"); p != cas.NoProgress {
		t.Error("a bar on a file")
	}
}

// TestWithProgress: for every command and its flags, the action runs with a progress
// in its context, a bar on a terminal unless --json or --quiet.
func TestWithProgress(t *testing.T) {
	for _, tc := range []struct {
		stderr io.Writer
		flags  []string
		bar    bool
	}{
		{&fakeTerminal{}, nil, true},
		{&fakeTerminal{}, []string{"--json"}, false},
		{&fakeTerminal{}, []string{"--quiet"}, false},
		{&fakeTerminal{}, []string{"-q"}, false},
		{&bytes.Buffer{}, nil, false},
	} {
		app := newApp(nil, io.Discard, tc.stderr)
		var leaves []*cli.Command
		var walk func(cmds []*cli.Command)
		walk = func(cmds []*cli.Command) {
			for _, c := range cmds {
				if len(c.Subcommands) > 0 {
					walk(c.Subcommands)
				} else {
					leaves = append(leaves, c)
				}
			}
		}
		walk(app.Commands)
		for _, c := range leaves {
			if len(tc.flags) > 0 && findFlag(c.Flags, strings.TrimLeft(tc.flags[0], "-")) == nil {
				continue // completion and man print no progress to begin with
			}
			var got cas.Progress
			// The wrapped action, with the command's own action replaced by a probe.
			probe := withProgress(app, c.Name, func(c *cli.Context) error { got = cas.ProgressFrom(c.Context); return nil })
			set := cli.NewContext(app, nil, nil)
			fs := flagSetFor(t, c, tc.flags)
			ctx := cli.NewContext(app, fs, set)
			ctx.Context = context.Background()
			if err := probe(ctx); err != nil {
				t.Fatal(err)
			}
			if _, isBar := got.(*bar); isBar != tc.bar {
				t.Errorf("%s %v on %T: bar %v, want %v", c.Name, tc.flags, tc.stderr, isBar, tc.bar)
			}
		}
	}
}

// TestPackDrawsProgressOnlyOnATerminal runs a real pack of a 2 MiB file
// through run with a terminal, with --json and --quiet, and without a terminal.
func TestPackDrawsProgressOnlyOnATerminal(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("HOME", dir)
	t.Setenv("XDG_DATA_HOME", "")
	t.Setenv("FEVAL_STORE", filepath.Join(dir, "store"))
	t.Setenv("FEVAL_KEY", filepath.Join(dir, "k.key"))
	t.Setenv("FEVAL_PASSWORD", "pw")
	big := filepath.Join(dir, "big.bin")
	if err := os.WriteFile(big, bytes.Repeat([]byte("feval"), 1<<19), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, line := range []string{"init", "key generate"} {
		if code := run(append([]string{"feval"}, strings.Fields(line)...), nil, io.Discard, io.Discard); code != 0 {
			t.Fatalf("%s: exit %d", line, code)
		}
	}
	for _, tc := range []struct {
		stderr interface {
			io.Writer
			String() string
		}
		flag string
		bar  bool
	}{
		{&fakeTerminal{}, "", true},
		{&fakeTerminal{}, "--json", false},
		{&fakeTerminal{}, "--quiet", false},
		{&bytes.Buffer{}, "", false},
	} {
		args := []string{"feval", "pack", "--kind", "trace", big}
		if tc.flag != "" {
			args = append(args, tc.flag)
		}
		var stdout bytes.Buffer
		if code := run(args, nil, &stdout, tc.stderr); code != 0 {
			t.Fatalf("pack %s: exit %d: %s", tc.flag, code, tc.stderr.String())
		}
		s := tc.stderr.String()
		if tc.bar != strings.Contains(s, "pack [") {
			t.Errorf("pack %s on %T: stderr %q, want a bar: %v", tc.flag, tc.stderr, s, tc.bar)
		}
		if !tc.bar && s != "" {
			t.Errorf("pack %s on %T: stderr %q, want nothing", tc.flag, tc.stderr, s)
		}
		if tc.bar && !strings.Contains(s, "100% 2.5 MiB / 2.5 MiB") {
			t.Errorf("final line missing: %q", s)
		}
		if strings.Contains(stdout.String(), "pack [") {
			t.Errorf("progress on stdout: %q", stdout.String())
		}
	}
}

// TestStepBar: counts of every kind begun, the rate and time left of the
// innermost, redrawn at most ten times a second, and one final line with
// the time taken once the outermost kind is complete.
func TestStepBar(t *testing.T) {
	c := newFakeClock()
	var w fakeTerminal
	b := &stepBar{w: &w, label: "evaluate", now: c.now}
	b.Begin("reveal", 2)
	if got := lineOf(&w.Buffer); got != "evaluate  reveal 0/2" {
		t.Fatalf("after Begin: %q", got)
	}
	b.Begin("scenario", 4)
	c.advance(2 * time.Second)
	b.Step("scenario")
	if got := lineOf(&w.Buffer); got != "evaluate  reveal 0/2  scenario 1/4  0.50 scenario/s  ETA 0:06" {
		t.Fatalf("one scenario in 2 s: %q", got)
	}
	n := draws(w.String())
	b.Step("scenario") // within 100 ms of the last draw: not redrawn
	if draws(w.String()) != n {
		t.Errorf("redrawn within 100 ms")
	}
	c.advance(2 * time.Second)
	b.Step("scenario")
	b.Step("scenario")
	b.Step("reveal")
	if strings.HasSuffix(w.String(), "\n") {
		t.Fatalf("a newline before the outermost kind is complete: %q", w.String())
	}
	b.Begin("scenario", 4) // the second reveal's scenarios start over
	if got := lineOf(&w.Buffer); got != "evaluate  reveal 1/2  scenario 0/4" {
		t.Fatalf("the second reveal: %q", got)
	}
	c.advance(time.Second)
	b.Step("reveal")
	if got := w.String(); !strings.HasSuffix(got, "\x1b[K\n") || lineOf(&w.Buffer) != "evaluate  reveal 2/2  scenario 0/4  in 0:05" {
		t.Fatalf("complete: %q", lineOf(&w.Buffer))
	}
	if s := newSteps(&bytes.Buffer{}, false, "x"); s != cas.NoSteps {
		t.Errorf("steps drawn without a terminal")
	}
	if s := newSteps(&fakeTerminal{}, true, "x"); s != cas.NoSteps {
		t.Errorf("steps drawn with --json or --quiet")
	}
}
