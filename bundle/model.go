package bundle

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"

	"github.com/feval/feval/cas"
	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

// The model layout (docs/FORMAT.md, "Model artifacts", version 1) stores a model
// directory as a CNCF ModelPack manifest: one uncompressed layer per file, so
// identical files are identical blobs and are stored and moved once.
const (
	ModelLayoutVersion            = "1"
	ArtifactTypeModelManifest     = "application/vnd.cncf.model.manifest.v1+json"
	MediaTypeModelConfig          = "application/vnd.cncf.model.config.v1+json"
	MediaTypeModelWeightRaw       = "application/vnd.cncf.model.weight.v1.raw"
	MediaTypeModelWeightConfigRaw = "application/vnd.cncf.model.weight.config.v1.raw"
	// AnnotationModelFilepath is ModelPack's annotation for a layer's path.
	AnnotationModelFilepath = "org.cncf.model.filepath"
	// AnnotationModelKind and AnnotationModelLayout name the feval kind and the
	// layout version on the manifest.
	AnnotationModelKind   = "dev.feval.kind"
	AnnotationModelLayout = "dev.feval.model.layout"
)

// ModelLimits bound what LoadModel accepts from an untrusted manifest.
var ModelLimits = Limits{MaxFiles: 10000, MaxBytes: 1 << 40, MaxFile: 1 << 38}

// weightExt lists the extensions of weight files, stored as
// MediaTypeModelWeightRaw; every other file is MediaTypeModelWeightConfigRaw.
var weightExt = map[string]bool{".safetensors": true, ".bin": true, ".pt": true, ".pth": true, ".ckpt": true, ".gguf": true, ".onnx": true}

// ModelMediaType returns the layer media type of the file at the relative path p.
func ModelMediaType(p string) string {
	if weightExt[strings.ToLower(path.Ext(p))] {
		return MediaTypeModelWeightRaw
	}
	return MediaTypeModelWeightConfigRaw
}

// modelConfig is the ModelPack config blob feval writes: no dates, so the same
// directory always gives the same bytes.
type modelConfig struct {
	Descriptor struct {
		Name string `json:"name,omitempty"`
	} `json:"descriptor"`
	ModelFS struct {
		Type    string          `json:"type"`
		DiffIDs []digest.Digest `json:"diffIds"`
	} `json:"modelfs"`
	Config struct{} `json:"config"`
}

// ModelFile is one file of a model artifact.
type ModelFile struct {
	Path  string             // slash-separated, relative
	Layer ocispec.Descriptor // raw layer: its digest is the file's
}

