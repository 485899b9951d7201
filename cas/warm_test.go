package cas_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/feval/feval/cas"
	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

// TestWarmReferrersKeepsOnlyUnambiguousAnswers: the early Referrers API
// question about a placeholder subject decides nothing when the registry
// answers it with a registry error (a registry may say "unknown manifest"
// about a subject it lacks): the question is asked again about the real
// subject. A plain "no such route" 404 (the reference registry) is kept.
func TestWarmReferrersKeepsOnlyUnambiguousAnswers(t *testing.T) {
	for _, tc := range []struct {
		name, body string
		probes     int
	}{
		{"registry error", `{"errors":[{"code":"MANIFEST_UNKNOWN","message":"manifest unknown"}]}`, 2},
		{"no such route", "404 page not found\n", 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var mu sync.Mutex
			var probes []string
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if strings.Contains(r.URL.Path, "/referrers/") {
					mu.Lock()
					probes = append(probes, r.URL.Path)
					mu.Unlock()
					w.WriteHeader(http.StatusNotFound)
					_, _ = w.Write([]byte(tc.body))
					return
				}
				if strings.HasSuffix(r.URL.Path, "/tags/list") {
					w.Header().Set("Content-Type", "application/json")
					_, _ = w.Write([]byte(`{"name":"w/a","tags":[]}`))
					return
				}
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusNotFound)
				_, _ = w.Write([]byte(`{"errors":[{"code":"MANIFEST_UNKNOWN","message":"manifest unknown"}]}`))
			}))
			t.Cleanup(srv.Close)
			r := openVia(t, strings.TrimPrefix(srv.URL, "http://"), "w/a", cas.RemoteOptions{})
			ctx := context.Background()
			r.WarmReferrers(ctx)
			for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
				mu.Lock()
				n := len(probes)
				mu.Unlock()
				if n > 0 {
					break
				}
			}
			time.Sleep(50 * time.Millisecond) // let the answer be recorded
			subject := ocispec.Descriptor{MediaType: ocispec.MediaTypeImageManifest, Digest: digest.FromString("subject"), Size: 7}
			if _, err := r.Referrers(ctx, subject, ""); err != nil {
				t.Fatal(err)
			}
			mu.Lock()
			defer mu.Unlock()
			if len(probes) != tc.probes {
				t.Fatalf("Referrers API questions = %q, want %d", probes, tc.probes)
			}
			if !strings.HasSuffix(probes[0], ocispec.DescriptorEmptyJSON.Digest.String()) {
				t.Fatalf("the early question was about %s, want the placeholder", probes[0])
			}
		})
	}
}
