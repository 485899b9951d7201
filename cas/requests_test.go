package cas_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/feval/feval/cas"
	"github.com/feval/feval/internal/testenv"
	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

// recorder is a reverse proxy in front of the test registry that logs every
// request and the most blob downloads it saw in flight at once. Blob GETs and
// manifest GETs by digest are held for a moment so that overlapping requests
// show; listings and blobs record, for each tag listing and blob download
// since the last take, how many manifest GETs by digest had been answered when
// it arrived.
type recorder struct {
	mu       sync.Mutex
	log      []string
	inFlight int
	maxBlobs int
	answered int
	listings []int
	blobs    []int // the same for each blob download
}

func startRecorder(t *testing.T, reg *testenv.Registry) (*recorder, string) {
	t.Helper()
	target, err := url.Parse("http://" + reg.Addr)
	if err != nil {
		t.Fatal(err)
	}
	rec := &recorder{}
	proxy := httputil.NewSingleHostReverseProxy(target)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		blob := r.Method == http.MethodGet && strings.Contains(r.URL.Path, "/blobs/")
		byDigest := r.Method == http.MethodGet && strings.Contains(r.URL.Path, "/manifests/sha256:")
		rec.mu.Lock()
		rec.log = append(rec.log, r.Method+" "+r.URL.Path)
		if blob {
			rec.inFlight++
			rec.maxBlobs = max(rec.maxBlobs, rec.inFlight)
		}
		if strings.HasSuffix(r.URL.Path, "/tags/list") {
			rec.listings = append(rec.listings, rec.answered)
		}
		if blob {
			rec.blobs = append(rec.blobs, rec.answered)
		}
		rec.mu.Unlock()
		if blob || byDigest {
			time.Sleep(100 * time.Millisecond)
		}
		proxy.ServeHTTP(w, r)
		rec.mu.Lock()
		if blob {
			rec.inFlight--
		}
		if byDigest {
			rec.answered++
		}
		rec.mu.Unlock()
	}))
	t.Cleanup(srv.Close)
	return rec, strings.TrimPrefix(srv.URL, "http://")
}

// seen reports whether a request whose path contains sub was logged since
// the last take.
func (r *recorder) seen(sub string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.ContainsFunc(r.log, func(l string) bool { return strings.Contains(l, sub) })
}

// take returns the requests logged since the last call whose path contains sub.
func (r *recorder) take(sub string) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, l := range r.log {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	r.log, r.listings, r.blobs, r.answered = nil, nil, nil, 0
	return out
}