// PackModel stores the directory dir as a model artifact of the given kind and
// signs it. Files are hashed and written in parallel (GOMAXPROCS at a time),
// each into its own raw layer; a file whose content the store already has is
// not kept twice. As in PackPathSigner, signer is called after the files are
// staged and nothing is published unless signing succeeds.
func PackModel(ctx context.Context, l *cas.Layout, signer func() (*Signer, error), dir string, opts PackOptions) (Packed, error) {
	if !ValidKind(opts.Kind) {
		return Packed{}, fmt.Errorf("kind %q: want lower-case letters, digits and '-'", opts.Kind)
	}
	prog := opts.Progress
	if prog == nil {
		prog = cas.ProgressFrom(ctx)
	}
	files, total, err := modelFiles(dir)
	if err != nil {
		return Packed{}, err
	}
	prog.Start(total)
	defer prog.Done()
	stage := &stager{l: l}
	defer stage.discard()
	layers := make([]ocispec.Descriptor, len(files))
	staged := make([]*cas.Staged, len(files))
	var mu sync.Mutex
	var first error
	work := make(chan int)
	var wg sync.WaitGroup
	for range max(1, runtime.GOMAXPROCS(0)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				st, err := stageFile(ctx, l, filepath.Join(dir, filepath.FromSlash(files[i])), prog)
				mu.Lock()
				if err != nil && first == nil {
					first = fmt.Errorf("packing %s: %w", files[i], err)
				}
				staged[i] = st
				mu.Unlock()
			}
		}()
	}
	for i := range files {
		mu.Lock()
		failed := first != nil
		mu.Unlock()
		if failed {
			break
		}
		work <- i
	}
	close(work)
	wg.Wait()
	for _, st := range staged {
		if st != nil {
			stage.staged = append(stage.staged, st)
		}
	}
	if first != nil {
		return Packed{}, first
	}
	var cfg modelConfig
	cfg.Descriptor.Name = filepath.Base(filepath.Clean(dir))
	cfg.ModelFS.Type = "layers"
	cfg.ModelFS.DiffIDs = []digest.Digest{}
	var size int64
	for i, st := range staged {
		layers[i] = ocispec.Descriptor{MediaType: ModelMediaType(files[i]), Digest: st.Desc.Digest, Size: st.Desc.Size,
			Annotations: map[string]string{AnnotationModelFilepath: files[i], ocispec.AnnotationTitle: files[i]}}
		cfg.ModelFS.DiffIDs = append(cfg.ModelFS.DiffIDs, st.Desc.Digest)
		size += st.Desc.Size
	}
	cb, err := Canonical(cfg)
	if err != nil {
		return Packed{}, err
	}
	cfgDesc := ocispec.Descriptor{MediaType: MediaTypeModelConfig, Digest: digest.FromBytes(cb), Size: int64(len(cb))}
	m := ocispec.Manifest{
		Versioned:    manifestVersion,
		MediaType:    ocispec.MediaTypeImageManifest,
		ArtifactType: ArtifactTypeModelManifest,
		Config:       cfgDesc,
		Layers:       layers,
		Annotations: map[string]string{
			ocispec.AnnotationCreated: createdOr(opts.Created),
			AnnotationModelKind:       opts.Kind,
			AnnotationModelLayout:     ModelLayoutVersion,
		},
	}
	mb, err := Canonical(m)
	if err != nil {
		return Packed{}, err
	}
	desc := ocispec.Descriptor{MediaType: ocispec.MediaTypeImageManifest, Digest: digest.FromBytes(mb), Size: int64(len(mb)), ArtifactType: ArtifactTypeModelManifest}
	s, err := signer()
	if err != nil {
		return Packed{}, err
	}
	sb, err := s.SignatureBytes(desc)
	if err != nil {
		return Packed{}, err
	}
	if err := stage.publish(); err != nil {
		return Packed{}, err
	}
	if _, err := PushBytes(ctx, l, MediaTypeModelConfig, cb); err != nil {
		return Packed{}, err
	}
	if _, err := PushBytes(ctx, l, ocispec.MediaTypeImageManifest, mb); err != nil {
		return Packed{}, err
	}
	sig, err := pushSignature(ctx, l, sb, desc)
	if err != nil {
		return Packed{}, err
	}
	return Packed{Artifact: cas.Descriptor(desc), Signature: cas.Descriptor(sig), Content: Content{Type: "model", Digest: desc.Digest, Size: size}}, nil
}

func createdOr(c string) string {
	if c == "" {
		return EpochCreated
	}
	return c
}

// stageFile hashes and writes one file into a staged blob in one pass: each
// piece is read into one buffer, hashed there and written from there with
// direct I/O (cas.Layout.StageBlobDirect), so the blob holds exactly the bytes
// hashed even if the file changes meanwhile. A blob the store already has is
// replaced by the identical staged copy on publish, so it is stored once.
func stageFile(ctx context.Context, l *cas.Layout, p string, prog cas.Progress) (*cas.Staged, error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return l.StageBlobDirect(MediaTypeModelWeightRaw, func(w io.Writer) error {
		_, err := io.Copy(w, &progressReader{r: &ctxReader{ctx: ctx, r: f}, add: prog.Add})
		return err
	})
}

// ctxReader fails its reads once ctx is done.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c *ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}

// modelFiles lists the regular files under dir, sorted byte-wise by their
// slash-separated relative path, and their total size. Links and special files
// are refused, as in WriteTar.
func modelFiles(dir string) ([]string, int64, error) {
	var files []string
	var total int64
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			return nil
		}
		if !d.Type().IsRegular() {
			return fmt.Errorf("%s: %w: only regular files and directories can be packed", p, ErrUnsafeEntry)
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		r, _ := filepath.Rel(dir, p)
		files = append(files, filepath.ToSlash(r))
		total += fi.Size()
		return nil
	})
	if err != nil {
		return nil, 0, err
	}
	if len(files) > ModelLimits.MaxFiles {
		return nil, 0, fmt.Errorf("%s has %d files, over %d: %w", dir, len(files), ModelLimits.MaxFiles, ErrLimit)
	}
	sort.Strings(files)
	return files, total, nil
}

