package model

import (
	"encoding/binary"
	"fmt"
	"math"
	"slices"

	"github.com/feval/feval/model/safetensors"
	"github.com/opencontainers/go-digest"
)

// WeightLimits bound a weights file's header.
var WeightLimits = safetensors.Limits{MaxHeaderBytes: 16 << 20, MaxTensors: 1 << 14}

// Model is a checked Qwen3 model: its configuration, tokenizer and weights
// widened to float32, by tensor name (TensorNames), row-major.
type Model struct {
	Config    Config
	Tokenizer *Tokenizer
	// TokenizerDigest is the SHA-256 digest of tokenizer.json's bytes: a
	// task names the tokenizer its prompts are encoded with by it.
	TokenizerDigest digest.Digest
	Tensors         map[string][]float32
	run             runtime // the forward pass's view of Tensors
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
	c, err := ParseConfig(config, lim)
	if err != nil {
		return nil, err
	}
	tok, err := ParseTokenizer(tokenizer, c.VocabSize, lim)
	if err != nil {
		return nil, err
	}
	for _, id := range c.EOSTokenIDs {
		if !tok.Known(id) {
			return nil, modelErr("eos_token_id %d is not a token of tokenizer.json", id)
		}
	}
	es, err := safetensors.ParseHeader(weights, WeightLimits)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrModel, WeightsFile, err)
	}
	want := TensorNames(c)
	data := safetensors.DataSection(weights, es)
	got := map[string][]float32{}
	for _, e := range es {
		shape, ok := want[e.Name]
		if !ok {
			return nil, modelErr("%s: tensor %q is not part of a qwen3 model of this configuration", WeightsFile, e.Name)
		}
		if !slices.Equal(shape, e.Shape) {
			return nil, modelErr("%s: tensor %q has shape %v, the configuration needs %v", WeightsFile, e.Name, e.Shape, shape)
		}
		f, err := floats(e, data[e.Begin:e.End])
		if err != nil {
			return nil, err
		}
		got[e.Name] = f
	}
	for name := range want {
		if _, ok := got[name]; !ok {
			return nil, modelErr("%s: tensor %q is missing", WeightsFile, name)
		}
	}
	m := &Model{Config: c, Tokenizer: tok, TokenizerDigest: digest.FromBytes(tokenizer), Tensors: got}
	m.run = newRuntime(c, got)
	return m, nil
}

// floats widens a tensor's elements to float32 and refuses non-finite values.
func floats(e safetensors.Entry, b []byte) ([]float32, error) {
	n := int(e.Elements())
	out := make([]float32, n)
	for i := range out {
		var f float32
		switch e.DType {
		case "F32":
			f = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
		case "BF16":
			f = math.Float32frombits(uint32(binary.LittleEndian.Uint16(b[2*i:])) << 16)
		case "F16":
			f = halfToFloat(binary.LittleEndian.Uint16(b[2*i:]))
		default:
			return nil, modelErr("%s: tensor %q is %s; weights are F32, BF16 or F16", WeightsFile, e.Name, e.DType)
		}
		if math.IsNaN(float64(f)) || math.IsInf(float64(f), 0) {
			return nil, modelErr("%s: tensor %q holds %v at element %d", WeightsFile, e.Name, f, i)
		}
		out[i] = f
	}
	return out, nil
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
