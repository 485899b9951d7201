package model

import (
	"fmt"
	"math"
)

// runtime is the forward pass's view of a model's tensors (no copies).
type runtime struct {
	embed   []float32 // [vocab][hidden]
	layers  []layer
	norm    []float32
	lmHead  []float32 // [vocab][hidden]; embed when tied
	invFreq []float64
}

type layer struct {
	inNorm, postNorm []float32
	q, k, v, o       []float32
	qNorm, kNorm     []float32
	gate, up, down   []float32
}

// newRuntime arranges the checked tensors t of a model of configuration c.
func newRuntime(c Config, t map[string][]float32) runtime {
	r := runtime{embed: t["model.embed_tokens.weight"], norm: t["model.norm.weight"], lmHead: t["lm_head.weight"], invFreq: ropeFrequencies(c)}
	if c.TieEmbeddings {
		r.lmHead = r.embed
	}
	for l := 0; l < c.Layers; l++ {
		p := fmt.Sprintf("model.layers.%d.", l)
		r.layers = append(r.layers, layer{
			inNorm: t[p+"input_layernorm.weight"], postNorm: t[p+"post_attention_layernorm.weight"],
			q: t[p+"self_attn.q_proj.weight"], k: t[p+"self_attn.k_proj.weight"],
			v: t[p+"self_attn.v_proj.weight"], o: t[p+"self_attn.o_proj.weight"],
			qNorm: t[p+"self_attn.q_norm.weight"], kNorm: t[p+"self_attn.k_norm.weight"],
			gate: t[p+"mlp.gate_proj.weight"], up: t[p+"mlp.up_proj.weight"], down: t[p+"mlp.down_proj.weight"],
		})
	}
	return r
}

// ropeFrequencies are the rotary inverse frequencies theta^(-2i/d), i < d/2,
// in float64: exp(-(2i/d)·log theta).
func ropeFrequencies(c Config) []float64 {
	d := c.HeadDim
	out := make([]float64, d/2)
	lt := log(c.RopeTheta)
	for i := range out {
		out[i] = exp(-float64(float64(2*i)/float64(d)) * lt)
	}
	return out
}

// State is one sequence being run through a model: the key/value cache of the
// tokens seen so far. A State is used by one goroutine; States of one Model
// run in parallel.
type State struct {
	m                                    *Model
	pos                                  int
	keys                                 [][]float32 // per layer: pos × kvHeads × headDim
	values                               [][]float32
	x, h, q, k, v, att, gate, up, scores []float32
	logits                               []float32
}

// NewState returns an empty sequence.
func (m *Model) NewState() *State {
	c := m.Config
	s := &State{m: m, keys: make([][]float32, c.Layers), values: make([][]float32, c.Layers)}
	s.x = make([]float32, c.HiddenSize)
	s.h = make([]float32, c.HiddenSize)
	s.q = make([]float32, c.Heads*c.HeadDim)
	s.att = make([]float32, c.Heads*c.HeadDim)
	s.k = make([]float32, c.KVHeads*c.HeadDim)
	s.v = make([]float32, c.KVHeads*c.HeadDim)
	s.gate = make([]float32, c.IntermediateSize)
	s.up = make([]float32, c.IntermediateSize)
	s.logits = make([]float32, c.VocabSize)
	return s
}

// Len is the number of tokens the state has seen.
func (s *State) Len() int { return s.pos }

