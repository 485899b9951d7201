package cas_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/feval/feval/cas"
	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

// hostileStore is a layout holding one sound artifact and the hostile entries
// the issue found: a manifest without a config digest, a subject that is not a
// digest, and an index.json entry with an empty digest.
func hostileStore(t *testing.T) (root string, good ocispec.Descriptor) {
	t.Helper()
	root = filepath.Join(t.TempDir(), "store")
	l, err := cas.Init(root)
	if err != nil {
		t.Fatal(err)
	}
	good = artifact(t, l, "application/vnd.test.good", "good", nil)
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	raw := func(s string) ocispec.Descriptor {
		b := []byte(s)
		d := ocispec.Descriptor{MediaType: ocispec.MediaTypeImageManifest, Digest: digest.FromBytes(b), Size: int64(len(b))}
		if err := os.WriteFile(filepath.Join(root, "blobs/sha256", d.Digest.Encoded()), b, 0o644); err != nil {
			t.Fatal(err)
		}
		return d
	}
	noConfig := raw(`{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","config":{"mediaType":"application/vnd.oci.empty.v1+json","size":2},"layers":[]}`)
	badSubject := raw(`{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","config":{"mediaType":"application/vnd.oci.empty.v1+json","digest":"sha256:44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a","size":2},"layers":[],"subject":{"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"not-a-digest","size":3}}`)
	var idx ocispec.Index
	b, _ := os.ReadFile(filepath.Join(root, "index.json"))
	if err := json.Unmarshal(b, &idx); err != nil {
		t.Fatal(err)
	}
	idx.Manifests = append(idx.Manifests, noConfig, badSubject,
		ocispec.Descriptor{MediaType: ocispec.MediaTypeImageManifest, Digest: "", Size: 10},
		ocispec.Descriptor{MediaType: ocispec.MediaTypeImageManifest, Digest: "sha256:zz", Size: -1})
	b, _ = json.Marshal(idx)
	if err := os.WriteFile(filepath.Join(root, "index.json"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	return root, good
}

// TestHostileStoreDoesNotPanic runs every read path over a hostile store: each
// bad entry is reported with its location, and the sound artifact stays usable.
func TestHostileStoreDoesNotPanic(t *testing.T) {
	ctx := context.Background()
	root, good := hostileStore(t)
	l, err := cas.OpenLayout(root)
	if err != nil {
		t.Fatal(err)
	}
	if bad := l.BadEntries(); len(bad) != 2 || !strings.HasPrefix(bad[0].Location, "index.json manifests[") {
		t.Fatalf("bad entries = %v, want the two malformed index.json entries", bad)
	}
	for _, m := range l.Manifests() {
		if _, _, err := cas.FetchNode(ctx, l, m); err != nil && m.Digest != good.Digest {
			if !errors.Is(err, cas.ErrInvalid) {
				t.Fatalf("hostile manifest %s: %v, want ErrInvalid", m.Digest, err)
			}
		}
	}
	refs, err := l.Referrers(ctx, good, "")
	if err != nil || len(refs) != 0 {
		t.Fatalf("referrers next to hostile manifests: %v, %v", refs, err)
	}
	rep, err := cas.Fsck(ctx, l, nil)
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[cas.FindingKind]int{}
	for _, f := range rep.Findings {
		kinds[f.Kind]++
		if f.Digest == "" && f.Path == "" {
			t.Fatalf("finding without a location: %v", f)
		}
	}
	if kinds[cas.FindingInvalidEntry] != 2 || kinds[cas.FindingUnparseable] != 2 {
		t.Fatalf("findings %v: want 2 invalid entries and 2 unparseable manifests", rep.Findings)
	}
	if _, err := cas.ReadAll(ctx, l, good, 1<<20); err != nil {
		t.Fatalf("the sound artifact is unreadable: %v", err)
	}
	dst, _ := cas.Init(filepath.Join(t.TempDir(), "dst"))
	if _, err := cas.Copy(ctx, l, dst, good, cas.CopyOptions{Referrers: true}); err != nil {
		t.Fatalf("copying the sound artifact out of a hostile store: %v", err)
	}
}

// TestIrregularBlobsDoNotHang replaces blobs by a FIFO and by a symbolic link to
// /dev/zero: fsck and reads must report them, not block or read forever.
func TestIrregularBlobsDoNotHang(t *testing.T) {
	ctx := context.Background()
	l := newLayout(t)
	a := artifact(t, l, "application/vnd.test", "fifo victim", nil)
	b := artifact(t, l, "application/vnd.test", "zero victim", nil)
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	na, _, _ := cas.FetchNode(ctx, l, a)
	nb, _, _ := cas.FetchNode(ctx, l, b)
	fifo, zero := na.Children[1].Digest, nb.Children[1].Digest
	os.Remove(l.BlobPath(fifo))
	if err := syscall.Mkfifo(l.BlobPath(fifo), 0o644); err != nil {
		t.Fatal(err)
	}
	os.Remove(l.BlobPath(zero))
	if err := os.Symlink("/dev/zero", l.BlobPath(zero)); err != nil {
		t.Fatal(err)
	}
	done := make(chan cas.FsckReport, 1)
	go func() {
		rep, err := cas.Fsck(ctx, l, nil)
		if err != nil {
			t.Error(err)
		}
		done <- rep
	}()
	select {
	case rep := <-done:
		n := 0
		for _, f := range rep.Findings {
			if f.Kind == cas.FindingIrregular && (f.Digest == fifo || f.Digest == zero) {
				n++
			}
		}
		if n != 2 {
			t.Fatalf("findings %v: want the FIFO and the /dev/zero link as not_regular", rep.Findings)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("fsck hangs on a FIFO or /dev/zero blob")
	}
	for _, d := range []digest.Digest{fifo, zero} {
		_, err := cas.ReadAll(ctx, l, ocispec.Descriptor{MediaType: "application/octet-stream", Digest: d, Size: 11}, 1<<20)
		if !errors.Is(err, cas.ErrInvalid) {
			t.Fatalf("reading irregular blob %s: %v, want ErrInvalid", d, err)
		}
	}
}

// FuzzLayoutReader opens a layout whose index.json and one manifest blob are
// arbitrary bytes and runs every read path over it: nothing may panic or hang.
// (Writes, which fsync, stay out of the loop; TestHostileStoreDoesNotPanic and
// the repair tests cover them.)
func FuzzLayoutReader(f *testing.F) {
	f.Add([]byte(`{"schemaVersion":2,"manifests":[{"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"","size":1}]}`),
		[]byte(`{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","config":{},"layers":[{}]}`))
	f.Add([]byte(`{"manifests":[{"mediaType":"application/vnd.oci.image.index.v1+json","digest":"sha256:0000000000000000000000000000000000000000000000000000000000000000","size":9223372036854775807}]}`),
		[]byte(`{"mediaType":"application/vnd.oci.image.index.v1+json","manifests":[{"digest":"md5:x","size":-5}],"subject":{"digest":"x"}}`))
	f.Add([]byte(`not json`), []byte{})
	f.Fuzz(func(t *testing.T, index, manifest []byte) {
		ctx := context.Background()
		root := t.TempDir()
		os.MkdirAll(filepath.Join(root, "blobs/sha256"), 0o755)
		os.WriteFile(filepath.Join(root, "oci-layout"), []byte(`{"imageLayoutVersion":"1.0.0"}`), 0o644)
		md := digest.FromBytes(manifest)
		os.WriteFile(filepath.Join(root, "blobs/sha256", md.Encoded()), manifest, 0o644)
		// The fuzzed index also lists the fuzzed manifest, so it gets parsed.
		var idx ocispec.Index
		if json.Unmarshal(index, &idx) == nil {
			for _, mt := range []string{ocispec.MediaTypeImageManifest, ocispec.MediaTypeImageIndex} {
				idx.Manifests = append(idx.Manifests, ocispec.Descriptor{MediaType: mt, Digest: md, Size: int64(len(manifest))})
			}
			index, _ = json.Marshal(idx)
		}
		os.WriteFile(filepath.Join(root, "index.json"), index, 0o644)
		if _, err := cas.FsckStore(ctx, root, cas.FsckOptions{}); err != nil && !errors.Is(err, cas.ErrInvalid) {
			t.Logf("fsck: %v", err)
		}
		l, err := cas.OpenLayout(root)
		if err != nil {
			return
		}
		for _, m := range l.Manifests() {
			node, _, err := cas.FetchNode(ctx, l, m)
			if err != nil {
				continue
			}
			for _, c := range node.Children {
				l.Exists(ctx, c)
				cas.ReadAll(ctx, l, c, 1<<20)
			}
			if node.Subject != nil {
				l.Referrers(ctx, *node.Subject, "")
			}
			l.Referrers(ctx, m, "")
		}
	})
}

// TestDamagedReferrerIsLocal damages a signature of one artifact: lookups of
// that artifact's referrers report it, lookups of another artifact do not fail.
func TestDamagedReferrerIsLocal(t *testing.T) {
	ctx := context.Background()
	l := newLayout(t)
	a := artifact(t, l, "application/vnd.test", "a", nil)
	b := artifact(t, l, "application/vnd.test", "b", nil)
	sigA := artifact(t, l, "application/vnd.test.sig", "sig of a", &a)
	artifact(t, l, "application/vnd.test.sig", "sig of b", &b)
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	raw, _ := os.ReadFile(l.BlobPath(sigA.Digest))
	i := strings.Index(string(raw), `"layers"`)
	raw[i+2] ^= 0x01 // inside a key: the JSON still claims subject a
	os.WriteFile(l.BlobPath(sigA.Digest), raw, 0o644)
	fresh, err := cas.OpenLayout(l.Root())
	if err != nil {
		t.Fatal(err)
	}
	if refs, err := fresh.Referrers(ctx, b, ""); err != nil || len(refs) != 1 {
		t.Fatalf("referrers of b next to a damaged signature of a: %v, %v", refs, err)
	}
	if _, err := fresh.Referrers(ctx, a, ""); !errors.Is(err, cas.ErrDigestMismatch) || !strings.Contains(err.Error(), sigA.Digest.String()) {
		t.Fatalf("referrers of a = %v, want the damaged signature named", err)
	}
}

// TestTemporaryFiles leaves one temporary file as a killed writer would and holds
// the lock of another as a live writer does: fsck lists only the first, and
// --repair removes only the first.
func TestTemporaryFiles(t *testing.T) {
	ctx := context.Background()
	l := newLayout(t)
	dir := filepath.Dir(l.BlobPath(digest.FromString("")))
	dead := filepath.Join(dir, ".ingest-dead")
	os.WriteFile(dead, []byte("partial"), 0o644)
	live, err := os.Create(filepath.Join(dir, ".ingest-live"))
	if err != nil {
		t.Fatal(err)
	}
	defer live.Close()
	if err := syscall.Flock(int(live.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	rep, err := cas.FsckStore(ctx, l.Root(), cas.FsckOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Findings) != 1 || rep.Findings[0].Kind != cas.FindingTempFile || !strings.HasSuffix(rep.Findings[0].Path, ".ingest-dead") {
		t.Fatalf("fsck findings %v: want only the abandoned temporary file", rep.Findings)
	}
	rep, err = cas.FsckStore(ctx, l.Root(), cas.FsckOptions{Repair: true})
	if err != nil || len(rep.Findings) != 0 {
		t.Fatalf("fsck --repair: %v, %v", rep.Findings, err)
	}
	if _, err := os.Stat(dead); !os.IsNotExist(err) {
		t.Fatal("the abandoned temporary file is still there")
	}
	if _, err := os.Stat(live.Name()); err != nil {
		t.Fatal("fsck --repair removed a file a live writer holds")
	}
}
