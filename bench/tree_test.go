// Package bench measures feval's store. It holds the generator of the benchmark
// tree that every storage benchmark packs, and Go benchmarks that split the cost of
// packing a tree into its parts (reading, tar, hashing, compression, the store
// write). scripts/bench.sh compares the feval CLI with sha256sum, tar | zstd and
// oras on the full tree; docs/PERFORMANCE.md reports the figures.
//
// The tree is a pure function of its spec: every byte comes from detrand streams
// keyed by the file's path, so two runs on any machine produce identical trees.
// Running the test binary with -bench.tree DIR writes the full 256 MiB tree to DIR
// and exits without running tests.
package bench

import (
	"bufio"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"testing"

	"github.com/feval/feval/bundle"
	"github.com/feval/feval/internal/detrand"
)

// treeSpec describes a benchmark tree as counts and sizes of four content classes.
type treeSpec struct {
	Weights, WeightSize int // incompressible: model shards of uniform random bytes
	Tensors, TensorSize int // half-compressible: bfloat16 values widened to float32
	Texts, TextSize     int // compressible: JSON lines of words from a 4096-word vocabulary
	SrcPairs, PairSize  int // small source-like files, in pairs whose sizes sum to PairSize
	SrcDirs             int // directories the small files are spread over
}

// fullTree is the 256 MiB tree of scripts/bench.sh: 6 x 16 MiB weights, 4 x 16 MiB
// tensors, 32 x 2 MiB text, 512 small files (4 KiB to 124 KiB) in 32 directories.
var fullTree = treeSpec{
	Weights: 6, WeightSize: 16 << 20,
	Tensors: 4, TensorSize: 16 << 20,
	Texts: 32, TextSize: 2 << 20,
	SrcPairs: 256, PairSize: 128 << 10,
	SrcDirs: 32,
}

// scaled returns s with every size divided by div and the file counts kept, so the
// mix of classes and the number of files stay those of s.
func (s treeSpec) scaled(div int) treeSpec {
	s.WeightSize /= div
	s.TensorSize /= div
	s.TextSize /= div
	s.PairSize /= div
	return s
}

// total returns the number of file bytes in the tree.
func (s treeSpec) total() int64 {
	return int64(s.Weights)*int64(s.WeightSize) + int64(s.Tensors)*int64(s.TensorSize) +
		int64(s.Texts)*int64(s.TextSize) + int64(s.SrcPairs)*int64(s.PairSize)
}

// files returns the number of regular files in the tree.
func (s treeSpec) files() int { return s.Weights + s.Tensors + s.Texts + 2*s.SrcPairs }

// class names one content class and the files of a tree that belong to it.
type class struct {
	name string
	dir  string
}

var classes = []class{{"weights", "weights"}, {"tensors", "tensors"}, {"text", "data"}, {"source", "src"}}

// writeTree writes the tree described by s under dir, which must not exist yet.
func writeTree(dir string, s treeSpec) error {
	if _, err := os.Stat(dir); err == nil {
		return fmt.Errorf("writing tree: %s already exists", dir)
	}
	for i := range s.Weights {
		name := fmt.Sprintf("weights/shard-%02d.bin", i)
		if err := writeFile(dir, name, s.WeightSize, fillRandom); err != nil {
			return err
		}
	}
	for i := range s.Tensors {
		name := fmt.Sprintf("tensors/layer-%02d.f32", i)
		if err := writeFile(dir, name, s.TensorSize, fillTensor); err != nil {
			return err
		}
	}
	vocab := vocabulary(detrand.New("feval/bench/vocab", nil), 4096)
	for i := range s.Texts {
		name := fmt.Sprintf("data/part-%02d.jsonl", i)
		if err := writeFile(dir, name, s.TextSize, fillText(vocab)); err != nil {
			return err
		}
	}
	keywords := []string{"func", "return", "if", "err", "nil", "for", "range", ":=", "{", "}", "(", ")", "int", "string", "var", "type", "struct", "package", "import", "fmt.Errorf", "ctx", "desc", "digest", "//"}
	sizes := detrand.New("feval/bench/sizes", nil)
	for i := range s.SrcPairs {
		a := sizes.Range(s.PairSize/32, s.PairSize-s.PairSize/32)
		for j, size := range []int{a, s.PairSize - a} {
			n := 2*i + j
			name := fmt.Sprintf("src/pkg-%02d/file-%03d.go", n%s.SrcDirs, n)
			if err := writeFile(dir, name, size, fillSource(keywords)); err != nil {
				return err
			}
		}
	}
	return nil
}

