package meter_test

import (
	"bytes"
	"io"
	"net/http"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/feval/feval/fixtures/upstream"
	"github.com/feval/feval/meter"
)

// BenchmarkMeter measures, in one run against the fixture upstream (no
// simulated latency) on loopback:
//
//   - direct-p50-us / meter-p50-us: the median latency of a non-streamed call
//     to the upstream directly and through the meter, calls interleaved so both
//     see the same machine load; overhead-p50-us is their difference;
//   - calls/s and direct-calls/s: throughput of non-streamed calls through the
//     meter and to the upstream directly, from 4 x GOMAXPROCS concurrent
//     clients (client, meter and upstream share the machine's cores).
//
// Run: go test -run '^$' -bench BenchmarkMeter -benchtime 2000x ./meter/
func BenchmarkMeter(b *testing.B) {
	_, up := startUpstream(b, upstream.Options{})
	cfg := testConfig(b, up)
	cfg.CapMicroUSD = meter.MaxCapMicroUSD // the benchmark measures speed, not the cap
	_, base := newMeter(b, cfg, meter.Options{})
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 256, MaxIdleConns: 256}}
	body := chat("gpt-oss-120b", "Summarise the parser module in one paragraph.", map[string]any{"max_tokens": 64})
	call := func(url string, scenario string) {
		req, _ := http.NewRequest(http.MethodPost, url+"/chat/completions", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set(meter.ScenarioHeader, scenario)
		resp, err := client.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			b.Fatalf("status %d", resp.StatusCode)
		}
	}
	for range 50 { // warm connections
		call(up, "warm")
		call(base, "warm")
	}
	b.ResetTimer()
	direct := make([]time.Duration, 0, b.N)
	metered := make([]time.Duration, 0, b.N)
	for i := range b.N {
		order := []string{up, base}
		if i%2 == 1 { // alternate which goes first
			order[0], order[1] = base, up
		}
		for _, url := range order {
			t0 := time.Now()
			call(url, "latency")
			if d := time.Since(t0); url == up {
				direct = append(direct, d)
			} else {
				metered = append(metered, d)
			}
		}
	}
	p50 := func(ds []time.Duration) float64 {
		slices.Sort(ds)
		return float64(ds[len(ds)/2].Nanoseconds()) / 1e3
	}
	dp, mp := p50(direct), p50(metered)
	b.ReportMetric(dp, "direct-p50-us")
	b.ReportMetric(mp, "meter-p50-us")
	b.ReportMetric(mp-dp, "overhead-p50-us")

	workers := 4 * runtime.GOMAXPROCS(0)
	throughput := func(url string) float64 {
		var next atomic.Int64
		var wg sync.WaitGroup
		t0 := time.Now()
		for range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for next.Add(1) <= int64(b.N) {
					call(url, "throughput")
				}
			}()
		}
		wg.Wait()
		return float64(b.N) / time.Since(t0).Seconds()
	}
	b.ReportMetric(throughput(up), "direct-calls/s")
	b.ReportMetric(throughput(base), "calls/s")
}

// BenchmarkCanonicalRequest is the meter's own per-request parsing cost (the
// canonical form and digest of a small chat request), apart from HTTP.
func BenchmarkCanonicalRequest(b *testing.B) {
	body := chat("gpt-oss-120b", "Summarise the parser module in one paragraph.", map[string]any{"max_tokens": 64, "temperature": 0.2})
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		if meter.RequestDigest(body) == "" {
			b.Fatal("no digest")
		}
	}
}
