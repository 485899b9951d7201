package bundle

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"sync"

	"github.com/feval/feval/cas"
	"github.com/opencontainers/go-digest"
	specs "github.com/opencontainers/image-spec/specs-go"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

// Media types and annotations of feval artifacts.
const (
	MediaTypeTree = "application/vnd.feval.tree.v1.tar+zstd"
	MediaTypeFile = "application/vnd.feval.file.v1"

	// AnnotationContentDigest and AnnotationContentSize name a payload layer's
	// uncompressed content (like OCI's diff_id).
	AnnotationContentDigest = "dev.feval.content.digest"
	AnnotationContentSize   = "dev.feval.content.size"

	// EpochCreated is the fixed creation time of every artifact unless the caller
	// supplies one (SOURCE_DATE_EPOCH).
	EpochCreated = "1970-01-01T00:00:00Z"
)

// ErrNotArtifact reports a manifest that is not a well-formed feval artifact.
var ErrNotArtifact = errors.New("not a feval artifact")

// ArtifactType returns application/vnd.feval.<kind>.v1+json.
func ArtifactType(kind string) string { return "application/vnd.feval." + kind + ".v1+json" }

// KindOf returns the kind of a feval artifact type, or "" if t is not one.
func KindOf(t string) string {
	const pre, suf = "application/vnd.feval.", ".v1+json"
	if len(t) > len(pre)+len(suf) && t[:len(pre)] == pre && t[len(t)-len(suf):] == suf {
		k := t[len(pre) : len(t)-len(suf)]
		if ValidKind(k) {
			return k
		}
	}
	return ""
}

// ValidKind reports whether k is a usable kind name: 1-32 lower-case letters,
// digits or '-', starting with a letter.
func ValidKind(k string) bool {
	if k == "" || len(k) > 32 || k[0] < 'a' || k[0] > 'z' {
		return false
	}
	for _, c := range k {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}

// BlobWriter is a store that can stream a blob of unknown digest (the local layout).
type BlobWriter interface {
	WriteBlob(mediaType string, fill func(io.Writer) error) (ocispec.Descriptor, error)
}

// PackTree streams the directory dir into w as one tar+zstd layer (tree layer
// encoding 2: independent frames of TreeFrameSize, compressed concurrently) and
// returns its descriptor, annotated with the uncompressed digest and size.
func PackTree(w BlobWriter, dir string, prog cas.Progress) (ocispec.Descriptor, error) {
	return packTree(w, dir, prog, frameWorkers())
}

// packTree is PackTree with workers encoders.
func packTree(w BlobWriter, dir string, prog cas.Progress, workers int) (ocispec.Descriptor, error) {
	if prog == nil {
		prog = cas.NoProgress
	}
	var total int64
	_ = filepath.WalkDir(dir, func(_ string, d os.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			if fi, err := d.Info(); err == nil {
				total += fi.Size()
			}
		}
		return nil
	})
	prog.Start(total)
	defer prog.Done()
	var udig digest.Digest
	var usize int64
	desc, err := w.WriteBlob(MediaTypeTree, func(out io.Writer) error {
		// Reading, tar and the uncompressed hash run in one goroutine, the
		// frames (TreeFrameSize) are compressed by workers others, and
		// this one hashes and writes them in order. Frames are independent,
		// so the layer does not depend on the number of workers.
		fw, err := newFrameWriter(TreeFrameSize, workers)
		if err != nil {
			return err
		}
		h := digest.SHA256.Digester()
		cw := &counter{}
		go func() {
			err := WriteTar(io.MultiWriter(fw, h.Hash(), cw), dir, prog.Add)
			fw.closeWrite(err)
		}()
		if err := fw.drainTo(out); err != nil {
			return err
		}
		udig, usize = h.Digest(), cw.n
		return nil
	})
	if err != nil {
		return ocispec.Descriptor{}, fmt.Errorf("packing %s: %w", dir, err)
	}
	desc.Annotations = map[string]string{
		AnnotationContentDigest: udig.String(),
		AnnotationContentSize:   strconv.FormatInt(usize, 10),
		ocispec.AnnotationTitle: "tree.tar.zst",
	}
	return desc, nil
}

type counter struct{ n int64 }

func (c *counter) Write(p []byte) (int, error) { c.n += int64(len(p)); return len(p), nil }

