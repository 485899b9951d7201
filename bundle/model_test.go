package bundle

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/feval/feval/cas"
	"github.com/feval/feval/internal/detrand"
	"github.com/feval/feval/internal/testenv"
	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

// writeModel writes a small model tree: shards of random weights, a shared
// tokenizer, a config. shard0 is the same in every model made with the same
// seed0, so two models can share it.
func writeModel(t *testing.T, dir string, seed0, seed1 string) {
	t.Helper()
	files := map[string][]byte{
		"config.json":                      []byte(`{"hidden_size": 64}`),
		"tokenizer/tokenizer.json":         []byte(`{"vocab": ["a", "b"]}`),
		"model-00001-of-00002.safetensors": randBytes(seed0, 300<<10),
		"model-00002-of-00002.safetensors": randBytes(seed1, 200<<10+7),
		"empty.txt":                        nil,
	}
	for p, b := range files {
		full := filepath.Join(dir, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func randBytes(seed string, n int) []byte {
	src := detrand.New("model-test", []byte(seed))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(src.Uint64())
	}
	return b
}

func blobCount(t *testing.T, l *cas.Layout) int {
	t.Helper()
	ents, err := os.ReadDir(filepath.Join(l.Root(), "blobs", "sha256"))
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}

func sameTree(t *testing.T, a, b string) {
	t.Helper()
	err := filepath.WalkDir(a, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		r, _ := filepath.Rel(a, p)
		x, _ := os.ReadFile(p)
		y, err := os.ReadFile(filepath.Join(b, r))
		if err != nil || !bytes.Equal(x, y) {
			t.Errorf("%s differs after the round trip (%v)", r, err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestModelRoundTrip packs a model, pushes it to a registry, pulls it into a
// fresh store and extracts it: the files come back byte for byte, with
// ModelPack media types that oras reads (oras pull writes every file under its
// path), identical files are stored and sent once, and a damaged blob is caught
// on extraction.
func TestModelRoundTrip(t *testing.T) {
	ctx := context.Background()
	s := testSigner(t)
	signer := func() (*Signer, error) { return s, nil }
	src := filepath.Join(t.TempDir(), "m1")
	writeModel(t, src, "shared", "one")
	l, err := cas.Init(filepath.Join(t.TempDir(), "store"))
	if err != nil {
		t.Fatal(err)
	}
	p1, err := PackModel(ctx, l, signer, src, PackOptions{Kind: "submission"})
	if err != nil {
		t.Fatal(err)
	}
	again, err := PackModel(ctx, l, signer, src, PackOptions{Kind: "submission"})
	if err != nil || again.Artifact.Digest != p1.Artifact.Digest {
		t.Fatalf("packing the same model twice gave %s and %s (%v)", p1.Artifact.Digest, again.Artifact.Digest, err)
	}
	before := blobCount(t, l)
	// A second model sharing one shard, the tokenizer, the config and the empty
	// file adds only its own shard, its config and manifest, and a signature.
	src2 := filepath.Join(t.TempDir(), "m2")
	writeModel(t, src2, "shared", "two")
	p2, err := PackModel(ctx, l, signer, src2, PackOptions{Kind: "submission"})
	if err != nil {
		t.Fatal(err)
	}
	if added := blobCount(t, l) - before; added != 5 {
		t.Fatalf("second model added %d blobs, want 5 (shard, config, manifest, signature bundle and manifest)", added)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}

	files, err := LoadModel(ctx, l, p1.Artifact.OCI())
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"config.json": MediaTypeModelWeightConfigRaw, "empty.txt": MediaTypeModelWeightConfigRaw,
		"model-00001-of-00002.safetensors": MediaTypeModelWeightRaw, "model-00002-of-00002.safetensors": MediaTypeModelWeightRaw,
		"tokenizer/tokenizer.json": MediaTypeModelWeightConfigRaw,
	}
	if len(files) != len(want) {
		t.Fatalf("model has %d files, want %d", len(files), len(want))
	}
	for i, f := range files {
		if want[f.Path] != f.Layer.MediaType || (i > 0 && files[i-1].Path >= f.Path) {
			t.Fatalf("file %d %s: media type %s, want %s, in path order", i, f.Path, f.Layer.MediaType, want[f.Path])
		}
	}

	reg := testenv.StartRegistry(t)
	remote := func(repo string) *cas.Remote {
		ref, err := cas.ParseRemote(reg.Addr + "/" + repo)
		if err != nil {
			t.Fatal(err)
		}
		r, err := cas.OpenRemote(ref, cas.RemoteOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	if _, err := cas.Copy(ctx, l, remote("models/a"), p1.Artifact.OCI(), cas.CopyOptions{Referrers: true, Tag: "m1"}); err != nil {
		t.Fatal(err)
	}
	res, err := cas.Copy(ctx, l, remote("models/a"), p2.Artifact.OCI(), cas.CopyOptions{Referrers: true, Tag: "m2"})
	if err != nil {
		t.Fatal(err)
	}
	if shard := int64(200<<10 + 7); res.Bytes > shard+4096 {
		t.Fatalf("pushing the second model sent %d bytes; only its own shard (%d) and small blobs are new", res.Bytes, shard)
	}

	dst, err := cas.Init(filepath.Join(t.TempDir(), "dst"))
	if err != nil {
		t.Fatal(err)
	}
	r := remote("models/a")
	desc, err := r.Resolve(ctx, "m1")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cas.Copy(ctx, r, dst, desc, cas.CopyOptions{Referrers: true}); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "out")
	if _, err := ExtractModel(ctx, dst, desc, out); err != nil {
		t.Fatal(err)
	}
	sameTree(t, src, out)
	sameTree(t, out, src)

	// oras reads the layout: the manifest's types and every file under its path.
	oras := testenv.Tool(t, "oras")
	mb, err := exec.Command(oras, "manifest", "fetch", "--plain-http", reg.Addr+"/models/a:m1").Output()
	if err != nil {
		t.Fatal(err)
	}
	var m ocispec.Manifest
	if err := json.Unmarshal(mb, &m); err != nil || m.ArtifactType != ArtifactTypeModelManifest || m.Config.MediaType != MediaTypeModelConfig {
		t.Fatalf("oras sees artifact type %q and config %q (%v)", m.ArtifactType, m.Config.MediaType, err)
	}
	orasOut := filepath.Join(t.TempDir(), "oras")
	if b, err := exec.Command(oras, "pull", "--plain-http", "-o", orasOut, reg.Addr+"/models/a:m1").CombinedOutput(); err != nil {
		t.Fatalf("oras pull: %v\n%s", err, b)
	}
	sameTree(t, src, orasOut)

	// A damaged blob is caught when the model is read, and nothing is left.
	var shard ocispec.Descriptor
	for _, f := range files {
		if f.Path == "model-00002-of-00002.safetensors" {
			shard = f.Layer
		}
	}
	bp := dst.BlobPath(shard.Digest)
	b, _ := os.ReadFile(bp)
	b[100] ^= 1
	if err := os.WriteFile(bp, b, 0o644); err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(t.TempDir(), "bad")
	if _, err := ExtractModel(ctx, dst, desc, bad); !errors.Is(err, cas.ErrDigestMismatch) {
		t.Fatalf("extracting a damaged model = %v, want ErrDigestMismatch", err)
	}
	if _, err := os.Stat(bad); !os.IsNotExist(err) {
		t.Fatalf("a failed extraction left %s behind", bad)
	}
}

// TestModelWrongSignerLeavesNothing: as for trees, a failed signer leaves no
// file of the model in the store.
func TestModelWrongSignerLeavesNothing(t *testing.T) {
	src := filepath.Join(t.TempDir(), "m")
	writeModel(t, src, "a", "b")
	l, err := cas.Init(filepath.Join(t.TempDir(), "store"))
	if err != nil {
		t.Fatal(err)
	}
	_, err = PackModel(context.Background(), l, func() (*Signer, error) { return nil, ErrBadPassword }, src, PackOptions{Kind: "submission"})
	if !errors.Is(err, ErrBadPassword) {
		t.Fatalf("PackModel with a failing signer = %v", err)
	}
	if n := blobCount(t, l); n != 0 {
		t.Fatalf("%d blobs left behind", n)
	}
}

// TestLoadModelRejectsUnsafePaths: a manifest naming a path outside the model
// or the same path twice is refused before anything is written.
func TestLoadModelRejectsUnsafePaths(t *testing.T) {
	ctx := context.Background()
	l, err := cas.Init(filepath.Join(t.TempDir(), "store"))
	if err != nil {
		t.Fatal(err)
	}
	cfg, _ := PushBytes(ctx, l, MediaTypeModelConfig, []byte(`{}`))
	blob, _ := PushBytes(ctx, l, MediaTypeModelWeightRaw, []byte("w"))
	for _, paths := range [][]string{{"../x"}, {"/etc/x"}, {"a", "a"}, {"a/./b"}, {"a", "a/b"}, {""}} {
		var layers []ocispec.Descriptor
		for _, p := range paths {
			d := blob
			d.Annotations = map[string]string{AnnotationModelFilepath: p}
			layers = append(layers, d)
		}
		m := ocispec.Manifest{Versioned: manifestVersion, MediaType: ocispec.MediaTypeImageManifest, ArtifactType: ArtifactTypeModelManifest,
			Config: cfg, Layers: layers, Annotations: map[string]string{AnnotationModelLayout: ModelLayoutVersion}}
		mb, _ := json.Marshal(m)
		desc, err := PushBytes(ctx, l, ocispec.MediaTypeImageManifest, mb)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := LoadModel(ctx, l, desc); !errors.Is(err, ErrUnsafeEntry) {
			t.Errorf("paths %q: LoadModel = %v, want ErrUnsafeEntry", paths, err)
		}
	}
}

// FuzzLoadModel feeds arbitrary manifest bytes to LoadModel: it must never
// panic, and whatever it accepts must be safe to extract (clean, relative,
// unique paths of raw layers).
func FuzzLoadModel(f *testing.F) {
	f.Add([]byte(`{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","artifactType":"application/vnd.cncf.model.manifest.v1+json","config":{"mediaType":"application/vnd.cncf.model.config.v1+json","digest":"sha256:44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a","size":2},"layers":[{"mediaType":"application/vnd.cncf.model.weight.v1.raw","digest":"sha256:44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a","size":2,"annotations":{"org.cncf.model.filepath":"a/b.safetensors"}}],"annotations":{"dev.feval.model.layout":"1"}}`))
	f.Add([]byte(`{"artifactType":"application/vnd.cncf.model.manifest.v1+json","layers":[{"annotations":{"org.cncf.model.filepath":"../x"}}]}`))
	f.Add([]byte(`[]`))
	l, err := cas.Init(filepath.Join(f.TempDir(), "s"))
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		desc := ocispec.Descriptor{MediaType: ocispec.MediaTypeImageManifest, Digest: digest.FromBytes(b), Size: int64(len(b))}
		st := memManifest{Store: l, b: b}
		files, err := LoadModel(context.Background(), st, desc)
		if err != nil {
			return
		}
		seen := map[string]bool{}
		for _, f := range files {
			if f.Path == "" || f.Path != filepath.ToSlash(filepath.Clean(f.Path)) || filepath.IsAbs(f.Path) || f.Path == ".." || len(f.Path) > 2 && f.Path[:3] == "../" || seen[f.Path] {
				t.Fatalf("accepted unsafe path %q", f.Path)
			}
			seen[f.Path] = true
		}
	})
}

// memManifest serves one manifest's bytes from memory, whatever its digest.
type memManifest struct {
	cas.Store
	b []byte
}

func (m memManifest) Fetch(_ context.Context, desc ocispec.Descriptor) (io.ReadCloser, error) {
	return cas.NewVerifyReader(io.NopCloser(bytes.NewReader(m.b)), desc)
}

// TestModelPackOfChangingFileStoresWhatItHashed: a file rewritten while it is
// packed may give any content, but its blob must hold exactly the bytes its
// digest names: every blob of the store is checked against its name.
func TestModelPackOfChangingFileStoresWhatItHashed(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "model")
	writeModel(t, dir, "a", "b")
	shard := filepath.Join(dir, "big.safetensors")
	if err := os.WriteFile(shard, make([]byte, 24<<20+3), 0o644); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		f, err := os.OpenFile(shard, os.O_WRONLY, 0)
		if err != nil {
			return
		}
		defer f.Close()
		page := bytes.Repeat([]byte{1}, 64<<10)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			page[0] = byte(i)
			f.WriteAt(page, int64(i%384)<<16)
		}
	}()
	l, err := cas.Init(filepath.Join(t.TempDir(), "store"))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	s := testSigner(t)
	_, err = PackModel(context.Background(), l, func() (*Signer, error) { return s, nil }, dir, PackOptions{Kind: "model"})
	close(stop)
	<-done
	if err != nil {
		t.Fatal(err)
	}
	blobs := filepath.Join(l.Root(), "blobs", "sha256")
	ents, err := os.ReadDir(blobs)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(blobs, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if got := digest.FromBytes(b).Encoded(); got != e.Name() {
			t.Errorf("blob %s holds bytes of digest %s", e.Name(), got)
		}
	}
}
