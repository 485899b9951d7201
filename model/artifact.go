package model

import (
	"context"
	"errors"
	"fmt"
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
	files, err := bundle.LoadModel(ctx, st, desc)
	if err != nil {
		if errors.Is(err, bundle.ErrNotArtifact) || errors.Is(err, bundle.ErrLimit) || errors.Is(err, bundle.ErrUnsafeEntry) {
			return nil, fmt.Errorf("%w: %v", ErrModel, err)
		}
		return nil, err
	}
	layers := map[string]ocispec.Descriptor{}
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
		layers[f.Path] = f.Layer
	}
	read := func(name string, limit int64) ([]byte, error) {
		layer, ok := layers[name]
		if !ok {
			return nil, modelErr("the model has no %s", name)
		}
		if layer.Size > limit {
			return nil, modelErr("%s has %d bytes, over %d", name, layer.Size, limit)
		}
		return cas.ReadAll(ctx, st, layer, limit)
	}
	config, err := read(ConfigFile, int64(lim.MaxConfigBytes))
	if err != nil {
		return nil, err
	}
	// The configuration first: one out of bounds is refused before the
	// files it sizes are read.
	if _, err := ParseConfig(config, lim); err != nil {
		return nil, err
	}
	tokenizer, err := read(TokenizerFile, int64(lim.MaxTokenizerBytes))
	if err != nil {
		return nil, err
	}
	weights, err := read(WeightsFile, lim.MaxWeightsBytes)
	if err != nil {
		return nil, err
	}
	return Load(config, tokenizer, weights, lim)
}