// writeFile creates dir/name of exactly size bytes from fill, which draws on a
// stream keyed by name.
func writeFile(dir, name string, size int, fill func(*detrand.Source, *bufio.Writer, int) error) error {
	p := filepath.Join(dir, filepath.FromSlash(name))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	cw := &countingWriter{w: f}
	bw := bufio.NewWriterSize(cw, 1<<20)
	err = fill(detrand.New("feval/bench/file", []byte(name)), bw, size)
	if err == nil {
		err = bw.Flush()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil && cw.n != int64(size) {
		err = fmt.Errorf("generator wrote %d bytes, want %d", cw.n, size)
	}
	if err != nil {
		return fmt.Errorf("writing %s: %w", name, err)
	}
	return nil
}

type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// fillRandom writes uniform random bytes.
func fillRandom(r *detrand.Source, w *bufio.Writer, size int) error {
	var b [8]byte
	for size > 0 {
		binary.LittleEndian.PutUint64(b[:], r.Uint64())
		n := min(size, 8)
		if _, err := w.Write(b[:n]); err != nil {
			return err
		}
		size -= n
	}
	return nil
}

// fillTensor writes little-endian float32 values that are widened bfloat16: the
// low two bytes are zero, the exponent byte takes one of four values, the top
// mantissa byte is random. That is about 10 bits of entropy per 32.
func fillTensor(r *detrand.Source, w *bufio.Writer, size int) error {
	exps := [4]byte{0x3c, 0x3d, 0xbc, 0xbd}
	var b [8]byte
	for size > 0 {
		v := r.Uint64()
		for half := range 2 {
			x := v >> (32 * half)
			b[4*half], b[4*half+1], b[4*half+2], b[4*half+3] = 0, 0, byte(x), exps[(x>>8)&3]
		}
		n := min(size, 8)
		if _, err := w.Write(b[:n]); err != nil {
			return err
		}
		size -= n
	}
	return nil
}

// vocabulary returns n distinct lower-case pseudo-words of 2 to 9 letters.
func vocabulary(r *detrand.Source, n int) []string {
	seen := map[string]bool{}
	words := make([]string, 0, n)
	for len(words) < n {
		b := make([]byte, r.Range(2, 9))
		for i := range b {
			b[i] = byte('a' + r.Intn(26))
		}
		if w := string(b); !seen[w] {
			seen[w] = true
			words = append(words, w)
		}
	}
	return words
}

// fillText writes JSON lines {"id":N,"text":"..."} of 8 to 40 words, cut at size.
func fillText(vocab []string) func(*detrand.Source, *bufio.Writer, int) error {
	return func(r *detrand.Source, w *bufio.Writer, size int) error {
		var line []byte
		for id := 0; size > 0; id++ {
			line = fmt.Appendf(line[:0], `{"id":%d,"text":"`, id)
			for i, n := 0, r.Range(8, 40); i < n; i++ {
				if i > 0 {
					line = append(line, ' ')
				}
				line = append(line, detrand.Pick(r, vocab)...)
			}
			line = append(line, "\"}\n"...)
			n := min(size, len(line))
			if _, err := w.Write(line[:n]); err != nil {
				return err
			}
			size -= n
		}
		return nil
	}
}

// fillSource writes indented lines of keywords and short identifiers, cut at size.
func fillSource(keywords []string) func(*detrand.Source, *bufio.Writer, int) error {
	return func(r *detrand.Source, w *bufio.Writer, size int) error {
		var line []byte
		for size > 0 {
			line = line[:0]
			for range r.Intn(4) {
				line = append(line, '\t')
			}
			for i, n := 0, r.Range(1, 8); i < n; i++ {
				if i > 0 {
					line = append(line, ' ')
				}
				if r.Intn(3) == 0 {
					line = fmt.Appendf(line, "v%d", r.Intn(64))
				} else {
					line = append(line, detrand.Pick(r, keywords)...)
				}
			}
			line = append(line, '\n')
			n := min(size, len(line))
			if _, err := w.Write(line[:n]); err != nil {
				return err
			}
			size -= n
		}
		return nil
	}
}

var treeOut = flag.String("bench.tree", "", "write the full benchmark tree to this new directory and exit")

func TestMain(m *testing.M) {
	flag.Parse()
	if *modelOut != "" {
		if err := writeModelTree(*modelOut, *modelBytes); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		fmt.Fprintf(os.Stderr, "wrote a model tree with %d bytes of weights to %s\n", *modelBytes, *modelOut)
		os.Exit(0)
	}
	if *treeOut != "" {
		if err := writeTree(*treeOut, fullTree); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		fmt.Fprintf(os.Stderr, "wrote %d files, %d bytes to %s\n", fullTree.files(), fullTree.total(), *treeOut)
		os.Exit(0)
	}
	code := m.Run()
	cleanupShared()
	os.Exit(code)
}

// treeDigests returns the SHA-256 of every regular file under dir by slash path.
func treeDigests(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		sum := sha256.Sum256(b)
		out[filepath.ToSlash(rel)] = hex.EncodeToString(sum[:])
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestTreeIsDeterministic(t *testing.T) {
	spec := fullTree.scaled(64)
	a, b := filepath.Join(t.TempDir(), "a"), filepath.Join(t.TempDir(), "b")
	for _, d := range []string{a, b} {
		if err := writeTree(d, spec); err != nil {
			t.Fatal(err)
		}
	}
	da, db := treeDigests(t, a), treeDigests(t, b)
	if len(da) != spec.files() {
		t.Fatalf("tree has %d files, spec says %d", len(da), spec.files())
	}
	for name, sum := range da {
		if db[name] != sum {
			t.Errorf("%s differs between two generations: %s vs %s", name, sum, db[name])
		}
	}
	if err := writeTree(a, spec); err == nil {
		t.Error("writing over an existing tree succeeded")
	}
}

func TestTreeSizes(t *testing.T) {
	for _, tc := range []struct {
		name string
		spec treeSpec
		want int64
	}{
		{"full", fullTree, 256 << 20},
		{"scaled by 16", fullTree.scaled(16), 16 << 20},
		{"scaled by 64", fullTree.scaled(64), 4 << 20},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.spec.total(); got != tc.want {
				t.Fatalf("total() = %d, want %d", got, tc.want)
			}
			if tc.spec == fullTree {
				return // generating 256 MiB belongs to scripts/bench.sh
			}
			dir := filepath.Join(t.TempDir(), "tree")
			if err := writeTree(dir, tc.spec); err != nil {
				t.Fatal(err)
			}
			var sum int64
			err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
				if err == nil && d.Type().IsRegular() {
					fi, err := d.Info()
					if err != nil {
						return err
					}
					sum += fi.Size()
				}
				return err
			})
			if err != nil {
				t.Fatal(err)
			}
			if sum != tc.want {
				t.Errorf("generated %d bytes, want %d", sum, tc.want)
			}
		})
	}
}

