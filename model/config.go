package model

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/feval/feval/internal/strictjson"
)

// Files of a model directory.
const (
	ConfigFile    = "config.json"
	TokenizerFile = "tokenizer.json"
	WeightsFile   = "model.safetensors"
)

// ErrModel is wrapped by every reason a model is refused.
var ErrModel = errors.New("invalid model")

func modelErr(format string, a ...any) error {
	return fmt.Errorf("%w: %s", ErrModel, fmt.Sprintf(format, a...))
}

// Limits bound what a model may be. The defaults admit Qwen3 models up to
// the 32B size; the reference runtime's memory is the caller's concern.
type Limits struct {
	MaxConfigBytes    int
	MaxTokenizerBytes int
	MaxHidden         int
	MaxLayers         int
	MaxHeads          int
	MaxHeadDim        int
	MaxIntermediate   int
	MaxVocab          int
	MaxPositions      int
	// MaxWeightsBytes bounds the weights file, which is read whole.
	MaxWeightsBytes int64
}

// DefaultLimits are the limits feval applies.
var DefaultLimits = Limits{
	MaxConfigBytes: 64 << 10, MaxTokenizerBytes: 32 << 20,
	MaxHidden: 16384, MaxLayers: 128, MaxHeads: 256, MaxHeadDim: 512,
	MaxIntermediate: 65536, MaxVocab: 1 << 20, MaxPositions: 1 << 20,
	MaxWeightsBytes: 80 << 30,
}

// Config is the part of a Qwen3 config.json the forward pass depends on.
// Float parameters are kept as the decimal text of the file and parsed with
// correct rounding, so every reader gets the same float.
type Config struct {
	HiddenSize       int
	Layers           int
	Heads            int
	KVHeads          int
	HeadDim          int
	IntermediateSize int
	VocabSize        int
	MaxPositions     int
	TieEmbeddings    bool
	RMSNormEps       float64
	RopeTheta        float64
	EOSTokenIDs      []int
}

// configKeys are the keys ParseConfig reads; other keys of the Hugging Face
// form (torch_dtype, initializer_range, transformers_version, …) do not change
// the forward pass and are ignored, but each key may appear only once.
var requiredKeys = []string{"model_type", "hidden_size", "num_hidden_layers", "num_attention_heads",
	"num_key_value_heads", "head_dim", "intermediate_size", "rms_norm_eps", "rope_theta",
	"vocab_size", "max_position_embeddings", "eos_token_id"}