// LoadModel reads and checks a model artifact's manifest: ModelPack artifact
// and config types, layout version 1, raw layers of known media types whose
// paths are relative, clean and unique, within ModelLimits.
func LoadModel(ctx context.Context, st cas.Store, desc ocispec.Descriptor) ([]ModelFile, error) {
	if desc.MediaType == "" {
		desc.MediaType = ocispec.MediaTypeImageManifest
	}
	b, err := cas.ReadAll(ctx, st, desc, cas.MaxManifestSize)
	if err != nil {
		return nil, fmt.Errorf("reading manifest %s: %w", desc.Digest, err)
	}
	var m ocispec.Manifest
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("manifest %s: %w: %v", desc.Digest, ErrNotArtifact, err)
	}
	if m.ArtifactType != ArtifactTypeModelManifest || m.Config.MediaType != MediaTypeModelConfig {
		return nil, fmt.Errorf("%s is not a model artifact (artifact type %q): %w", desc.Digest, m.ArtifactType, ErrNotArtifact)
	}
	if v := m.Annotations[AnnotationModelLayout]; v != ModelLayoutVersion {
		return nil, fmt.Errorf("%s: model layout %q, this feval reads %q: %w", desc.Digest, v, ModelLayoutVersion, ErrNotArtifact)
	}
	if len(m.Layers) > ModelLimits.MaxFiles {
		return nil, fmt.Errorf("%s has %d layers: %w", desc.Digest, len(m.Layers), ErrLimit)
	}
	seen := map[string]bool{}
	var total int64
	out := make([]ModelFile, 0, len(m.Layers))
	for i, layer := range m.Layers {
		if err := cas.ValidateDescriptor(layer); err != nil {
			return nil, fmt.Errorf("%s layer %d: %w", desc.Digest, i, err)
		}
		if layer.MediaType != MediaTypeModelWeightRaw && layer.MediaType != MediaTypeModelWeightConfigRaw {
			return nil, fmt.Errorf("%s layer %d: media type %q: %w", desc.Digest, i, layer.MediaType, ErrNotArtifact)
		}
		p := layer.Annotations[AnnotationModelFilepath]
		clean := path.Clean(p)
		if p == "" || clean != p || path.IsAbs(p) || clean == ".." || strings.HasPrefix(clean, "../") || strings.Contains(p, "\\") || seen[p] {
			return nil, fmt.Errorf("%s layer %d: path %q: %w", desc.Digest, i, p, ErrUnsafeEntry)
		}
		seen[p] = true
		if layer.Size > ModelLimits.MaxFile {
			return nil, fmt.Errorf("%s: %s has %d bytes: %w", desc.Digest, p, layer.Size, ErrLimit)
		}
		if total += layer.Size; total > ModelLimits.MaxBytes {
			return nil, fmt.Errorf("%s: more than %d bytes: %w", desc.Digest, ModelLimits.MaxBytes, ErrLimit)
		}
		out = append(out, ModelFile{Path: p, Layer: layer})
	}
	for _, f := range out {
		// A file may not sit where another file's directory is.
		for d := path.Dir(f.Path); d != "."; d = path.Dir(d) {
			if seen[d] {
				return nil, fmt.Errorf("%s: %q is both a file and a directory: %w", desc.Digest, d, ErrUnsafeEntry)
			}
		}
	}
	return out, nil
}

// ExtractModel writes the files of a model artifact under dest, which must be
// new or an empty directory (else ErrTargetNotEmpty), verifying every byte
// against its layer digest. On failure what was written is removed.
func ExtractModel(ctx context.Context, st cas.Store, desc ocispec.Descriptor, dest string) (n int, err error) {
	files, err := LoadModel(ctx, st, desc)
	if err != nil {
		return 0, err
	}
	created := true
	if err := os.Mkdir(dest, 0o755); errors.Is(err, fs.ErrExist) {
		ents, rerr := os.ReadDir(dest)
		if rerr != nil {
			return 0, rerr
		}
		if len(ents) > 0 {
			return 0, fmt.Errorf("%s: %w", dest, ErrTargetNotEmpty)
		}
		created = false
	} else if err != nil {
		return 0, err
	}
	defer func() {
		if err == nil {
			return
		}
		if created {
			os.RemoveAll(dest)
			return
		}
		ents, _ := os.ReadDir(dest)
		for _, e := range ents {
			os.RemoveAll(filepath.Join(dest, e.Name()))
		}
	}()
	prog := cas.ProgressFrom(ctx)
	var total int64
	for _, f := range files {
		total += f.Layer.Size
	}
	prog.Start(total)
	defer prog.Done()
	for _, f := range files {
		p := filepath.Join(dest, filepath.FromSlash(f.Path))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return 0, err
		}
		if err := extractFile(ctx, st, f.Layer, p, prog); err != nil {
			return 0, fmt.Errorf("%s: %w", f.Path, err)
		}
	}
	return len(files), nil
}

func extractFile(ctx context.Context, st cas.Store, layer ocispec.Descriptor, p string, prog cas.Progress) error {
	rc, err := st.Fetch(ctx, layer) // verifies as it reads
	if err != nil {
		return err
	}
	defer rc.Close()
	out, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, &progressReader{r: rc, add: prog.Add}); err != nil {
		out.Close()
		return err
	}
	return errors.Join(out.Sync(), out.Close())
}
