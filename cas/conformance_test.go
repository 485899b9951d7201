package cas_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/feval/feval/cas"
	"github.com/feval/feval/internal/testenv"
	"github.com/opencontainers/go-digest"
	specs "github.com/opencontainers/image-spec/specs-go"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

// backend is one Store implementation under the conformance suite, with a way to
// damage a blob behind the store's back.
type backend struct {
	name    string
	open    func(t *testing.T) cas.Store
	corrupt func(t *testing.T, s cas.Store, d digest.Digest)
}

func backends(t *testing.T) []backend {
	reg := testenv.StartRegistry(t)
	n := 0
	return []backend{
		{
			name: "layout",
			open: func(t *testing.T) cas.Store {
				l, err := cas.Init(filepath.Join(t.TempDir(), "store"))
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { l.Close() })
				return l
			},
			corrupt: func(t *testing.T, s cas.Store, d digest.Digest) { flip(t, s.(*cas.Layout).BlobPath(d)) },
		},
		{
			name: "registry",
			open: func(t *testing.T) cas.Store {
				n++
				ref, err := cas.ParseRemote(fmt.Sprintf("%s/conformance/r%d", reg.Addr, n))
				if err != nil {
					t.Fatal(err)
				}
				r, err := cas.OpenRemote(ref, cas.RemoteOptions{})
				if err != nil {
					t.Fatal(err)
				}
				return r
			},
			corrupt: func(t *testing.T, _ cas.Store, d digest.Digest) {
				flip(t, filepath.Join(reg.Root, "docker/registry/v2/blobs/sha256", d.Encoded()[:2], d.Encoded(), "data"))
			},
		},
	}
}

