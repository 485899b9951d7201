package model_test

import (
	"context"
	"encoding/binary"
	"errors"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/feval/feval/bundle"
	"github.com/feval/feval/cas"
	"github.com/feval/feval/internal/roundtest"
	"github.com/feval/feval/model"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

// packModel writes the tiny model's files (with extra files, or without
// some) into a directory and packs it as a ModelPack artifact.
func packModel(t *testing.T, l *cas.Layout, extra map[string][]byte, drop ...string) ocispec.Descriptor {
	t.Helper()
	_, f := tiny(t)
	dir := t.TempDir()
	if err := f.Write(dir); err != nil {
		t.Fatal(err)
	}
	for _, name := range drop {
		if err := os.Remove(filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	for name, b := range extra {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	s := roundtest.NewSigner(t)
	p, err := bundle.PackModel(context.Background(), l, func() (*bundle.Signer, error) { return s, nil }, dir, bundle.PackOptions{Kind: "model"})
	if err != nil {
		t.Fatal(err)
	}
	return p.Artifact.OCI()
}

// TestLoadArtifact: a committed model is read from its ModelPack artifact and
// checked; a model in a format that runs code, in another format, in shards,
// without its tokenizer, over the limits, or whose weights do not match its
// configuration is refused with ErrModel and a reason naming the file.
func TestLoadArtifact(t *testing.T) {
	ctx := context.Background()
	l, err := cas.Init(filepath.Join(t.TempDir(), "store"))
	if err != nil {
		t.Fatal(err)
	}
	m, f := tiny(t)
	got, err := model.LoadArtifact(ctx, l, packModel(t, l, map[string][]byte{"generation_config.json": []byte(`{}`)}), model.DefaultLimits)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got.Config, m.Config) || !reflect.DeepEqual(got.Tensors, m.Tensors) {
		t.Fatalf("loaded %+v, want %+v", got.Config, m.Config)
	}
	pickle := append([]byte{0x80, 0x04}, make([]byte, 64)...)
	small := model.DefaultLimits
	small.MaxWeightsBytes = int64(len(f.Weights)) - 1
	big := model.DefaultLimits
	big.MaxHidden = 16
	for name, c := range map[string]struct {
		extra map[string][]byte
		drop  []string
		lim   model.Limits
		want  string
	}{
		"pickle weights":  {extra: map[string][]byte{"pytorch_model.bin": pickle}, want: "pytorch_model.bin is a .bin file, a format that runs code"},
		"torch.save":      {extra: map[string][]byte{"model.pt": []byte("PK\x03\x04")}, want: "model.pt is a .pt file"},
		"gguf":            {extra: map[string][]byte{"model.gguf": []byte("GGUF")}, want: "safetensors weights only"},
		"shards":          {extra: map[string][]byte{"model-00002-of-00002.safetensors": f.Weights}, want: "the weights are one file"},
		"no tokenizer":    {drop: []string{model.TokenizerFile}, want: "has no tokenizer.json"},
		"no weights":      {drop: []string{model.WeightsFile}, want: "has no model.safetensors"},
		"weights limit":   {lim: small, want: "model.safetensors has"},
		"dimension limit": {lim: big, want: "hidden_size"},
		"pickle as safetensors": {drop: []string{model.WeightsFile},
			extra: map[string][]byte{model.WeightsFile: pickle}, want: "never pickle"},
		"wrong weights": {drop: []string{model.WeightsFile},
			extra: map[string][]byte{model.WeightsFile: f.Weights[:len(f.Weights)-4]}, want: "model.safetensors"},
	} {
		t.Run(name, func(t *testing.T) {
			lim := c.lim
			if lim == (model.Limits{}) {
				lim = model.DefaultLimits
			}
			desc := packModel(t, l, c.extra, c.drop...)
			_, err := model.LoadArtifact(ctx, l, desc, lim)
			if !errors.Is(err, model.ErrModel) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %v, want ErrModel with %q", err, c.want)
			}
			if _, cerr := model.CheckArtifact(ctx, l, desc, lim); cerr == nil || cerr.Error() != err.Error() {
				t.Fatalf("CheckArtifact: %v, LoadArtifact: %v", cerr, err)
			}
		})
	}
	// Something that is not a model artifact at all.
	s := roundtest.NewSigner(t)
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "a"), []byte("a"), 0o644)
	p, err := bundle.PackPath(ctx, l, s, dir, bundle.PackOptions{Kind: "submission"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := model.LoadArtifact(ctx, l, p.Artifact.OCI(), model.DefaultLimits); !errors.Is(err, model.ErrModel) {
		t.Fatalf("a submission read as a model: %v", err)
	}
}

// TestCheckArtifact: CheckArtifact, which streams the weights through the
// check, accepts the model LoadArtifact accepts with the same configuration
// and tokenizer, refuses a non-finite weight as Load does, and fails on
// weights whose bytes do not match their digest.
func TestCheckArtifact(t *testing.T) {
	ctx := context.Background()
	l, err := cas.Init(filepath.Join(t.TempDir(), "store"))
	if err != nil {
		t.Fatal(err)
	}
	m, f := tiny(t)
	ck, err := model.CheckArtifact(ctx, l, packModel(t, l, nil), model.DefaultLimits)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(*ck, m.Checked) {
		t.Fatalf("checked %+v, want %+v", ck.Config, m.Config)
	}
	if got, want := ck.ResponseText([]int{72, 105}), m.ResponseText([]int{72, 105}); got != want || got != "Hi" {
		t.Fatalf("response text %q, want %q", got, want)
	}

	// A NaN in the last element of the data section.
	nan := append([]byte(nil), f.Weights...)
	binary.LittleEndian.PutUint32(nan[len(nan)-4:], math.Float32bits(float32(math.NaN())))
	_, lerr := model.Load(f.Config, f.Tokenizer, nan, model.DefaultLimits)
	_, cerr := model.CheckArtifact(ctx, l, packModel(t, l, map[string][]byte{model.WeightsFile: nan}), model.DefaultLimits)
	if !errors.Is(lerr, model.ErrModel) || cerr == nil || cerr.Error() != lerr.Error() || !strings.Contains(cerr.Error(), "NaN") {
		t.Fatalf("a NaN weight: CheckArtifact %v, Load %v", cerr, lerr)
	}

	// The weights blob damaged in place after packing.
	desc := packModel(t, l, nil)
	files, err := bundle.LoadModel(ctx, l, desc)
	if err != nil {
		t.Fatal(err)
	}
	for _, file := range files {
		if file.Path != model.WeightsFile {
			continue
		}
		p := filepath.Join(l.Root(), "blobs", "sha256", file.Layer.Digest.Encoded())
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		b[len(b)-1] ^= 1 // a finite value still, so only the digest tells
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := model.CheckArtifact(ctx, l, desc, model.DefaultLimits); !errors.Is(err, cas.ErrDigestMismatch) {
		t.Fatalf("damaged weights: %v, want ErrDigestMismatch", err)
	}
}
