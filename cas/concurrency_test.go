package cas_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/feval/feval/cas"
	"github.com/feval/feval/internal/testenv"
	ggcr "github.com/google/go-containerregistry/pkg/registry"
	"github.com/opencontainers/go-digest"
)

// committers is how many parties attach a record to one subject at once.
const committers = 32

// openRemote opens repo on the registry at addr.
func openRemote(t *testing.T, addr, repo string) *cas.Remote {
	t.Helper()
	ref, err := cas.ParseRemote(addr + "/" + repo)
	if err != nil {
		t.Fatal(err)
	}
	r, err := cas.OpenRemote(ref, cas.RemoteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// concurrentReferrers has committers parties, each with its own connection (as
// separate processes would), push a referrer of one subject at the same moment,
// and requires every one of them to be discoverable afterwards.
func concurrentReferrers(t *testing.T, open func() cas.Store) {
	ctx := context.Background()
	owner := open()
	subject := artifact(t, owner, "application/vnd.test.round", "round", nil)
	var wg sync.WaitGroup
	start := make(chan struct{})
	pushed := make([]digest.Digest, committers)
	errs := make([]error, committers)
	for i := range committers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s := open()
			<-start
			d, err := makeArtifact(s, "application/vnd.test.commitment", fmt.Sprintf("commitment %d", i), &subject)
			if err == nil {
				err = s.Close()
			}
			pushed[i], errs[i] = d.Digest, err
		}()
	}
	close(start)
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("committer %d: %v", i, err)
		}
	}
	refs, err := open().Referrers(ctx, subject, "application/vnd.test.commitment")
	if err != nil {
		t.Fatal(err)
	}
	found := map[digest.Digest]bool{}
	for _, r := range refs {
		found[r.Digest] = true
	}
	lost := 0
	for _, d := range pushed {
		if !found[d] {
			lost++
		}
	}
	if lost > 0 || len(refs) != committers {
		t.Fatalf("%d of %d concurrently pushed referrers are not discoverable (%d listed)", lost, committers, len(refs))
	}
}

// TestConcurrentReferrersReferenceRegistry runs the committers against the
// reference registry, which has no Referrers API: discovery goes through one tag
// per record.
func TestConcurrentReferrersReferenceRegistry(t *testing.T) {
	reg := testenv.StartRegistry(t)
	concurrentReferrers(t, func() cas.Store { return openRemote(t, reg.Addr, "race/round") })
	// The records are tags of the documented form, not a shared index.
	n := 0
	for _, tag := range listTags(t, reg.Addr, "race/round") {
		if len(tag) == 120 && strings.HasPrefix(tag, "sha256-") {
			n++
		}
	}
	if n != committers {
		t.Fatalf("%d referrer tags, want %d", n, committers)
	}
}

// TestConcurrentReferrersAPI runs the committers against go-containerregistry's
// in-process registry with the Referrers API enabled: discovery goes through the
// API and no referrer tag is written.
func TestConcurrentReferrersAPI(t *testing.T) {
	srv := httptest.NewServer(ggcr.New(ggcr.WithReferrersSupport(true), ggcr.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(srv.Close)
	addr := strings.TrimPrefix(srv.URL, "http://")
	concurrentReferrers(t, func() cas.Store { return openRemote(t, addr, "race/round") })
	tags := listTags(t, addr, "race/round")
	for _, tag := range tags {
		if strings.HasPrefix(tag, "sha256-") {
			t.Fatalf("referrer tag %s written to a registry with the Referrers API", tag)
		}
	}
}

// TestConcurrentReferrersLayout runs the committers against one local layout,
// each with its own handle (as separate processes would).
func TestConcurrentReferrersLayout(t *testing.T) {
	root := filepath.Join(t.TempDir(), "store")
	if _, err := cas.Init(root); err != nil {
		t.Fatal(err)
	}
	concurrentReferrers(t, func() cas.Store {
		l, err := cas.OpenLayout(root)
		if err != nil {
			t.Fatal(err)
		}
		return l
	})
}

// TestReferrerTagGrammar checks the documented referrer tag form.
func TestReferrerTagGrammar(t *testing.T) {
	s, r := digest.FromString("subject"), digest.FromString("referrer")
	tag := cas.ReferrerTag(s, r)
	want := "sha256-" + s.Encoded() + "." + r.Encoded()[:48]
	if tag != want || !cas.ValidTag(tag) || len(tag) != 120 {
		t.Fatalf("ReferrerTag = %q (valid %v, %d chars), want %q", tag, cas.ValidTag(tag), len(tag), want)
	}
}

// TestForgedReferrerTagIgnored pushes, under a subject's referrer tag, a manifest
// whose subject is something else: discovery must not list it.
func TestForgedReferrerTagIgnored(t *testing.T) {
	reg := testenv.StartRegistry(t)
	ctx := context.Background()
	r := openRemote(t, reg.Addr, "forge/round")
	subject := artifact(t, r, "application/vnd.test.round", "round", nil)
	other := artifact(t, r, "application/vnd.test.round", "other round", nil)
	liar := artifact(t, r, "application/vnd.test.commitment", "liar", &other)
	if err := r.Tag(ctx, liar, cas.ReferrerTag(subject.Digest, liar.Digest)); err != nil {
		t.Fatal(err)
	}
	refs, err := openRemote(t, reg.Addr, "forge/round").Referrers(ctx, subject, "")
	if err != nil || len(refs) != 0 {
		t.Fatalf("referrers of subject = %v, %v; want none", refs, err)
	}
}

func listTags(t *testing.T, addr, repo string) []string {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/v2/" + repo + "/tags/list")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var list struct{ Tags []string }
	if err := json.NewDecoder(resp.Body).Decode(&list); err != nil {
		t.Fatal(err)
	}
	return list.Tags
}

// TestReferrerFirstIntoNewRepository pushes a referrer before anything else into
// a fresh repository of a registry with the Referrers API (as Copy does: a
// signature before its subject): the API is detected and no referrer tag is
// written.
func TestReferrerFirstIntoNewRepository(t *testing.T) {
	srv := httptest.NewServer(ggcr.New(ggcr.WithReferrersSupport(true), ggcr.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(srv.Close)
	addr := strings.TrimPrefix(srv.URL, "http://")
	src := newLayout(t)
	root := artifact(t, src, "application/vnd.test.root", "root", nil)
	artifact(t, src, "application/vnd.test.sig", "sig", &root)
	if _, err := cas.Copy(context.Background(), src, openRemote(t, addr, "fresh/repo"), root, cas.CopyOptions{Referrers: true}); err != nil {
		t.Fatal(err)
	}
	for _, tag := range listTags(t, addr, "fresh/repo") {
		if strings.HasPrefix(tag, "sha256-") {
			t.Fatalf("referrer tag %s written to a registry with the Referrers API", tag)
		}
	}
	refs, err := openRemote(t, addr, "fresh/repo").Referrers(context.Background(), root, "application/vnd.test.sig")
	if err != nil || len(refs) != 1 {
		t.Fatalf("referrers after copy: %v, %v", refs, err)
	}
}
