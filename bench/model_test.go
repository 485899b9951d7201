package bench

import (
	"encoding/binary"
	"encoding/json"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/feval/feval/internal/detrand"
)

// The model tree stands for a small language model in bfloat16 as it is
// published: safetensors shards of at most 512 MiB, their index, a config and a
// tokenizer. Every byte is derived from the file's path, so any machine writes
// the same tree. With -bench.model DIR the test binary writes it and exits;
// -bench.model.bytes sets the weight bytes (default 4 GiB, the size of a
// 2B-parameter model).
var (
	modelOut   = flag.String("bench.model", "", "write the generated model tree to this new directory and exit")
	modelBytes = flag.Int64("bench.model.bytes", 4<<30, "weight bytes of the generated model tree")
)

const modelShard = 512 << 20

// writeModelTree writes a model with weights bytes of tensors under dir.
func writeModelTree(dir string, weights int64) error {
	if err := os.Mkdir(dir, 0o755); err != nil {
		return err
	}
	shards := int((weights + modelShard - 1) / modelShard)
	index := map[string]any{"metadata": map[string]int64{"total_size": weights}}
	wm := map[string]string{}
	for i := range shards {
		name := fmt.Sprintf("model-%05d-of-%05d.safetensors", i+1, shards)
		size := min(int64(modelShard), weights-int64(i)*modelShard)
		tensors, err := writeShard(filepath.Join(dir, name), name, i, size)
		if err != nil {
			return err
		}
		for _, t := range tensors {
			wm[t] = name
		}
	}
	index["weight_map"] = wm
	files := map[string]any{
		"model.safetensors.index.json": index,
		"config.json": map[string]any{"architectures": []string{"BenchForCausalLM"}, "hidden_size": 2048,
			"num_hidden_layers": shards * 4, "torch_dtype": "bfloat16", "vocab_size": 32768},
		"generation_config.json": map[string]any{"do_sample": false, "max_new_tokens": 512},
		"tokenizer_config.json":  map[string]any{"model_max_length": 4096, "tokenizer_class": "BenchTokenizer"},
		"tokenizer.json":         tokenizer(),
	}
	for name, v := range files {
		b, err := json.MarshalIndent(v, "", "  ")
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// writeShard writes one safetensors file of size bytes: an 8-byte header
// length, the JSON header, then bfloat16 tensors whose high byte (sign and
// exponent) takes one of a few values and whose low byte is uniform, as in
// trained weights. It returns the tensor names.
func writeShard(path, name string, shard int, size int64) ([]string, error) {
	const tensor = 32 << 20
	var names []string
	header := map[string]any{"__metadata__": map[string]string{"format": "pt"}}
	n := int((size + tensor - 1) / tensor)
	var hdr []byte
	// The header is padded to a multiple of 8 bytes; the data offsets depend on
	// its length, so it is rebuilt until that length settles.
	for prev := -1; prev != len(hdr); {
		prev = len(hdr)
		var off int64
		names = names[:0]
		data := size - int64(len(hdr)) - 8
		for i := range n {
			t := fmt.Sprintf("model.layers.%d.part%d.weight", shard*4+i/max(1, n/4), i)
			end := min(off+tensor, data)
			header[t] = map[string]any{"dtype": "BF16", "shape": []int64{(end - off) / 2}, "data_offsets": []int64{off, end}}
			names = append(names, t)
			off = end
		}
		b, err := json.Marshal(header)
		if err != nil {
			return nil, err
		}
		hdr = append(b, []byte(strings.Repeat(" ", (8-len(b)%8)%8+8))...)
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	var l [8]byte
	binary.LittleEndian.PutUint64(l[:], uint64(len(hdr)))
	if _, err := f.Write(append(l[:], hdr...)); err != nil {
		f.Close()
		return nil, err
	}
	var seed [32]byte
	src := detrand.New("bench-model", []byte(name))
	for i := range 4 {
		binary.LittleEndian.PutUint64(seed[8*i:], src.Uint64())
	}
	rng := rand.NewChaCha8(seed)
	exps := [8]byte{0x3b, 0x3c, 0x3c, 0x3d, 0xbb, 0xbc, 0xbc, 0xbd}
	buf := make([]byte, 1<<20)
	left := size - 8 - int64(len(hdr))
	for left > 0 {
		k := min(int64(len(buf)), left)
		for j := 0; j+8 <= len(buf); j += 8 {
			v := rng.Uint64()
			for b := 0; b < 8; b += 2 {
				buf[j+b] = byte(v >> (8 * b))
				buf[j+b+1] = exps[(v>>(8*b+8))&7]
			}
		}
		if _, err := f.Write(buf[:k]); err != nil {
			f.Close()
			return nil, err
		}
		left -= k
	}
	return names, f.Close()
}

// tokenizer is a 32,768-word vocabulary of generated words (about 1 MiB).
func tokenizer() map[string]any {
	src := detrand.New("bench-model", []byte("tokenizer"))
	vocab := make(map[string]int, 32768)
	for i := 0; len(vocab) < 32768; i++ {
		var w []byte
		for range 3 + src.Intn(8) {
			w = append(w, byte('a'+src.Intn(26)))
		}
		if _, ok := vocab[string(w)]; !ok {
			vocab[string(w)] = len(vocab)
		}
	}
	return map[string]any{"model": map[string]any{"type": "BPE", "vocab": vocab}, "version": "1.0"}
}

// TestModelTreeIsDeterministic writes a small model tree twice.
func TestModelTreeIsDeterministic(t *testing.T) {
	a, b := filepath.Join(t.TempDir(), "a"), filepath.Join(t.TempDir(), "b")
	const weights = 3*modelShard/64 + 1000
	for _, d := range []string{a, b} {
		if err := writeModelTree(d, weights); err != nil {
			t.Fatal(err)
		}
	}
	da, db := treeDigests(t, a), treeDigests(t, b)
	if len(da) != 6 || fmt.Sprint(da) != fmt.Sprint(db) {
		t.Fatalf("two model trees differ or have %d files, want 6:\n%v\n%v", len(da), da, db)
	}
	fi, err := os.Stat(filepath.Join(a, "model-00001-of-00001.safetensors"))
	if err != nil || fi.Size() != weights {
		t.Fatalf("shard: %v, %v; want %d bytes", fi, err, weights)
	}
}