func flip(t *testing.T, path string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	b[0] ^= 1
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func push(t *testing.T, s cas.Store, mediaType string, b []byte) ocispec.Descriptor {
	t.Helper()
	d, err := pushBytes(s, mediaType, b)
	if err != nil {
		t.Fatalf("push %s: %v", d.Digest, err)
	}
	return d
}

func pushBytes(s cas.Store, mediaType string, b []byte) (ocispec.Descriptor, error) {
	d := ocispec.Descriptor{MediaType: mediaType, Digest: digest.FromBytes(b), Size: int64(len(b))}
	return d, s.Push(context.Background(), d, bytes.NewReader(b))
}

// artifact pushes a small manifest (with an optional subject) and returns it.
func artifact(t *testing.T, s cas.Store, artifactType, content string, subject *ocispec.Descriptor) ocispec.Descriptor {
	t.Helper()
	d, err := makeArtifact(s, artifactType, content, subject)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func makeArtifact(s cas.Store, artifactType, content string, subject *ocispec.Descriptor) (ocispec.Descriptor, error) {
	cfg, err := pushBytes(s, ocispec.MediaTypeEmptyJSON, []byte("{}"))
	if err != nil {
		return cfg, err
	}
	layer, err := pushBytes(s, "application/octet-stream", []byte(content))
	if err != nil {
		return layer, err
	}
	m := ocispec.Manifest{Versioned: specs.Versioned{SchemaVersion: 2}, MediaType: ocispec.MediaTypeImageManifest,
		ArtifactType: artifactType, Config: cfg, Layers: []ocispec.Descriptor{layer}, Subject: subject}
	b, _ := json.Marshal(m)
	d, err := pushBytes(s, ocispec.MediaTypeImageManifest, b)
	d.ArtifactType = artifactType
	return d, err
}

func readAll(t *testing.T, s cas.Store, d ocispec.Descriptor) ([]byte, error) {
	rc, err := s.Fetch(context.Background(), d)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	return io.ReadAll(rc)
}

func TestConformance(t *testing.T) {
	ctx := context.Background()
	for _, be := range backends(t) {
		t.Run(be.name, func(t *testing.T) {
			t.Run("blob round trip", func(t *testing.T) {
				s := be.open(t)
				d := push(t, s, "application/octet-stream", []byte("hello"))
				got, err := readAll(t, s, d)
				if err != nil || string(got) != "hello" {
					t.Fatalf("fetch = %q, %v", got, err)
				}
				if ok, err := s.Exists(ctx, d); !ok || err != nil {
					t.Fatalf("Exists = %v, %v", ok, err)
				}
			})
			t.Run("unknown digest is ErrNotFound", func(t *testing.T) {
				s := be.open(t)
				d := ocispec.Descriptor{MediaType: "application/octet-stream", Digest: digest.FromString("absent"), Size: 6}
				if _, err := s.Fetch(ctx, d); !errors.Is(err, cas.ErrNotFound) {
					t.Fatalf("Fetch = %v, want ErrNotFound", err)
				}
				if ok, _ := s.Exists(ctx, d); ok {
					t.Fatal("Exists says yes")
				}
				if _, err := s.Resolve(ctx, "no-such-tag"); !errors.Is(err, cas.ErrNotFound) {
					t.Fatalf("Resolve = %v, want ErrNotFound", err)
				}
			})
			t.Run("push with wrong digest stores nothing", func(t *testing.T) {
				s := be.open(t)
				d := ocispec.Descriptor{MediaType: "application/octet-stream", Digest: digest.FromString("claimed"), Size: 7}
				if err := s.Push(ctx, d, strings.NewReader("content")); err == nil {
					t.Fatal("push of mismatching content succeeded")
				}
				if ok, _ := s.Exists(ctx, d); ok {
					t.Fatal("mismatching content was stored")
				}
			})
			t.Run("reads are verified", func(t *testing.T) {
				s := be.open(t)
				d := push(t, s, "application/octet-stream", []byte("precious content"))
				be.corrupt(t, s, d.Digest)
				_, err := readAll(t, s, d)
				if !errors.Is(err, cas.ErrDigestMismatch) {
					t.Fatalf("reading damaged content gave %v, want ErrDigestMismatch", err)
				}
			})
			t.Run("short and long content refused", func(t *testing.T) {
				s := be.open(t)
				d := push(t, s, "application/octet-stream", []byte("abcdef"))
				short := d
				short.Size = 5
				if _, err := readAll(t, s, short); err == nil {
					t.Fatal("a descriptor shorter than the content read without error")
				}
			})
			t.Run("tags and resolve", func(t *testing.T) {
				s := be.open(t)
				a := artifact(t, s, "application/vnd.test.a", "a", nil)
				b := artifact(t, s, "application/vnd.test.b", "b", nil)
				if got, err := s.Resolve(ctx, a.Digest.String()); err != nil || got.Digest != a.Digest {
					t.Fatalf("Resolve(digest) = %v, %v", got.Digest, err)
				}
				if err := s.Tag(ctx, a, "v1"); err != nil {
					t.Fatal(err)
				}
				if got, _ := s.Resolve(ctx, "v1"); got.Digest != a.Digest {
					t.Fatalf("v1 -> %s, want %s", got.Digest, a.Digest)
				}
				if err := s.Tag(ctx, b, "v1"); err != nil {
					t.Fatal(err)
				}
				if got, _ := s.Resolve(ctx, "v1"); got.Digest != b.Digest {
					t.Fatalf("re-tagged v1 -> %s, want %s", got.Digest, b.Digest)
				}
				if err := s.Tag(ctx, a, "bad/tag"); !errors.Is(err, cas.ErrBadReference) {
					t.Fatalf("bad tag: %v", err)
				}
			})
			t.Run("referrers", func(t *testing.T) {
				s := be.open(t)
				subj := artifact(t, s, "application/vnd.test.subject", "subject", nil)
				var sigs []digest.Digest
				for i := 0; i < 3; i++ {
					sigs = append(sigs, artifact(t, s, "application/vnd.test.sig", fmt.Sprint("sig", i), &subj).Digest)
				}
				other := artifact(t, s, "application/vnd.test.other", "other", &subj)
				artifact(t, s, "application/vnd.test.sig", "unrelated", nil)
				all, err := s.Referrers(ctx, subj, "")
				if err != nil {
					t.Fatal(err)
				}
				if len(all) != 4 {
					t.Fatalf("%d referrers, want 4: %v", len(all), all)
				}
				onlySigs, err := s.Referrers(ctx, subj, "application/vnd.test.sig")
				if err != nil {
					t.Fatal(err)
				}
				if len(onlySigs) != 3 {
					t.Fatalf("%d sig referrers, want 3", len(onlySigs))
				}
				for i, r := range onlySigs {
					if r.Digest == other.Digest || !slices.Contains(sigs, r.Digest) {
						t.Fatalf("sig referrer %d is %s, not one of the signatures pushed", i, r.Digest)
					}
				}
				late := artifact(t, s, "application/vnd.test.sig", "late", &subj)
				again, err := s.Referrers(ctx, subj, "application/vnd.test.sig")
				if err != nil || len(again) != 4 || !slices.ContainsFunc(again, func(d ocispec.Descriptor) bool { return d.Digest == late.Digest }) {
					t.Fatalf("a referrer pushed after a lookup is missing: %v, %v", again, err)
				}
				none, err := s.Referrers(ctx, other, "")
				if err != nil || len(none) != 0 {
					t.Fatalf("referrers of a leaf: %v, %v", none, err)
				}
			})
			t.Run("oversized manifest refused", func(t *testing.T) {
				s := be.open(t)
				d := ocispec.Descriptor{MediaType: ocispec.MediaTypeImageManifest, Digest: digest.FromString("x"), Size: cas.MaxManifestSize + 1}
				if err := s.Push(ctx, d, strings.NewReader("x")); !errors.Is(err, cas.ErrTooLarge) {
					t.Fatalf("push = %v, want ErrTooLarge", err)
				}
			})
		})
	}
}

// TestCopyWithReferrers copies a graph layout -> registry -> layout and requires
// every manifest, blob and referrer to arrive.
func TestCopyWithReferrers(t *testing.T) {
	ctx := context.Background()
	bes := backends(t)
	src, mid, dst := bes[0].open(t), bes[1].open(t), bes[0].open(t)
	root := artifact(t, src, "application/vnd.test.root", "root", nil)
	sig := artifact(t, src, "application/vnd.test.sig", "sig", &root)
	rev := artifact(t, src, "application/vnd.test.reveal", "reveal", &root)
	sigOfRev := artifact(t, src, "application/vnd.test.sig", "sig of reveal", &rev)
	for _, hop := range []struct{ from, to cas.Store }{{src, mid}, {mid, dst}} {
		res, err := cas.Copy(ctx, hop.from, hop.to, root, cas.CopyOptions{Referrers: true})
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Manifests) != 4 {
			t.Fatalf("copied %d manifests, want 4", len(res.Manifests))
		}
	}
	for _, d := range []ocispec.Descriptor{root, sig, rev, sigOfRev} {
		if ok, err := dst.Exists(ctx, d); !ok || err != nil {
			t.Fatalf("%s missing after copy: %v", d.Digest, err)
		}
	}
	refs, err := dst.Referrers(ctx, rev, "")
	if err != nil || len(refs) != 1 || refs[0].Digest != sigOfRev.Digest {
		t.Fatalf("referrers of reveal after copy: %v, %v", refs, err)
	}
	// Copying up from a referrer with Subjects brings the subject too.
	up := bes[0].open(t)
	if _, err := cas.Copy(ctx, dst, up, sigOfRev, cas.CopyOptions{Subjects: true}); err != nil {
		t.Fatal(err)
	}
	for _, d := range []ocispec.Descriptor{rev, root} {
		if ok, _ := up.Exists(ctx, d); !ok {
			t.Fatalf("subject %s not copied", d.Digest)
		}
	}
}

// TestCopyUpwardTakesOnlySignatures publishes a round the way push does: its
// subject (the task) goes with the task's signature but not with the task's
// other referrers (a draft round), unless Siblings asks for them.
func TestCopyUpwardTakesOnlySignatures(t *testing.T) {
	ctx := context.Background()
	for _, be := range backends(t) {
		t.Run(be.name, func(t *testing.T) {
			src := be.open(t)
			task := artifact(t, src, "application/vnd.test.task", "task", nil)
			taskSig := artifact(t, src, cas.SignatureArtifactType, "task sig", &task)
			round := artifact(t, src, "application/vnd.test.round", "round", &task)
			roundSig := artifact(t, src, cas.SignatureArtifactType, "round sig", &round)
			draft := artifact(t, src, "application/vnd.test.round", "draft", &task)
			draftSig := artifact(t, src, cas.SignatureArtifactType, "draft sig", &draft)
			for _, siblings := range []bool{false, true} {
				dst := be.open(t)
				if _, err := cas.Copy(ctx, src, dst, round, cas.CopyOptions{Referrers: true, Subjects: true, Siblings: siblings}); err != nil {
					t.Fatal(err)
				}
				for _, d := range []ocispec.Descriptor{task, taskSig, round, roundSig} {
					if ok, err := dst.Exists(ctx, d); !ok || err != nil {
						t.Fatalf("siblings=%v: %s missing after copy: %v", siblings, d.Digest, err)
					}
				}
				for _, d := range []ocispec.Descriptor{draft, draftSig} {
					if ok, _ := dst.Exists(ctx, d); ok != siblings {
						t.Fatalf("siblings=%v: draft %s copied = %v", siblings, d.Digest, ok)
					}
				}
				refs, err := dst.Referrers(ctx, task, "")
				if err != nil {
					t.Fatal(err)
				}
				if want := 2; !siblings && len(refs) != want {
					t.Fatalf("task has %d referrers after a push, want %d (its signature and the round)", len(refs), want)
				}
			}
		})
	}
}
