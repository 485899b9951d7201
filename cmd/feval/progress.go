package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/feval/feval/cas"
	"golang.org/x/term"
)

// Progress on stderr: a one-line bar with the bytes moved, the rate and the
// time left, for operations that move at least progressMinBytes, only when
// stderr is a terminal and output is neither --json nor --quiet.

// progressMinBytes is the smallest transfer that gets a bar: below it the
// operation is over before a bar would help.
const progressMinBytes = 1 << 20

// terminal is implemented by writers that know whether they are a terminal
// (test doubles); *os.File is asked through its file descriptor.
type terminal interface{ IsTerminal() bool }

func isTerminal(w io.Writer) bool {
	switch t := w.(type) {
	case terminal:
		return t.IsTerminal()
	case *os.File:
		return term.IsTerminal(int(t.Fd()))
	}
	return false
}

// newProgress returns a bar drawn on w, or cas.NoProgress when w is not a
// terminal or quiet is set (--json or --quiet).
func newProgress(w io.Writer, quiet bool, label string) cas.Progress {
	if quiet || !isTerminal(w) {
		return cas.NoProgress
	}
	return &bar{w: w, label: label, now: time.Now}
}

// progress returns the bar of a command with output options o.
func (a *appEnv) progress(o *outputOptions, label string) cas.Progress {
	return newProgress(a.stderr, o.JSON || o.Quiet, label)
}

// bar is a cas.Progress drawing one line, redrawn at most ten times a second.
// Each Start begins a new line (an operation may have several phases).
type bar struct {
	w     io.Writer
	label string
	now   func() time.Time

	mu      sync.Mutex
	total   int64
	done    int64
	start   time.Time
	last    time.Time
	visible bool
}

func (b *bar) Start(total int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.total, b.done = total, 0
	b.start = b.now()
	b.last = time.Time{}
	b.visible = total >= progressMinBytes
}

func (b *bar) Add(n int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.done += n
	if !b.visible && b.total <= 0 && b.done >= progressMinBytes {
		b.visible = true
	}
	if !b.visible {
		return
	}
	if now := b.now(); now.Sub(b.last) >= 100*time.Millisecond {
		b.last = now
		fmt.Fprint(b.w, "\r"+b.line(now, false)+"\x1b[K")
	}
}

func (b *bar) Done() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.visible {
		fmt.Fprint(b.w, "\r"+b.line(b.now(), true)+"\x1b[K\n")
	}
	b.visible = false
}

// line renders the bar: label, gauge, percentage, bytes, rate, and the time
// left (or, when final, the time taken).
func (b *bar) line(now time.Time, final bool) string {
	elapsed := now.Sub(b.start)
	var rate float64
	if elapsed > 0 {
		rate = float64(b.done) / elapsed.Seconds()
	}
	var sb strings.Builder
	sb.WriteString(b.label)
	if b.total > 0 {
		const width = 30
		frac := min(float64(b.done)/float64(b.total), 1)
		n := int(frac * width)
		fmt.Fprintf(&sb, " [%s%s] %3d%% %s / %s", strings.Repeat("=", n), strings.Repeat(" ", width-n), int(frac*100),
			humanBytes(b.done), humanBytes(b.total))
	} else {
		fmt.Fprintf(&sb, " %s", humanBytes(b.done))
	}
	if rate > 0 {
		fmt.Fprintf(&sb, "  %s/s", humanBytes(int64(rate)))
	}
	switch {
	case final:
		fmt.Fprintf(&sb, "  in %s", clock(elapsed))
	case b.total > 0 && rate > 0 && b.done < b.total:
		left := time.Duration(float64(b.total-b.done) / rate * float64(time.Second))
		fmt.Fprintf(&sb, "  ETA %s", clock(left))
	}
	return sb.String()
}

// clock renders a duration as m:ss or h:mm:ss, rounded up to the second.
func clock(d time.Duration) string {
	s := int64((d + time.Second - 1) / time.Second)
	if s >= 3600 {
		return fmt.Sprintf("%d:%02d:%02d", s/3600, s/60%60, s%60)
	}
	return fmt.Sprintf("%d:%02d", s/60, s%60)
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
