package cas_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/feval/feval/cas"
	"github.com/feval/feval/internal/faultproxy"
	"github.com/feval/feval/internal/testenv"
	"github.com/opencontainers/go-digest"
)

// TestFailedPullNamesNoBlob: a pull into a layout gives its blobs their names
// only once every blob has arrived (they are then synced together), so a pull
// that fails on its last blob leaves no blob of it in the store, named or
// temporary, even those that arrived intact.
func TestFailedPullNamesNoBlob(t *testing.T) {
	reg := testenv.StartRegistry(t)
	src, root := signedGraph(t)
	if _, err := cas.Copy(context.Background(), src, openRemote(t, reg.Addr, "batch/a"), root, cas.CopyOptions{Referrers: true}); err != nil {
		t.Fatal(err)
	}
	// The root's large layer arrives last, damaged.
	layer := digest.FromString(strings.Repeat("payload ", 20000)).String()
	p := startProxy(t, reg, faultproxy.Config{Faults: []faultproxy.Fault{faultproxy.Flip}, Percent: 100,
		Match: func(r *http.Request) bool { return strings.HasSuffix(r.URL.Path, "/blobs/"+layer) }})
	target, err := url.Parse("http://" + p.Addr)
	if err != nil {
		t.Fatal(err)
	}
	proxy := httputil.NewSingleHostReverseProxy(target)
	late := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/blobs/"+layer) {
			time.Sleep(300 * time.Millisecond)
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(late.Close)
	dst, err := cas.Init(filepath.Join(t.TempDir(), "dst"))
	if err != nil {
		t.Fatal(err)
	}
	_, err = cas.Copy(context.Background(), openVia(t, strings.TrimPrefix(late.URL, "http://"), "batch/a", cas.RemoteOptions{}), dst, root, cas.CopyOptions{Referrers: true})
	if !errors.Is(err, cas.ErrDigestMismatch) {
		t.Fatalf("pull with a damaged layer = %v, want ErrDigestMismatch", err)
	}
	ents, err := os.ReadDir(filepath.Join(dst.Root(), "blobs", "sha256"))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	if len(names) > 0 {
		t.Fatalf("a failed pull left %d files in blobs/sha256, want none: %q", len(names), names)
	}
	if err := dst.Close(); err != nil {
		t.Fatal(err)
	}
}
