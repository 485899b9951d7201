package model

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"slices"

	"github.com/feval/feval/model/safetensors"
	"github.com/opencontainers/go-digest"
)

// WeightLimits bound a weights file's header.
var WeightLimits = safetensors.Limits{MaxHeaderBytes: 16 << 20, MaxTensors: 1 << 14}

// Checked is what a model's checks leave when its weights are not held: its
// configuration and tokenizer (CheckArtifact).
type Checked struct {
	Config    Config
	Tokenizer *Tokenizer
	// TokenizerDigest is the SHA-256 digest of tokenizer.json's bytes: a
	// task names the tokenizer its prompts are encoded with by it.
	TokenizerDigest digest.Digest
}

// Model is a checked Qwen3 model: its configuration, tokenizer and weights
// widened to float32, by tensor name (TensorNames), row-major.
type Model struct {
	Checked
	Tensors map[string][]float32
	run     runtime // the forward pass's view of Tensors
}

// TensorNames returns the tensors a model of config c has, with their
// shapes, in the Hugging Face Qwen3 naming.
func TensorNames(c Config) map[string][]int64 {
	h, hd, i, v := int64(c.HiddenSize), int64(c.HeadDim), int64(c.IntermediateSize), int64(c.VocabSize)
	q, kv := int64(c.Heads)*hd, int64(c.KVHeads)*hd
	out := map[string][]int64{"model.embed_tokens.weight": {v, h}, "model.norm.weight": {h}}
	if !c.TieEmbeddings {
		out["lm_head.weight"] = []int64{v, h}
	}
	for l := 0; l < c.Layers; l++ {
		p := fmt.Sprintf("model.layers.%d.", l)
		out[p+"input_layernorm.weight"] = []int64{h}
		out[p+"post_attention_layernorm.weight"] = []int64{h}
		out[p+"self_attn.q_proj.weight"] = []int64{q, h}
		out[p+"self_attn.k_proj.weight"] = []int64{kv, h}
		out[p+"self_attn.v_proj.weight"] = []int64{kv, h}
		out[p+"self_attn.o_proj.weight"] = []int64{h, q}
		out[p+"self_attn.q_norm.weight"] = []int64{hd}
		out[p+"self_attn.k_norm.weight"] = []int64{hd}
		out[p+"mlp.gate_proj.weight"] = []int64{i, h}
		out[p+"mlp.up_proj.weight"] = []int64{i, h}
		out[p+"mlp.down_proj.weight"] = []int64{h, i}
	}
	return out
}

// Load builds a model from the bytes of its three files: config.json and
// tokenizer.json are parsed within lim; the weights must be one safetensors
// file holding exactly the tensors of TensorNames, each F32, BF16 or F16, all
// finite (BF16 and F16 widen to float32 exactly).
func Load(config, tokenizer, weights []byte, lim Limits) (*Model, error) {
	ck, err := checkText(config, tokenizer, lim)
	if err != nil {
		return nil, err
	}
	es, err := safetensors.ParseHeader(weights, WeightLimits)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrModel, WeightsFile, err)
	}
	want := TensorNames(ck.Config)
	data := safetensors.DataSection(weights, es)
	got := map[string][]float32{}
	for _, e := range es {
		if err := checkTensor(want, e); err != nil {
			return nil, err
		}
		f := make([]float32, e.Elements())
		if err := widen(e, data[e.Begin:e.End], 0, f); err != nil {
			return nil, err
		}
		got[e.Name] = f
	}
	if err := checkComplete(want, es); err != nil {
		return nil, err
	}
	m := &Model{Checked: ck, Tensors: got}
	m.run = newRuntime(ck.Config, got)
	return m, nil
}

// checkText parses config.json and tokenizer.json as Load does.
func checkText(config, tokenizer []byte, lim Limits) (Checked, error) {
	c, err := ParseConfig(config, lim)
	if err != nil {
		return Checked{}, err
	}
	tok, err := ParseTokenizer(tokenizer, c.VocabSize, lim)
	if err != nil {
		return Checked{}, err
	}
	for _, id := range c.EOSTokenIDs {
		if !tok.Known(id) {
			return Checked{}, modelErr("eos_token_id %d is not a token of tokenizer.json", id)
		}
	}
	return Checked{Config: c, Tokenizer: tok, TokenizerDigest: digest.FromBytes(tokenizer)}, nil
}