// PackFile stores one file as a raw layer titled with the file's base name,
// reporting the bytes stored to prog (nil: none).
func PackFile(w BlobWriter, path string, prog cas.Progress) (ocispec.Descriptor, error) {
	if prog == nil {
		prog = cas.NoProgress
	}
	f, err := os.Open(path)
	if err != nil {
		return ocispec.Descriptor{}, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return ocispec.Descriptor{}, err
	}
	prog.Start(fi.Size())
	defer prog.Done()
	desc, err := w.WriteBlob(MediaTypeFile, func(out io.Writer) error {
		_, err := io.Copy(out, &progressReader{r: f, add: prog.Add})
		return err
	})
	if err != nil {
		return ocispec.Descriptor{}, fmt.Errorf("packing %s: %w", path, err)
	}
	desc.Annotations = map[string]string{
		AnnotationContentDigest: desc.Digest.String(),
		AnnotationContentSize:   strconv.FormatInt(desc.Size, 10),
		ocispec.AnnotationTitle: filepath.Base(path),
	}
	return desc, nil
}

// PushBytes stores b under its digest and returns its descriptor.
func PushBytes(ctx context.Context, s cas.Store, mediaType string, b []byte) (ocispec.Descriptor, error) {
	desc := ocispec.Descriptor{MediaType: mediaType, Digest: digest.FromBytes(b), Size: int64(len(b))}
	if err := s.Push(ctx, desc, bytes.NewReader(b)); err != nil {
		return ocispec.Descriptor{}, err
	}
	return desc, nil
}

// PushData stores b as a raw payload layer titled name.
func PushData(ctx context.Context, s cas.Store, name string, b []byte) (ocispec.Descriptor, error) {
	desc, err := PushBytes(ctx, s, MediaTypeFile, b)
	if err != nil {
		return desc, err
	}
	desc.Annotations = map[string]string{
		AnnotationContentDigest: desc.Digest.String(),
		AnnotationContentSize:   strconv.FormatInt(desc.Size, 10),
		ocispec.AnnotationTitle: name,
	}
	return desc, nil
}

// Artifact describes a record to write: its kind, the record value (encoded as
// canonical JSON), payload layers already in the store, and an optional subject.
type Artifact struct {
	Kind    string
	Record  any
	Layers  []ocispec.Descriptor
	Subject *ocispec.Descriptor
	// Created overrides EpochCreated (from SOURCE_DATE_EPOCH); it must be fixed
	// for the artifact to be reproducible.
	Created string
}

// Encoded is an artifact in bytes: what Write stores.
type Encoded struct {
	Manifest []byte
	Desc     ocispec.Descriptor // the manifest's descriptor
	Record   []byte
	RecordD  ocispec.Descriptor
}

// Encode builds an artifact's record layer and manifest without storing them.
// The manifest is canonical JSON, so equal inputs give equal digests; replay uses
// Encode to regenerate a record's digest.
func Encode(a Artifact) (Encoded, error) {
	if !ValidKind(a.Kind) {
		return Encoded{}, fmt.Errorf("kind %q: want lower-case letters, digits and '-'", a.Kind)
	}
	rec, err := Canonical(a.Record)
	if err != nil {
		return Encoded{}, fmt.Errorf("encoding %s record: %w", a.Kind, err)
	}
	at := ArtifactType(a.Kind)
	recDesc := ocispec.Descriptor{MediaType: at, Digest: digest.FromBytes(rec), Size: int64(len(rec)),
		Annotations: map[string]string{ocispec.AnnotationTitle: "record.json"}}
	cfg := ocispec.DescriptorEmptyJSON
	created := a.Created
	if created == "" {
		created = EpochCreated
	}
	m := ocispec.Manifest{
		Versioned:    manifestVersion,
		MediaType:    ocispec.MediaTypeImageManifest,
		ArtifactType: at,
		Config:       cfg,
		Layers:       append([]ocispec.Descriptor{recDesc}, a.Layers...),
		Subject:      a.Subject,
		Annotations:  map[string]string{ocispec.AnnotationCreated: created},
	}
	mb, err := Canonical(m)
	if err != nil {
		return Encoded{}, err
	}
	desc := ocispec.Descriptor{MediaType: ocispec.MediaTypeImageManifest, Digest: digest.FromBytes(mb), Size: int64(len(mb)), ArtifactType: at}
	return Encoded{Manifest: mb, Desc: desc, Record: rec, RecordD: recDesc}, nil
}

// Write stores the artifact's record layer, the empty config and the manifest, and
// returns the manifest descriptor.
func Write(ctx context.Context, s cas.Store, a Artifact) (ocispec.Descriptor, error) {
	enc, err := Encode(a)
	if err != nil {
		return ocispec.Descriptor{}, err
	}
	if _, err := PushBytes(ctx, s, enc.RecordD.MediaType, enc.Record); err != nil {
		return ocispec.Descriptor{}, err
	}
	if _, err := PushBytes(ctx, s, ocispec.MediaTypeEmptyJSON, ocispec.DescriptorEmptyJSON.Data); err != nil {
		return ocispec.Descriptor{}, err
	}
	if _, err := PushBytes(ctx, s, ocispec.MediaTypeImageManifest, enc.Manifest); err != nil {
		return ocispec.Descriptor{}, err
	}
	return enc.Desc, nil
}

