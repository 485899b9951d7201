package model

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path"
	"slices"
	"strings"

	"github.com/feval/feval/bundle"
	"github.com/feval/feval/cas"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

// codeFormats are weight formats that run code when loaded (Python pickles,
// torch.save archives): a model holding one is refused, never opened.
var codeFormats = []string{".bin", ".pt", ".pth", ".ckpt", ".pkl", ".pickle", ".joblib"}

// otherFormats are weight formats the reference runtime does not read.
var otherFormats = []string{".gguf", ".onnx", ".h5", ".msgpack", ".npz", ".npy", ".tflite", ".mlmodel"}

// LoadArtifact reads a committed model from st: a ModelPack model artifact
// (bundle.LoadModel checks its manifest) holding config.json, tokenizer.json
// and the weights as one model.safetensors file. A model that holds weights
// in a format that runs code when loaded (pickle, torch.save), in another
// format, or in more than one safetensors file is refused before any of it
// is read; then each file is read within lim (its manifest size first), its
// bytes verified against its digest, and the model checked as Load does:
// the safetensors header in Go before any tensor is read. Other files
// (generation_config.json, a README) are not read. Every refusal wraps
// ErrModel, or the store's error when a blob cannot be read.
func LoadArtifact(ctx context.Context, st cas.Store, desc ocispec.Descriptor, lim Limits) (*Model, error) {
	a, err := openArtifact(ctx, st, desc, lim)
	if err != nil {
		return nil, err
	}
	weights, err := a.read(ctx, WeightsFile, lim.MaxWeightsBytes)
	if err != nil {
		return nil, err
	}
	return Load(a.config, a.tokenizer, weights, lim)
}

// CheckArtifact checks a committed model as LoadArtifact does but streams
// its weights through the check instead of holding them: what is needed when
// another runtime runs the model (a large one), and only its configuration
// and tokenizer are used here. The weights blob is read to its end, so its
// digest is verified.
func CheckArtifact(ctx context.Context, st cas.Store, desc ocispec.Descriptor, lim Limits) (*Checked, error) {
	a, err := openArtifact(ctx, st, desc, lim)
	if err != nil {
		return nil, err
	}
	ck, err := checkText(a.config, a.tokenizer, lim)
	if err != nil {
		return nil, err
	}
	layer, err := a.layer(WeightsFile, lim.MaxWeightsBytes)
	if err != nil {
		return nil, err
	}
	rc, err := st.Fetch(ctx, layer)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	if err := checkWeights(rc, layer.Size, ck.Config); err != nil {
		return nil, err
	}
	if _, err := io.Copy(io.Discard, rc); err != nil {
		return nil, err
	}
	return &ck, nil
}

// artifact is a model artifact whose files passed the format checks, with
// its config.json and tokenizer.json read.
type artifact struct {
	st                cas.Store
	layers            map[string]ocispec.Descriptor
	config, tokenizer []byte
}

// openArtifact lists a model artifact's files, refuses weights in another
// form than one model.safetensors, and reads config.json (checked before the
// files it sizes are read) and tokenizer.json within lim.
func openArtifact(ctx context.Context, st cas.Store, desc ocispec.Descriptor, lim Limits) (*artifact, error) {
	files, err := bundle.LoadModel(ctx, st, desc)
	if err != nil {
		if errors.Is(err, bundle.ErrNotArtifact) || errors.Is(err, bundle.ErrLimit) || errors.Is(err, bundle.ErrUnsafeEntry) {
			return nil, fmt.Errorf("%w: %v", ErrModel, err)
		}
		return nil, err
	}
	a := &artifact{st: st, layers: map[string]ocispec.Descriptor{}}
	for _, f := range files {
		ext := strings.ToLower(path.Ext(f.Path))
		switch {
		case slices.Contains(codeFormats, ext):
			return nil, modelErr("%s is a %s file, a format that runs code when loaded: commit the weights as %s", f.Path, ext, WeightsFile)
		case slices.Contains(otherFormats, ext):
			return nil, modelErr("%s: the reference runtime reads safetensors weights only: commit them as %s", f.Path, WeightsFile)
		case ext == ".safetensors" && f.Path != WeightsFile:
			return nil, modelErr("%s: the weights are one file, %s (merge the shards into it)", f.Path, WeightsFile)
		}
		a.layers[f.Path] = f.Layer
	}
	if a.config, err = a.read(ctx, ConfigFile, int64(lim.MaxConfigBytes)); err != nil {
		return nil, err
	}
	// The configuration first: one out of bounds is refused before the
	// files it sizes are read.
	if _, err := ParseConfig(a.config, lim); err != nil {
		return nil, err
	}
	if a.tokenizer, err = a.read(ctx, TokenizerFile, int64(lim.MaxTokenizerBytes)); err != nil {
		return nil, err
	}
	return a, nil
}

// layer is the layer of file name, refused when missing or over limit bytes.
func (a *artifact) layer(name string, limit int64) (ocispec.Descriptor, error) {
	layer, ok := a.layers[name]
	if !ok {
		return layer, modelErr("the model has no %s", name)
	}
	if layer.Size > limit {
		return layer, modelErr("%s has %d bytes, over %d", name, layer.Size, limit)
	}
	return layer, nil
}

// read reads file name within limit bytes.
func (a *artifact) read(ctx context.Context, name string, limit int64) ([]byte, error) {
	layer, err := a.layer(name, limit)
	if err != nil {
		return nil, err
	}
	return cas.ReadAll(ctx, a.st, layer, limit)
}