// checkTensor refuses a tensor that is not one of want, or not of its shape.
func checkTensor(want map[string][]int64, e safetensors.Entry) error {
	shape, ok := want[e.Name]
	if !ok {
		return modelErr("%s: tensor %q is not part of a qwen3 model of this configuration", WeightsFile, e.Name)
	}
	if !slices.Equal(shape, e.Shape) {
		return modelErr("%s: tensor %q has shape %v, the configuration needs %v", WeightsFile, e.Name, e.Shape, shape)
	}
	return nil
}

// checkComplete refuses weights that lack a tensor of want, naming the
// first missing in name order (so the refusal replays identically).
func checkComplete(want map[string][]int64, es []safetensors.Entry) error {
	for _, name := range slices.Sorted(maps.Keys(want)) {
		if !slices.ContainsFunc(es, func(e safetensors.Entry) bool { return e.Name == name }) {
			return modelErr("%s: tensor %q is missing", WeightsFile, name)
		}
	}
	return nil
}

// widen reads b, tensor e's elements from element first on, as float32 into
// out (when not nil), and refuses a dtype other than F32, BF16 and F16 and a
// value that is not finite.
func widen(e safetensors.Entry, b []byte, first int, out []float32) error {
	for i := range len(b) / int(e.ElementSize) {
		var f float32
		switch e.DType {
		case "F32":
			f = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
		case "BF16":
			f = math.Float32frombits(uint32(binary.LittleEndian.Uint16(b[2*i:])) << 16)
		case "F16":
			f = halfToFloat(binary.LittleEndian.Uint16(b[2*i:]))
		default:
			return modelErr("%s: tensor %q is %s; weights are F32, BF16 or F16", WeightsFile, e.Name, e.DType)
		}
		if math.IsNaN(float64(f)) || math.IsInf(float64(f), 0) {
			return modelErr("%s: tensor %q holds %v at element %d", WeightsFile, e.Name, f, first+i)
		}
		if out != nil {
			out[i] = f
		}
	}
	return nil
}

// checkChunk is how many bytes of a tensor checkWeights reads at once.
const checkChunk = 1 << 20

// checkWeights checks a safetensors file of size bytes read from r as Load
// checks weights, reading the data section in order, at most checkChunk
// bytes at a time, and keeping none of it. A problem Load would report is
// reported too, though with several problems perhaps another first.
func checkWeights(r io.Reader, size int64, c Config) error {
	es, err := safetensors.ReadHeader(r, size, WeightLimits)
	if errors.Is(err, safetensors.ErrInvalid) {
		return fmt.Errorf("%w: %s: %w", ErrModel, WeightsFile, err)
	}
	if err != nil {
		return err
	}
	want := TensorNames(c)
	for _, e := range es {
		if err := checkTensor(want, e); err != nil {
			return err
		}
	}
	if err := checkComplete(want, es); err != nil {
		return err
	}
	// The tensors tile the data section (ReadHeader): in offset order they
	// are read front to back.
	slices.SortFunc(es, func(a, b safetensors.Entry) int { return cmp.Compare(a.Begin, b.Begin) })
	buf := make([]byte, checkChunk)
	for _, e := range es {
		step := checkChunk / e.ElementSize * e.ElementSize
		for at := e.Begin; at < e.End; at += step {
			n := min(step, e.End-at)
			if _, err := io.ReadFull(r, buf[:n]); err != nil {
				return err
			}
			if err := widen(e, buf[:n], int((at-e.Begin)/e.ElementSize), nil); err != nil {
				return err
			}
		}
	}
	return nil
}

// halfToFloat converts an IEEE half-precision value exactly.
func halfToFloat(h uint16) float32 {
	sign := uint32(h>>15) << 31
	exp := uint32(h>>10) & 0x1f
	frac := uint32(h) & 0x3ff
	switch {
	case exp == 0x1f:
		return math.Float32frombits(sign | 0xff<<23 | frac<<13)
	case exp == 0 && frac == 0:
		return math.Float32frombits(sign)
	case exp == 0: // subnormal: frac·2^-24
		f := float32(frac) / (1 << 24)
		if sign != 0 {
			f = -f
		}
		return f
	}
	return math.Float32frombits(sign | (exp+112)<<23 | frac<<13)
}
