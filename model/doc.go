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
package model