// ParseConfig reads a Qwen3 config.json: model_type "qwen3"; hidden_act
// "silu" if given; no attention bias, rope scaling or sliding window; every
// dimension a positive integer inside lim, num_attention_heads a multiple of
// num_key_value_heads, head_dim even; rms_norm_eps and rope_theta positive
// and finite; eos_token_id one id or a non-empty list of ids below
// vocab_size; tie_word_embeddings a boolean (default false).
func ParseConfig(b []byte, lim Limits) (Config, error) {
	var c Config
	if len(b) > lim.MaxConfigBytes {
		return c, modelErr("config.json has %d bytes, over %d", len(b), lim.MaxConfigBytes)
	}
	keys, err := objectKeys(b)
	if err != nil {
		return c, modelErr("config.json: %v", err)
	}
	for _, k := range requiredKeys {
		if _, ok := keys[k]; !ok {
			return c, modelErr("config.json has no %q", k)
		}
	}
	str := func(k string) (string, bool) {
		var s string
		raw, ok := keys[k]
		return s, ok && json.Unmarshal(raw, &s) == nil
	}
	if s, _ := str("model_type"); s != "qwen3" {
		return c, modelErr("config.json: model_type %s, the reference runtime runs qwen3", keys["model_type"])
	}
	if raw, ok := keys["hidden_act"]; ok {
		if s, _ := str("hidden_act"); s != "silu" {
			return c, modelErr("config.json: hidden_act %s, qwen3 uses silu", raw)
		}
	}
	for _, k := range []string{"attention_bias", "use_sliding_window"} {
		if raw, ok := keys[k]; ok && string(raw) != "false" && string(raw) != "null" {
			return c, modelErr("config.json: %s %s is not supported", k, raw)
		}
	}
	if raw, ok := keys["rope_scaling"]; ok && string(raw) != "null" {
		return c, modelErr("config.json: rope_scaling %s is not supported", raw)
	}
	if raw, ok := keys["tie_word_embeddings"]; ok {
		if err := json.Unmarshal(raw, &c.TieEmbeddings); err != nil {
			return c, modelErr("config.json: tie_word_embeddings %s is not a boolean", raw)
		}
	}
	ints := []struct {
		key string
		dst *int
		max int
	}{
		{"hidden_size", &c.HiddenSize, lim.MaxHidden},
		{"num_hidden_layers", &c.Layers, lim.MaxLayers},
		{"num_attention_heads", &c.Heads, lim.MaxHeads},
		{"num_key_value_heads", &c.KVHeads, lim.MaxHeads},
		{"head_dim", &c.HeadDim, lim.MaxHeadDim},
		{"intermediate_size", &c.IntermediateSize, lim.MaxIntermediate},
		{"vocab_size", &c.VocabSize, lim.MaxVocab},
		{"max_position_embeddings", &c.MaxPositions, lim.MaxPositions},
	}
	for _, f := range ints {
		v, ok := intValue(keys[f.key])
		if !ok || v <= 0 || v > f.max {
			return c, modelErr("config.json: %s %s is not an integer in [1, %d]", f.key, keys[f.key], f.max)
		}
		*f.dst = v
	}
	if c.Heads%c.KVHeads != 0 || c.HeadDim%2 != 0 {
		return c, modelErr("config.json: %d heads over %d key/value heads of dimension %d: heads must be a multiple of key/value heads and the dimension even", c.Heads, c.KVHeads, c.HeadDim)
	}
	for _, f := range []struct {
		key string
		dst *float64
	}{{"rms_norm_eps", &c.RMSNormEps}, {"rope_theta", &c.RopeTheta}} {
		v, err := strconv.ParseFloat(string(keys[f.key]), 64)
		if err != nil || !(v > 0) || v > 1e12 {
			return c, modelErr("config.json: %s %s is not a positive number", f.key, keys[f.key])
		}
		*f.dst = v
	}
	eos := keys["eos_token_id"]
	if v, ok := intValue(eos); ok {
		c.EOSTokenIDs = []int{v}
	} else {
		var list []json.Number
		d := json.NewDecoder(bytes.NewReader(eos))
		d.UseNumber()
		if d.Decode(&list) != nil || len(list) == 0 || len(list) > 16 {
			return c, modelErr("config.json: eos_token_id %s is neither an id nor a list of ids", eos)
		}
		for _, n := range list {
			v, ok := intValue(json.RawMessage(n))
			if !ok {
				return c, modelErr("config.json: eos_token_id %s is neither an id nor a list of ids", eos)
			}
			c.EOSTokenIDs = append(c.EOSTokenIDs, v)
		}
	}
	for _, id := range c.EOSTokenIDs {
		if id < 0 || id >= c.VocabSize {
			return c, modelErr("config.json: eos_token_id %d is outside the vocabulary of %d", id, c.VocabSize)
		}
	}
	return c, nil
}

// IsEOS reports whether id ends a completion.
func (c Config) IsEOS(id int) bool {
	for _, e := range c.EOSTokenIDs {
		if e == id {
			return true
		}
	}
	return false
}

// intValue reads a JSON integer without sign tricks, exponent or fraction.
func intValue(raw json.RawMessage) (int, bool) {
	s := string(raw)
	if s == "" || len(s) > 9 || (len(s) > 1 && s[0] == '0') {
		return 0, false
	}
	v := 0
	for _, r := range s {
		if r < '0' || r > '9' {
			return 0, false
		}
		v = v*10 + int(r-'0')
	}
	return v, true
}

// objectKeys splits one JSON object into its members under feval's strict
// decoding (no name twice, nothing after the object).
func objectKeys(b []byte) (map[string]json.RawMessage, error) {
	var out map[string]json.RawMessage
	if err := strictjson.Decode(b, &out); err != nil {
		return nil, err
	}
	if out == nil {
		return nil, errors.New("not a JSON object")
	}
	return out, nil
}
