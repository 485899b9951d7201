package meter_test

import (
	"fmt"
	"math/rand/v2"
	"net/http"
	"runtime"
	"sync"
	"testing"

	"github.com/feval/feval/fixtures/upstream"
	"github.com/feval/feval/meter"
)

// TestCapHoldsUnderConcurrency is the cap's property test: many concurrent calls
// with random output bounds, against a cap a few calls exhaust, through the real
// server and upstream. At no instant do settled plus reserved costs pass the cap,
// the settled total never does, and calls past the budget are refused.
func TestCapHoldsUnderConcurrency(t *testing.T) {
	_, up := startUpstream(t, upstream.Options{PerTokenMicros: 5})
	for seed := uint64(1); seed <= 3; seed++ {
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) {
			cfg := testConfig(t, up)
			cfg.CapMicroUSD = 2_000
			m, base := newMeter(t, cfg, meter.Options{})
			s := mustScenario(t, m, "tight")
			rng := rand.New(rand.NewPCG(seed, 7))
			names := models(t)
			const calls = 200
			bodies := make([][]byte, calls)
			for i := range bodies {
				bodies[i] = chat(names[rng.IntN(len(names))], fmt.Sprintf("task %d: %s", i, "refactor the module"),
					map[string]any{"max_tokens": 1 + rng.IntN(400), "stream": rng.IntN(2) == 0})
			}
			stop := make(chan struct{})
			var watch sync.WaitGroup
			watch.Add(1)
			var worst int64
			go func() { // observe the ledger while calls run
				defer watch.Done()
				for {
					select {
					case <-stop:
						return
					default:
					}
					sp, res := s.Spent()
					worst = max(worst, sp+res)
					runtime.Gosched()
				}
			}()
			var wg sync.WaitGroup
			sem := make(chan struct{}, 32)
			for i := range calls {
				wg.Add(1)
				sem <- struct{}{}
				go func() {
					defer wg.Done()
					defer func() { <-sem }()
					status, b, _ := post(t, base, "tight", "application/json", bodies[i])
					if status != 200 && status != http.StatusPaymentRequired {
						t.Errorf("call %d: status %d %s", i, status, b)
					}
				}()
			}
			wg.Wait()
			close(stop)
			watch.Wait()
			var total int64
			refused, ok := 0, 0
			for _, r := range m.Recorder().Receipts() {
				total += r.CostMicroUSD
				switch r.Outcome {
				case meter.OutcomeRefusedCap:
					refused++
				case meter.OutcomeOK:
					ok++
					if r.OverReservation {
						t.Errorf("receipt %d: the fixture's usage passed the meter's bound", r.Seq)
					}
				default:
					t.Errorf("receipt %+v", r)
				}
			}
			sp, res := s.Spent()
			if total > cfg.CapMicroUSD || sp != total || res != 0 || worst > cfg.CapMicroUSD {
				t.Fatalf("cap %d: receipts total %d, ledger spent %d reserved %d, worst in flight %d", cfg.CapMicroUSD, total, sp, res, worst)
			}
			if refused == 0 || ok == 0 {
				t.Fatalf("%d ok, %d refused: the test does not exercise the cap", ok, refused)
			}
		})
	}
}

// TestBudgetInvariant drives the ledger alone with random interleavings.
func TestBudgetInvariant(t *testing.T) {
	const cap = 1000
	var b meter.Budget
	b.Init(cap)
	var wg sync.WaitGroup
	for g := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(g), 1))
			for range 2000 {
				r := rng.Int64N(300)
				if b.Reserve(r) != nil {
					continue
				}
				if sp, res := b.State(); sp+res > cap {
					t.Errorf("spent %d + reserved %d > cap", sp, res)
				}
				b.Settle(r, rng.Int64N(2*r+1)) // an upstream may report more than reserved
			}
		}()
	}
	wg.Wait()
	if sp, res := b.State(); sp > cap || res != 0 {
		t.Fatalf("spent %d reserved %d", sp, res)
	}
}
