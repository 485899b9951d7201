// Package model reads the model a rollouts miner commits: a Hugging Face
// style directory of config.json, tokenizer.json and one model.safetensors
// file, stored as a ModelPack artifact (bundle.PackModel), in the Qwen3
// architecture. LoadArtifact checks everything before anything uses it:
//
//   - the artifact's manifest (bundle.LoadModel): ModelPack types, clean
//     paths, sizes within bundle.ModelLimits;
//   - the formats: a file that runs code when loaded (pickle, torch.save) or
//     weights in another format are refused before any byte is read;
//   - config.json (ParseConfig): model_type qwen3 with every dimension the
//     forward pass needs, inside Limits;
//   - tokenizer.json (ParseTokenizer): a byte-level BPE tokenizer of the GPT-2
//     or Qwen2 form whose ids fit the configuration;
//   - the weights (safetensors.ParseHeader, in Go): a header within its
//     limits whose tensors tile the data exactly, holding exactly the tensors
//     of the configuration (TensorNames) in F32, BF16 or F16, all finite.
//
// docs/FORMAT.md, "Rollouts models", states the same for other
// implementations.
//
// # The forward pass
//
// State.Step runs one token of a sequence through the Qwen3 architecture in
// float32 on the CPU, with a key/value cache: RMSNorm, rotary embeddings
// (rotate-half), grouped-query attention with q and k normed per head over
// head_dim after the projection and before the rotation (v is not normed),
// SwiGLU, tied or untied output embeddings. testdata/qwen3_torch.py is the
// same pass in plain torch; TestTorchCrossCheck holds the two within
// TorchTolerance on generated models.
//
// The pass is deterministic to the bit across runs, processes and platforms:
// one goroutine per sequence, every sum in a fixed order (dot products in four
// interleaved float32 partial sums added as (s0+s1)+(s2+s3), then the tail in
// order; every other sum sequentially), every product that feeds a sum
// converted to its type explicitly so that no compiler may fuse it into a
// multiply-add (the Go specification's rule), and exp and log computed here
// from additions, multiplications and divisions alone rather than by math.Exp
// and math.Log, which have per-architecture assembly. math.Sqrt is correctly
// rounded everywhere; math.Sin and math.Cos are the portable Go
// implementations on amd64 and arm64.
//
// # Seeded sampling and the check
//
// Every completion position has its own randomness, derived from the round,
// the task id, the miner and the position (PositionKey): Gumbel noise per
// token (Noise) added to the logits over the temperature (Scores), and the
// token of the highest score chosen (Choice). Generate samples a completion
// so; Check verifies one with one teacher-forced pass of the model over the
// prompt and the completion, accepting a differing token only as a near tie
// (its score within ε of the choice's) up to a per-row budget, and the
// termination rule. docs/PROTOCOL.md, "Seeded sampling", specifies the bytes.
package model
