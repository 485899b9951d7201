package meter

import (
	"sync"
	"time"
)

// pacer holds one scenario's upstream calls to a Rate: at most
// MaxConcurrent in flight, and at most Calls started in any WindowMillis. A
// call waits for its turn; it is never refused, so what a scenario records
// does not depend on how fast its policy sends (METER.md §3, rate). It runs
// on the wall clock: pacing is about the provider, and nothing of it is
// recorded.
type pacer struct {
	slots  chan struct{} // one token per call in flight
	window time.Duration

	mu     sync.Mutex
	starts []time.Time // the last len(starts) start times, a ring
	next   int         // the oldest entry of starts
}

func newPacer(r Rate) *pacer {
	return &pacer{slots: make(chan struct{}, r.MaxConcurrent), window: millis(r.WindowMillis), starts: make([]time.Time, r.Calls)}
}

// start waits until a call may go upstream and returns the function that
// ends it. A retry is part of its call: it holds the call's slot and does not
// count again.
func (p *pacer) start() (done func()) {
	p.slots <- struct{}{}
	for {
		p.mu.Lock()
		now := time.Now()
		oldest := p.starts[p.next]
		if oldest.IsZero() || now.Sub(oldest) >= p.window {
			p.starts[p.next] = now
			p.next = (p.next + 1) % len(p.starts)
			p.mu.Unlock()
			return func() { <-p.slots }
		}
		wait := p.window - now.Sub(oldest)
		p.mu.Unlock()
		time.Sleep(wait)
	}
}