// Step runs token tok at the next position and, when logits is true, returns
// the next-token logits (a buffer the next Step overwrites). tok must be below
// the vocabulary size and the position below max_position_embeddings; the
// caller checks both.
func (s *State) Step(tok int, logits bool) []float32 {
	m, c := &s.m.run, s.m.Config
	H, hd := c.HiddenSize, c.HeadDim
	copy(s.x, m.embed[tok*H:(tok+1)*H])
	eps := float32(c.RMSNormEps)
	group := c.Heads / c.KVHeads
	scale := float32(1 / math.Sqrt(float64(hd)))
	n := s.pos + 1
	if cap(s.scores) < n {
		s.scores = make([]float32, n, 2*n)
	}
	scores := s.scores[:n]
	for li := range m.layers {
		L := &m.layers[li]
		rmsNorm(s.h, s.x, L.inNorm, eps)
		matVec(s.q, L.q, s.h)
		matVec(s.k, L.k, s.h)
		matVec(s.v, L.v, s.h)
		for hh := 0; hh < c.Heads; hh++ {
			qh := s.q[hh*hd : (hh+1)*hd]
			rmsNorm(qh, qh, L.qNorm, eps)
			s.rope(qh)
		}
		for hh := 0; hh < c.KVHeads; hh++ {
			kh := s.k[hh*hd : (hh+1)*hd]
			rmsNorm(kh, kh, L.kNorm, eps)
			s.rope(kh)
		}
		s.keys[li] = append(s.keys[li], s.k...)
		s.values[li] = append(s.values[li], s.v...)
		K, V := s.keys[li], s.values[li]
		kvw := c.KVHeads * hd
		for hh := 0; hh < c.Heads; hh++ {
			qh := s.q[hh*hd : (hh+1)*hd]
			off := (hh / group) * hd
			mx := float32(math.Inf(-1))
			for t := 0; t < n; t++ {
				sc := float32(dot(qh, K[t*kvw+off:t*kvw+off+hd]) * scale)
				scores[t] = sc
				mx = max(mx, sc)
			}
			var sum float32
			for t := 0; t < n; t++ {
				e := float32(exp(float64(scores[t] - mx)))
				scores[t] = e
				sum += e
			}
			out := s.att[hh*hd : (hh+1)*hd]
			clear(out)
			for t := 0; t < n; t++ {
				p := scores[t] / sum
				vt := V[t*kvw+off : t*kvw+off+hd]
				for i := range out {
					out[i] += float32(p * vt[i])
				}
			}
		}
		matVec(s.h, L.o, s.att)
		for i := range s.x {
			s.x[i] += s.h[i]
		}
		rmsNorm(s.h, s.x, L.postNorm, eps)
		matVec(s.gate, L.gate, s.h)
		matVec(s.up, L.up, s.h)
		for i, g := range s.gate {
			silu := g / float32(1+float32(exp(float64(-g))))
			s.gate[i] = float32(silu * s.up[i])
		}
		matVec(s.h, L.down, s.gate)
		for i := range s.x {
			s.x[i] += s.h[i]
		}
	}
	s.pos++
	if !logits {
		return nil
	}
	rmsNorm(s.h, s.x, m.norm, eps)
	matVec(s.logits, m.lmHead, s.h)
	return s.logits
}

// rope rotates one head's vector by the current position, pairing element i
// with i + d/2 (the rotate-half convention): x' = x·cos − y·sin,
// y' = y·cos + x·sin, with cos and sin of pos·invFreq[i] in float64 rounded to
// float32.
func (s *State) rope(v []float32) {
	half := len(v) / 2
	p := float64(s.pos)
	for i := 0; i < half; i++ {
		a := float64(p * s.m.run.invFreq[i])
		cs, sn := float32(math.Cos(a)), float32(math.Sin(a))
		x, y := v[i], v[i+half]
		v[i] = float32(x*cs) - float32(y*sn)
		v[i+half] = float32(y*cs) + float32(x*sn)
	}
}

// rmsNorm writes w·x/√(mean(x²)+eps) into dst (which may be x): the sum of
// squares by dot, the inverse root as 1/√ in float32.
func rmsNorm(dst, x, w []float32, eps float32) {
	ms := dot(x, x) / float32(len(x))
	inv := 1 / float32(math.Sqrt(float64(ms+eps)))
	for i := range x {
		dst[i] = float32(w[i] * float32(x[i]*inv))
	}
}

// matVec writes W·x into dst, W row-major with len(dst) rows of len(x).
func matVec(dst, w, x []float32) {
	n := len(x)
	for j := range dst {
		dst[j] = dot(w[j*n:(j+1)*n], x)
	}
}

// dot is Σ a[i]·b[i] in float32, in the fixed order the package documents:
// four partial sums over i ≡ 0, 1, 2, 3 (mod 4) up to the last multiple of
// four, added as (s0+s1)+(s2+s3), then the remaining terms in order.
func dot(a, b []float32) float32 {
	b = b[:len(a)]
	var s0, s1, s2, s3 float32
	i := 0
	for ; i+4 <= len(a); i += 4 {
		s0 += float32(a[i] * b[i])
		s1 += float32(a[i+1] * b[i+1])
		s2 += float32(a[i+2] * b[i+2])
		s3 += float32(a[i+3] * b[i+3])
	}
	s := (s0 + s1) + (s2 + s3)
	for ; i < len(a); i++ {
		s += float32(a[i] * b[i])
	}
	return s
}