// Loaded is a feval artifact read back from a store and checked for form.
type Loaded struct {
	Desc     ocispec.Descriptor
	Manifest ocispec.Manifest
	Kind     string
	Record   []byte               // canonical JSON
	Payloads []ocispec.Descriptor // layers after the record
}

// Load fetches and checks a feval artifact: a manifest within size limits whose
// artifactType is a feval kind and whose first layer is a canonical-JSON record of
// that type. Digests are verified as the content is read.
func Load(ctx context.Context, s cas.Store, desc ocispec.Descriptor) (*Loaded, error) {
	if desc.MediaType == "" {
		desc.MediaType = ocispec.MediaTypeImageManifest
	}
	b, err := cas.ReadAll(ctx, s, desc, cas.MaxManifestSize)
	if err != nil {
		return nil, fmt.Errorf("reading manifest %s: %w", desc.Digest, err)
	}
	var m ocispec.Manifest
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("manifest %s: %w: %v", desc.Digest, ErrNotArtifact, err)
	}
	kind := KindOf(m.ArtifactType)
	if kind == "" || len(m.Layers) == 0 || m.Layers[0].MediaType != m.ArtifactType {
		return nil, fmt.Errorf("manifest %s (artifactType %q): %w", desc.Digest, m.ArtifactType, ErrNotArtifact)
	}
	rec, err := cas.ReadAll(ctx, s, m.Layers[0], MaxRecordSize)
	if err != nil {
		return nil, fmt.Errorf("reading record of %s: %w", desc.Digest, err)
	}
	if c, err := Canonicalize(rec); err != nil || !bytes.Equal(c, rec) {
		return nil, fmt.Errorf("record of %s is not canonical JSON: %w (%w)", desc.Digest, ErrMalformedRecord, ErrNotArtifact)
	}
	desc.ArtifactType = m.ArtifactType
	return &Loaded{Desc: desc, Manifest: m, Kind: kind, Record: rec, Payloads: m.Layers[1:]}, nil
}

// Decode parses the record into v, strictly (canonical form, no unknown fields).
func (l *Loaded) Decode(v any) error {
	if err := ParseCanonical(l.Record, v); err != nil {
		return fmt.Errorf("%s record %s: %w", l.Kind, l.Desc.Digest, err)
	}
	return nil
}

// ReadPayload returns the uncompressed bytes of a file or tree layer (bounded by
// limit), verifying the recorded uncompressed digest.
func ReadPayload(ctx context.Context, s cas.Store, layer ocispec.Descriptor, limit int64) ([]byte, error) {
	rc, err := OpenPayload(ctx, s, layer)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	b, err := io.ReadAll(io.LimitReader(rc, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("payload %s exceeds %d bytes: %w", layer.Digest, limit, cas.ErrTooLarge)
	}
	return b, nil
}

// OpenPayload returns a reader of a layer's uncompressed content that fails at the
// end if it does not match the layer's AnnotationContentDigest.
func OpenPayload(ctx context.Context, s cas.Store, layer ocispec.Descriptor) (io.ReadCloser, error) {
	want, err := digest.Parse(layer.Annotations[AnnotationContentDigest])
	if err != nil {
		return nil, fmt.Errorf("layer %s has no valid %s annotation: %w", layer.Digest, AnnotationContentDigest, ErrNotArtifact)
	}
	size, err := strconv.ParseInt(layer.Annotations[AnnotationContentSize], 10, 64)
	if err != nil || size < 0 {
		return nil, fmt.Errorf("layer %s has no valid %s annotation: %w", layer.Digest, AnnotationContentSize, ErrNotArtifact)
	}
	rc, err := s.Fetch(ctx, layer)
	if err != nil {
		return nil, err
	}
	var r io.Reader = rc
	closeFn := rc.Close
	switch {
	case IsRaw(layer.MediaType):
	case layer.MediaType == MediaTypeTree:
		zr, err := getZstdReader(rc)
		if err != nil {
			rc.Close()
			return nil, err
		}
		r = zr
		var once sync.Once // a second Close must not pool the decoder twice
		closeFn = func() error { once.Do(func() { putZstdReader(zr) }); return rc.Close() }
	default:
		rc.Close()
		return nil, fmt.Errorf("layer %s has media type %q: %w", layer.Digest, layer.MediaType, ErrNotArtifact)
	}
	vr, err := cas.NewVerifyReader(io.NopCloser(r), ocispec.Descriptor{Digest: want, Size: size})
	if err != nil {
		closeFn()
		return nil, err
	}
	return &readCloser{Reader: vr, close: closeFn}, nil
}

type readCloser struct {
	io.Reader
	close func() error
}

func (r *readCloser) Close() error { return r.close() }

var manifestVersion = specs.Versioned{SchemaVersion: 2}
