package cas_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/feval/feval/cas"
	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

// TestMain lets the test binary act as one of several writer processes.
func TestMain(m *testing.M) {
	if store := os.Getenv("FEVAL_TEST_WRITER_STORE"); store != "" {
		id, _ := strconv.Atoi(os.Getenv("FEVAL_TEST_WRITER_ID"))
		if err := writer(store, id); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

const perWriter = 15

// writer pushes perWriter artifacts, tagging and saving the index after each, so
// index saves from different processes interleave as much as possible.
func writer(store string, id int) error {
	l, err := cas.OpenLayout(store)
	if err != nil {
		return err
	}
	for i := 0; i < perWriter; i++ {
		d, err := makeArtifact(l, "application/vnd.test.w", fmt.Sprintf("writer %d artifact %d", id, i), nil)
		if err != nil {
			return fmt.Errorf("writer %d: %w", id, err)
		}
		if err := l.Tag(context.Background(), d, fmt.Sprintf("w%d-%d", id, i)); err != nil {
			return err
		}
		if err := l.Flush(); err != nil {
			return err
		}
	}
	return l.Close()
}

func TestConcurrentProcessesKeepEveryArtifact(t *testing.T) {
	store := filepath.Join(t.TempDir(), "store")
	if _, err := cas.Init(store); err != nil {
		t.Fatal(err)
	}
	const procs = 8
	cmds := make([]*exec.Cmd, procs)
	for i := range cmds {
		cmds[i] = exec.Command(os.Args[0], "-test.run=^$")
		cmds[i].Env = append(os.Environ(), "FEVAL_TEST_WRITER_STORE="+store, "FEVAL_TEST_WRITER_ID="+strconv.Itoa(i))
		cmds[i].Stderr = os.Stderr
		if err := cmds[i].Start(); err != nil {
			t.Fatal(err)
		}
	}
	for i, c := range cmds {
		if err := c.Wait(); err != nil {
			t.Fatalf("writer %d: %v", i, err)
		}
	}
	l, err := cas.OpenLayout(store)
	if err != nil {
		t.Fatal(err)
	}
	tags := l.Tags()
	if len(tags) != procs*perWriter {
		t.Fatalf("%d tags survived, want %d", len(tags), procs*perWriter)
	}
	if n := len(l.Manifests()); n != procs*perWriter {
		t.Fatalf("%d manifests listed, want %d", n, procs*perWriter)
	}
	rep, err := cas.Fsck(context.Background(), l, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Findings) != 0 || rep.Manifests != procs*perWriter {
		t.Fatalf("fsck after concurrent writes: %d manifests, findings %v", rep.Manifests, rep.Findings)
	}
}

func newLayout(t *testing.T) *cas.Layout {
	l, err := cas.Init(filepath.Join(t.TempDir(), "store"))
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func TestOpenMissingStore(t *testing.T) {
	_, err := cas.OpenLayout(filepath.Join(t.TempDir(), "nothing"))
	if !errors.Is(err, cas.ErrNoStore) || !strings.Contains(err.Error(), "feval init") {
		t.Fatalf("got %v, want ErrNoStore with a hint", err)
	}
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "oci-layout"), []byte("{garbage"), 0o644)
	if _, err := cas.OpenLayout(dir); !errors.Is(err, cas.ErrNoStore) {
		t.Fatalf("damaged oci-layout: %v", err)
	}
}

func TestResolvePrefix(t *testing.T) {
	ctx := context.Background()
	l := newLayout(t)
	var ds []ocispec.Descriptor
	for i := 0; i < 40; i++ {
		ds = append(ds, artifact(t, l, "application/vnd.test", fmt.Sprint("p", i), nil))
	}
	d := ds[0]
	l.Tag(ctx, d, "named")
	cases := []struct {
		ref  string
		want digest.Digest
		err  error
	}{
		{d.Digest.String(), d.Digest, nil},
		{d.Digest.Encoded()[:12], d.Digest, nil},
		{"sha256:" + d.Digest.Encoded()[:20], d.Digest, nil},
		{"named", d.Digest, nil},
		{d.Digest.Encoded()[:8], "", cas.ErrBadReference},
		{"bad tag!", "", cas.ErrBadReference},
		{"ffffffffffffffff", "", cas.ErrNotFound},
		{"unknown", "", cas.ErrNotFound},
	}
	for _, c := range cases {
		got, err := cas.ResolveRef(ctx, l, c.ref)
		if c.err != nil {
			if !errors.Is(err, c.err) {
				t.Errorf("ResolveRef(%q) = %v, want %v", c.ref, err, c.err)
			}
			continue
		}
		if err != nil || got.Digest != c.want {
			t.Errorf("ResolveRef(%q) = %s, %v", c.ref, got.Digest, err)
		}
	}
}

func TestResolveAmbiguousPrefix(t *testing.T) {
	// Find two contents whose digests share 12 hex digits would take too long;
	// instead make the index list two manifests whose names share a prefix by
	// construction, using the store's own listing.
	l := newLayout(t)
	a := artifact(t, l, "application/vnd.test", "a", nil)
	fake := ocispec.Descriptor{MediaType: ocispec.MediaTypeImageManifest, Digest: digest.NewDigestFromEncoded(digest.SHA256, a.Digest.Encoded()[:12]+strings.Repeat("0", 52)), Size: 1}
	amb := &ambiguousLister{Store: l, extra: fake}
	_, err := cas.ResolveRef(context.Background(), amb, a.Digest.Encoded()[:12])
	var ae *cas.AmbiguousError
	if !errors.As(err, &ae) || len(ae.Matches) != 2 {
		t.Fatalf("got %v, want an AmbiguousError with 2 matches", err)
	}
}

type ambiguousLister struct {
	cas.Store
	extra ocispec.Descriptor
}

func (a *ambiguousLister) Manifests() []ocispec.Descriptor {
	return append(a.Store.(*cas.Layout).Manifests(), a.extra)
}

// TestFsckFindsDamage builds one damaged store per kind of damage and requires
// fsck to report exactly that finding, naming the object.
func TestFsckFindsDamage(t *testing.T) {
	ctx := context.Background()
	cases := []struct {
		name   string
		damage func(t *testing.T, l *cas.Layout, root ocispec.Descriptor, layer digest.Digest) digest.Digest
		want   cas.FindingKind
	}{
		{"corrupt layer", func(t *testing.T, l *cas.Layout, _ ocispec.Descriptor, layer digest.Digest) digest.Digest {
			flip(t, l.BlobPath(layer))
			return layer
		}, cas.FindingCorrupt},
		{"missing layer", func(t *testing.T, l *cas.Layout, _ ocispec.Descriptor, layer digest.Digest) digest.Digest {
			os.Remove(l.BlobPath(layer))
			return layer
		}, cas.FindingMissing},
		{"corrupt manifest", func(t *testing.T, l *cas.Layout, root ocispec.Descriptor, _ digest.Digest) digest.Digest {
			flip(t, l.BlobPath(root.Digest))
			return root.Digest
		}, cas.FindingCorrupt},
		{"truncated layer", func(t *testing.T, l *cas.Layout, _ ocispec.Descriptor, layer digest.Digest) digest.Digest {
			os.Truncate(l.BlobPath(layer), 2)
			return layer
		}, cas.FindingSize},
		{"stray file", func(t *testing.T, l *cas.Layout, _ ocispec.Descriptor, _ digest.Digest) digest.Digest {
			os.WriteFile(filepath.Join(filepath.Dir(l.BlobPath(digest.FromString(""))), "not-a-digest"), []byte("x"), 0o644)
			return ""
		}, cas.FindingStrayFile},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			l := newLayout(t)
			root := artifact(t, l, "application/vnd.test", "content to damage", nil)
			if err := l.Flush(); err != nil {
				t.Fatal(err)
			}
			node, _, err := cas.FetchNode(ctx, l, root)
			if err != nil {
				t.Fatal(err)
			}
			clean, _ := cas.Fsck(ctx, l, nil)
			if len(clean.Findings) != 0 {
				t.Fatalf("fresh store has findings: %v", clean.Findings)
			}
			obj := c.damage(t, l, root, node.Children[1].Digest)
			rep, err := cas.Fsck(ctx, l, nil)
			if err != nil {
				t.Fatal(err)
			}
			found := false
			for _, f := range rep.Findings {
				if f.Kind == c.want && (obj == "" || f.Digest == obj) {
					found = true
				}
			}
			if !found {
				t.Fatalf("findings %v lack %s of %s", rep.Findings, c.want, obj)
			}
		})
	}
}

// TestTagKeepsArtifactType: tagging with a descriptor that lacks the
// artifact type (what a registry's tag lookup gives) keeps the type the
// layout lists the manifest with, before and after the index is written.
func TestTagKeepsArtifactType(t *testing.T) {
	ctx := context.Background()
	l := newLayout(t)
	d := artifact(t, l, "application/vnd.test.round", "r", nil)
	if d.ArtifactType == "" {
		t.Fatal("the test artifact has no artifact type")
	}
	bare := ocispec.Descriptor{MediaType: d.MediaType, Digest: d.Digest, Size: d.Size}
	if err := l.Tag(ctx, bare, "pulled"); err != nil {
		t.Fatal(err)
	}
	if got, err := l.Resolve(ctx, "pulled"); err != nil || got.ArtifactType != d.ArtifactType {
		t.Fatalf("tag resolves to %+v, %v; want artifact type %s", got, err, d.ArtifactType)
	}
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	for _, m := range l.Manifests() {
		if m.Digest == d.Digest && m.ArtifactType != d.ArtifactType {
			t.Errorf("listed as %+v after the index was written", m)
		}
	}
}
