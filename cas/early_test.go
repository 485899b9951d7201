package cas_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/feval/feval/cas"
	"github.com/feval/feval/internal/testenv"
	"github.com/opencontainers/go-digest"
)

// TestPushSendsReferrerBeforeSlowLayer: in a push to a registry, a manifest
// goes up as soon as its own blobs are there: the signature (its subject's
// referrer) while the subject's large layer is still uploading, and the
// subject itself only after that layer.
func TestPushSendsReferrerBeforeSlowLayer(t *testing.T) {
	reg := testenv.StartRegistry(t)
	target, err := url.Parse("http://" + reg.Addr)
	if err != nil {
		t.Fatal(err)
	}
	src, root := signedGraph(t)
	layer := digest.FromString(strings.Repeat("payload ", 20000)).String()
	proxy := httputil.NewSingleHostReverseProxy(target)
	var mu sync.Mutex
	var events []string
	note := func(e string) {
		mu.Lock()
		events = append(events, e)
		mu.Unlock()
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		slow := r.Method == http.MethodPut && r.URL.Query().Get("digest") == layer
		if r.Method == http.MethodPut && strings.Contains(r.URL.Path, "/manifests/") {
			note("manifest " + r.URL.Path[strings.LastIndex(r.URL.Path, "/")+1:])
		}
		if slow {
			time.Sleep(500 * time.Millisecond)
		}
		proxy.ServeHTTP(w, r)
		if slow {
			note("layer done")
		}
	}))
	t.Cleanup(srv.Close)
	dst := openVia(t, strings.TrimPrefix(srv.URL, "http://"), "early/a", cas.RemoteOptions{})
	if _, err := cas.Copy(context.Background(), src, dst, root, cas.CopyOptions{Referrers: true}); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	at := func(prefix string) int {
		for i, e := range events {
			if strings.HasPrefix(e, prefix) {
				return i
			}
		}
		t.Fatalf("no %q among %q", prefix, events)
		return -1
	}
	done := at("layer done")
	if at("manifest sha256-"+root.Digest.Encoded()+".") > done {
		t.Fatalf("the first referrer went up after the slow layer: %q", events)
	}
	if at("manifest "+root.Digest.String()) < done {
		t.Fatalf("the root went up before its layer: %q", events)
	}
}
