package cas_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/feval/feval/cas"
	"github.com/feval/feval/internal/faultproxy"
	"github.com/feval/feval/internal/testenv"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

// rounds is short in the normal test run and long with FEVAL_RELIABILITY=1 (the
// reliability suite, 'make reliability').
func rounds(short, long int) int {
	if os.Getenv("FEVAL_RELIABILITY") != "" {
		return long
	}
	return short
}

// startProxy puts a fault-injecting proxy in front of reg.
func startProxy(t *testing.T, reg *testenv.Registry, cfg faultproxy.Config) *faultproxy.Proxy {
	t.Helper()
	p, err := faultproxy.Start(reg.Addr, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}

func openVia(t *testing.T, addr, repo string, opts cas.RemoteOptions) *cas.Remote {
	t.Helper()
	ref, err := cas.ParseRemote(addr + "/" + repo)
	if err != nil {
		t.Fatal(err)
	}
	r, err := cas.OpenRemote(ref, opts)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// signedGraph builds, in a fresh layout, a root with several layers and two
// referrers, like an artifact with its signature and a record about it.
func signedGraph(t *testing.T) (*cas.Layout, ocispec.Descriptor) {
	t.Helper()
	l, err := cas.Init(filepath.Join(t.TempDir(), "src"))
	if err != nil {
		t.Fatal(err)
	}
	root := artifact(t, l, "application/vnd.test.root", strings.Repeat("payload ", 20000), nil)
	artifact(t, l, "application/vnd.test.sig", "signature", &root)
	artifact(t, l, "application/vnd.test.record", "record", &root)
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	return l, root
}

// TestTransientFaultsAreRetried pushes and pulls through a proxy that injects
// one kind of transient fault into a fifth of all requests: every transfer must
// complete, and the content must arrive intact.
func TestTransientFaultsAreRetried(t *testing.T) {
	reg := testenv.StartRegistry(t)
	for i, fault := range []faultproxy.Fault{faultproxy.Status500, faultproxy.Reset, faultproxy.Short, faultproxy.Stall} {
		t.Run(string(fault), func(t *testing.T) {
			t.Parallel()
			p := startProxy(t, reg, faultproxy.Config{Faults: []faultproxy.Fault{fault}, Percent: 20, Seed: uint64(i + 1), StallFor: time.Minute})
			opts := cas.RemoteOptions{IdleTimeout: time.Second}
			for round := range rounds(1, 10) {
				src, root := signedGraph(t)
				repo := fmt.Sprintf("faults/%s%d", fault, round)
				if _, err := cas.Copy(context.Background(), src, openVia(t, p.Addr, repo, opts), root, cas.CopyOptions{Referrers: true}); err != nil {
					t.Fatalf("push through %s faults: %v", fault, err)
				}
				dst, err := cas.Init(filepath.Join(t.TempDir(), "dst"))
				if err != nil {
					t.Fatal(err)
				}
				res, err := cas.Copy(context.Background(), openVia(t, p.Addr, repo, opts), dst, root, cas.CopyOptions{Referrers: true})
				if err != nil {
					t.Fatalf("pull through %s faults: %v", fault, err)
				}
				if len(res.Manifests) != 3 {
					t.Fatalf("pulled %d manifests, want 3", len(res.Manifests))
				}
				if rep, err := cas.Fsck(context.Background(), dst, nil); err != nil || len(rep.Findings) > 0 {
					t.Fatalf("pulled store: %v %v", rep.Findings, err)
				}
			}
			total, counts := p.Counts()
			if counts[fault] == 0 {
				t.Fatalf("no %s fault was injected", fault)
			}
			t.Logf("%s: %d pushes and %d pulls completed intact through %d requests, %d of them failed by the proxy",
				fault, rounds(1, 10), rounds(1, 10), total, counts[fault])
		})
	}
}

// TestFlippedBitIsCaught flips a bit in every blob the registry serves: the pull
// must fail with a digest mismatch, never store the damaged content.
func TestFlippedBitIsCaught(t *testing.T) {
	reg := testenv.StartRegistry(t)
	src, root := signedGraph(t)
	if _, err := cas.Copy(context.Background(), src, openRemote(t, reg.Addr, "flip/a"), root, cas.CopyOptions{Referrers: true}); err != nil {
		t.Fatal(err)
	}
	p := startProxy(t, reg, faultproxy.Config{Faults: []faultproxy.Fault{faultproxy.Flip}, Percent: 100,
		Match: func(r *http.Request) bool { return strings.Contains(r.URL.Path, "/blobs/") }})
	dst, err := cas.Init(filepath.Join(t.TempDir(), "dst"))
	if err != nil {
		t.Fatal(err)
	}
	_, err = cas.Copy(context.Background(), openVia(t, p.Addr, "flip/a", cas.RemoteOptions{}), dst, root, cas.CopyOptions{Referrers: true})
	if !errors.Is(err, cas.ErrDigestMismatch) {
		t.Fatalf("pull of flipped content = %v, want ErrDigestMismatch", err)
	}
	if rep, _ := cas.Fsck(context.Background(), dst, nil); rep.Blobs > 2 {
		// Only manifests' small blobs (config) can have arrived; no layer.
		t.Fatalf("damaged pull stored %d blobs", rep.Blobs)
	}
}

// TestStalledRegistryTimesOut sends every request into a stall: a pull must fail
// with a registry error within a few idle timeouts, and a deadline must end a
// transfer that keeps being retried.
func TestStalledRegistryTimesOut(t *testing.T) {
	reg := testenv.StartRegistry(t)
	src, root := signedGraph(t)
	if _, err := cas.Copy(context.Background(), src, openRemote(t, reg.Addr, "stall/a"), root, cas.CopyOptions{Referrers: true}); err != nil {
		t.Fatal(err)
	}
	p := startProxy(t, reg, faultproxy.Config{Faults: []faultproxy.Fault{faultproxy.Stall}, Percent: 100, StallFor: 10 * time.Minute})
	dst, err := cas.Init(filepath.Join(t.TempDir(), "dst"))
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(2 * time.Second)
	r := openVia(t, p.Addr, "stall/a", cas.RemoteOptions{IdleTimeout: 200 * time.Millisecond, Deadline: deadline})
	_, err = cas.Copy(context.Background(), r, dst, root, cas.CopyOptions{Referrers: true})
	if !errors.Is(err, cas.ErrRegistry) {
		t.Fatalf("pull from a stalled registry = %v, want ErrRegistry", err)
	}
	if late := time.Since(deadline); late > 5*time.Second {
		t.Fatalf("the pull ended %v after its deadline", late)
	}
	if strings.Contains(err.Error(), "\n") {
		t.Fatalf("error is not one line: %q", err)
	}
}
