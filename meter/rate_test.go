package meter_test

import (
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/feval/feval/fixtures/upstream"
	"github.com/feval/feval/meter"
)

// flood sends n calls of one scenario at once and returns the statuses.
func flood(t *testing.T, base, scenario string, n int) []int {
	t.Helper()
	statuses := make([]int, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			statuses[i], _, _ = post(t, base, scenario, "application/json", chat("glm-4.5", fmt.Sprintf("call %d", i), map[string]any{"max_tokens": 16}))
		}()
	}
	wg.Wait()
	return statuses
}

// TestRateHoldsConcurrencyUpstream: a scenario that sends 24 calls at once
// reaches an upstream that answers 429 past 3 concurrent calls, with no
// retries. With rate.max_concurrent 3 the meter holds the calls back and
// every call succeeds; with a bound the provider does not accept, the same
// flood provokes 429s (so the test can fail).
func TestRateHoldsConcurrencyUpstream(t *testing.T) {
	for _, c := range []struct {
		concurrent int
		limited    bool
	}{{3, false}, {24, true}} {
		t.Run(fmt.Sprint("max_concurrent=", c.concurrent), func(t *testing.T) {
			up, url := startUpstream(t, upstream.Options{LatencyMillis: 100, Faults: upstream.Faults{MaxConcurrent: 3}})
			cfg := testConfig(t, url)
			cfg.Retry.MaxAttempts = 1
			cfg.Rate = meter.Rate{MaxConcurrent: c.concurrent, Calls: 1000, WindowMillis: 60_000}
			m, base := newMeter(t, cfg, meter.Options{})
			statuses := flood(t, base, "flood", 24)
			failed := 0
			for _, st := range statuses {
				if st != http.StatusOK {
					failed++
				}
			}
			if got := up.RateLimited() > 0; got != c.limited || (failed > 0) != c.limited {
				t.Fatalf("upstream answered %d calls 429, %d of 24 calls failed; want rate-limited: %v", up.RateLimited(), failed, c.limited)
			}
			if !c.limited {
				for _, s := range meter.Summarize(m.Recorder().Receipts()) {
					if s.Status != meter.StatusOK || s.Calls != 24 {
						t.Errorf("summary %+v: want 24 calls, ok", s)
					}
				}
			}
		})
	}
}

// TestRateHoldsCallsPerWindow: 9 calls at once against rate.calls 3 per
// 400 ms start in three waves, at least 400 ms apart; an upstream that
// answers 429 past 3 calls in 200 ms (half the window, for the latency
// between the meter and it) never does. Without the bound it does.
func TestRateHoldsCallsPerWindow(t *testing.T) {
	for _, c := range []struct {
		calls   int
		limited bool
	}{{3, false}, {9, true}} {
		t.Run(fmt.Sprint("calls=", c.calls), func(t *testing.T) {
			up, url := startUpstream(t, upstream.Options{Faults: upstream.Faults{RateCalls: 3, RateWindowMillis: 200}})
			cfg := testConfig(t, url)
			cfg.Retry.MaxAttempts = 1
			cfg.Rate = meter.Rate{MaxConcurrent: 16, Calls: c.calls, WindowMillis: 400}
			_, base := newMeter(t, cfg, meter.Options{})
			start := time.Now()
			flood(t, base, "flood", 9)
			elapsed := time.Since(start)
			if got := up.RateLimited() > 0; got != c.limited {
				t.Fatalf("upstream answered %d calls 429; want rate-limited: %v", up.RateLimited(), c.limited)
			}
			if !c.limited && elapsed < 800*time.Millisecond {
				t.Errorf("9 calls at 3 per 400 ms took %v, want at least 800 ms", elapsed)
			}
		})
	}
}

// TestRateRefusesBadConfig: every rate member has a range.
func TestRateRefusesBadConfig(t *testing.T) {
	for _, r := range []meter.Rate{{0, 1, 1}, {257, 1, 1}, {1, 0, 1}, {1, 100_001, 1}, {1, 1, 0}, {1, 1, 3_600_001}} {
		cfg := meter.ReferenceConfig([]string{"glm-4.5"}, "http://127.0.0.1:9/v1")
		cfg.Rate = r
		if err := cfg.Validate(); err == nil {
			t.Errorf("rate %+v: accepted", r)
		}
	}
}
