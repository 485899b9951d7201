package main

import (
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/feval/feval/cas"
)

// stepBar draws the counts of long work on one line of stderr: every kind
// begun, in the order begun, with its count, then the rate and time left of
// the kind most recently begun (the innermost: a reveal's scenarios, say):
//
//	evaluate  reveal 1/4  scenario 3/8  0.25 scenario/s  ETA 0:20
//
// It is drawn only on a terminal and without --json or --quiet (newSteps),
// at most ten times a second, and ends with a newline once every kind begun
// is complete.
type stepBar struct {
	w     io.Writer
	label string
	now   func() time.Time

	mu      sync.Mutex
	kinds   []*stepKind
	last    time.Time
	visible bool
}

type stepKind struct {
	name        string
	total, done int
	start       time.Time
}

// newSteps returns a step bar drawn on w, or cas.NoSteps when w is not a
// terminal or quiet is set.
func newSteps(w io.Writer, quiet bool, label string) cas.Steps {
	if quiet || !isTerminal(w) {
		return cas.NoSteps
	}
	return &stepBar{w: w, label: label, now: time.Now}
}

func (b *stepBar) kind(name string) *stepKind {
	for _, k := range b.kinds {
		if k.name == name {
			return k
		}
	}
	k := &stepKind{name: name}
	b.kinds = append(b.kinds, k)
	return k
}

func (b *stepBar) Begin(name string, total int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	k := b.kind(name)
	// The most recently begun kind goes last: its rate is the one shown.
	for i, x := range b.kinds {
		if x == k {
			b.kinds = append(append(b.kinds[:i:i], b.kinds[i+1:]...), k)
			break
		}
	}
	k.total, k.done, k.start = total, 0, b.now()
	b.visible = true
	b.draw(true)
}

func (b *stepBar) Step(name string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	k := b.kind(name)
	k.done++
	b.draw(false)
}

// draw redraws the line, at most every 100 ms unless forced; the line a
// completed outermost kind leaves stays, with a newline.
func (b *stepBar) draw(force bool) {
	if !b.visible {
		return
	}
	now := b.now()
	complete := len(b.kinds) > 0 && b.kinds[0].total > 0 && b.kinds[0].done >= b.kinds[0].total
	if !force && !complete && now.Sub(b.last) < 100*time.Millisecond {
		return
	}
	b.last = now
	end := "\x1b[K"
	if complete {
		end += "\n"
		b.visible = false
	}
	fmt.Fprint(b.w, "\r"+b.line(now, complete)+end)
}

// line renders the counts, and the rate and time left (or, once complete,
// the time taken) of the innermost kind.
func (b *stepBar) line(now time.Time, complete bool) string {
	var sb strings.Builder
	sb.WriteString(b.label)
	for _, k := range b.kinds {
		fmt.Fprintf(&sb, "  %s %d/%d", k.name, k.done, k.total)
	}
	if complete {
		fmt.Fprintf(&sb, "  in %s", clock(now.Sub(b.kinds[0].start)))
		return sb.String()
	}
	k := b.kinds[len(b.kinds)-1]
	elapsed := now.Sub(k.start)
	if k.done > 0 && elapsed > 0 {
		rate := float64(k.done) / elapsed.Seconds()
		fmt.Fprintf(&sb, "  %.2f %s/s", rate, k.name)
		if k.done < k.total {
			fmt.Fprintf(&sb, "  ETA %s", clock(time.Duration(float64(k.total-k.done)/rate*float64(time.Second))))
		}
	}
	return sb.String()
}