// TestPushTagsWithManifestAndPullResolvesInOneGet checks the requests of a
// tagged push and a pull: the root manifest arrives under its tag in one PUT
// (no PUT by digest, no read of the tag) after the fallback index lists its
// referrers; a referrer's read-back lists the referrer tags and reads its own
// tag, nothing else; a pull reads a fallback index only where the tag
// listing names one (or while the listing runs, for the root); a tag resolves with one GET whose manifest the copy then
// reuses; blobs download concurrently, and while referrers are still being
// discovered.
func TestPushTagsWithManifestAndPullResolvesInOneGet(t *testing.T) {
	reg := testenv.StartRegistry(t)
	rec, addr := startRecorder(t, reg)
	src, root := signedGraph(t)
	ctx := context.Background()
	if _, err := cas.Copy(ctx, src, openVia(t, addr, "req/a", cas.RemoteOptions{}), root, cas.CopyOptions{Referrers: true, Tag: "v1"}); err != nil {
		t.Fatal(err)
	}
	push := rec.take("/v2/req/a/")
	t.Logf("requests of the push: %q", push)
	if got := matching(push, "/manifests/v1"); len(got) != 1 || got[0] != "PUT /v2/req/a/manifests/v1" {
		t.Fatalf("requests for the tag during push = %q, want one PUT", got)
	}
	// 4 blobs (HEAD, POST, PUT each), the Referrers API probe, for each of the
	// two referrers its PUT under its referrer tag, the read-back (tag list,
	// GET of its tag) and the fallback index (GET, PUT, GET to check), and the
	// tagged root.
	fallback := "/manifests/sha256-" + root.Digest.Encoded()
	if len(push) != 26 || len(matching(push, "/referrers/")) != 1 || len(matching(push, "/tags/list")) != 2 ||
		len(matching(push, fallback+".")) != 4 || len(matching(push, "HEAD ")) != 4 {
		t.Fatalf("the push made %d requests, want 26 (see the test): %q", len(push), push)
	}
	tagAt := slices.Index(push, "PUT /v2/req/a/manifests/v1")
	for i, r := range push {
		if r == "PUT /v2/req/a"+fallback && i > tagAt {
			t.Fatalf("the fallback index was written after the root: %q", push)
		}
	}
	r := openVia(t, addr, "req/a", cas.RemoteOptions{})
	// As feval pull does: the Referrers API question goes out with the
	// resolve, about a placeholder subject.
	r.WarmReferrers(ctx)
	desc, err := r.Resolve(ctx, "v1")
	if err != nil {
		t.Fatal(err)
	}
	if desc.Digest != root.Digest || desc.Size != root.Size {
		t.Fatalf("v1 resolved to %s (%d bytes), want %s (%d)", desc.Digest, desc.Size, root.Digest, root.Size)
	}
	for deadline := time.Now().Add(10 * time.Second); !rec.seen("/referrers/") && time.Now().Before(deadline); {
		time.Sleep(5 * time.Millisecond)
	}
	probe := "GET /v2/req/a/referrers/" + ocispec.DescriptorEmptyJSON.Digest.String()
	if got := rec.take("/v2/req/a/"); len(got) != 2 || !slices.Contains(got, "GET /v2/req/a/manifests/v1") || !slices.Contains(got, probe) {
		t.Fatalf("requests to resolve v1 = %q, want one GET and the probe", got)
	}
	dst, err := cas.Init(filepath.Join(t.TempDir(), "dst"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cas.Copy(ctx, r, dst, desc, cas.CopyOptions{Referrers: true}); err != nil {
		t.Fatal(err)
	}
	rec.mu.Lock()
	listings, blobs := rec.listings, rec.blobs
	rec.mu.Unlock()
	pull := rec.take("/v2/req/a/")
	t.Logf("requests of the pull: %q", pull)
	mans := matching(pull, "/manifests/")
	for _, m := range mans {
		if strings.HasSuffix(m, root.Digest.String()) {
			t.Fatalf("the pull fetched the resolved manifest again: %q", mans)
		}
	}
	// The fallback index of the root, and each referrer once (not once by
	// the index and again by its tag). The referrers have no fallback index,
	// and their tag listings say so: it is not asked for.
	if len(mans) != 3 || len(matching(mans, fallback)) != 1 {
		t.Fatalf("the pull made %d manifest requests, want 3 (one of them the root's fallback index): %q", len(mans), mans)
	}
	// A tag listing for each of the three manifests, and 4 blobs; the probe
	// was answered during the resolve.
	if len(pull) != 10 || len(matching(pull, "/referrers/")) != 0 {
		t.Fatalf("the pull made %d requests, want 10 and no second probe: %q", len(pull), pull)
	}
	// The root's blobs download while its referrers are being read.
	if len(blobs) == 0 || slices.Min(blobs) >= 2 {
		t.Fatalf("blob downloads started after %v referrer manifests had been answered, want one before both: %q", blobs, pull)
	}
	// The referrers of each referrer are listed while the referrers
	// themselves are read, not once they have arrived: all three listings
	// (the root's and its two referrers') start before both referrers'
	// manifests are answered.
	early := 0
	for _, n := range listings {
		if n < 2 {
			early++
		}
	}
	if early != 3 {
		t.Fatalf("tag listings arrived after %v referrer manifests had been answered, want all three before both: %q", listings, pull)
	}
	if rep, err := cas.Fsck(ctx, dst, nil); err != nil || len(rep.Findings) > 0 {
		t.Fatalf("pulled store: %v %v", rep.Findings, err)
	}
}

// TestResolveByDigest: resolving a digest reads that manifest and names it by
// its content's digest.
func TestResolveByDigest(t *testing.T) {
	reg := testenv.StartRegistry(t)
	src, root := signedGraph(t)
	ctx := context.Background()
	r := openRemote(t, reg.Addr, "req/b")
	if _, err := cas.Copy(ctx, src, r, root, cas.CopyOptions{}); err != nil {
		t.Fatal(err)
	}
	desc, err := openRemote(t, reg.Addr, "req/b").Resolve(ctx, root.Digest.String())
	if err != nil || desc.Digest != root.Digest {
		t.Fatalf("resolve by digest = %v, %v", desc.Digest, err)
	}
}

// matching returns the requests whose path contains sub.
func matching(reqs []string, sub string) []string {
	var out []string
	for _, r := range reqs {
		if strings.Contains(r, sub) {
			out = append(out, r)
		}
	}
	return out
}

// TestSmallBlobPushAllocatesLittle: writing a small blob into a layout sizes
// its copy buffer by the blob, so a pull of many small blobs does not allocate
// (and collect) a full transfer buffer for each.
func TestSmallBlobPushAllocatesLittle(t *testing.T) {
	l, err := cas.Init(filepath.Join(t.TempDir(), "s"))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	var perPush []uint64
	for i := range 5 {
		b := []byte(fmt.Sprintf("small blob %d", i))
		desc := ocispec.Descriptor{MediaType: "application/octet-stream", Digest: digest.FromBytes(b), Size: int64(len(b))}
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		if err := l.Push(ctx, desc, bytes.NewReader(b)); err != nil {
			t.Fatal(err)
		}
		runtime.ReadMemStats(&after)
		perPush = append(perPush, after.TotalAlloc-before.TotalAlloc)
	}
	if m := slices.Min(perPush); m > 32<<10 {
		t.Fatalf("pushing a 12-byte blob allocated at least %d bytes, want under 32 KiB (%v)", m, perPush)
	}
}