// TestTreeClasses checks that each content class compresses as its doc says, with
// feval's own zstd settings: the benchmark's claims about the mix rest on this.
func TestTreeClasses(t *testing.T) {
	spec := fullTree.scaled(16)
	dir := filepath.Join(t.TempDir(), "tree")
	if err := writeTree(dir, spec); err != nil {
		t.Fatal(err)
	}
	bounds := map[string][2]float64{ // compressed / original
		"weights": {0.99, 1.01},
		"tensors": {0.25, 0.60},
		"text":    {0.20, 0.55},
		"source":  {0.05, 0.50},
	}
	for _, c := range classes {
		t.Run(c.name, func(t *testing.T) {
			var in, out int64
			var names []string
			err := filepath.WalkDir(filepath.Join(dir, c.dir), func(p string, d fs.DirEntry, err error) error {
				if err == nil && d.Type().IsRegular() {
					names = append(names, p)
				}
				return err
			})
			if err != nil {
				t.Fatal(err)
			}
			sort.Strings(names)
			for _, p := range names {
				b, err := os.ReadFile(p)
				if err != nil {
					t.Fatal(err)
				}
				cw := &countingWriter{w: io.Discard}
				zw, err := bundle.NewZstdWriter(cw)
				if err != nil {
					t.Fatal(err)
				}
				if _, err := zw.Write(b); err != nil {
					t.Fatal(err)
				}
				if err := zw.Close(); err != nil {
					t.Fatal(err)
				}
				in, out = in+int64(len(b)), out+cw.n
			}
			if in == 0 {
				t.Fatal(errors.New("class has no files"))
			}
			ratio := float64(out) / float64(in)
			t.Logf("%s: %d -> %d bytes (%.3f)", c.name, in, out, ratio)
			if b := bounds[c.name]; ratio < b[0] || ratio > b[1] {
				t.Errorf("%s compresses to %.3f of its size, want %.2f..%.2f", c.name, ratio, b[0], b[1])
			}
		})
	}
}
