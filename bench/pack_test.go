package bench

import (
	"bytes"
	"context"
	"crypto/sha256"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"

	"github.com/feval/feval/bundle"
	"github.com/feval/feval/cas"
	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

// benchSpec is the tree the Go benchmarks pack: the full tree's mix at 1/16 of its
// size (16 MiB, the same 554 files), small enough to stay in the page cache.
var benchSpec = fullTree.scaled(16)

// shared holds the tree and its packed layer, built once per test process.
var shared struct {
	once  sync.Once
	dir   string
	tree  string
	layer []byte // the tar+zstd layer feval makes of tree
	err   error
}

func sharedTree(b *testing.B) (tree string, layer []byte) {
	b.Helper()
	shared.once.Do(func() {
		shared.dir, shared.err = os.MkdirTemp("", "feval-bench-")
		if shared.err != nil {
			return
		}
		shared.tree = filepath.Join(shared.dir, "tree")
		if shared.err = writeTree(shared.tree, benchSpec); shared.err != nil {
			return
		}
		var buf bytes.Buffer
		zw, err := bundle.NewZstdWriter(&buf)
		if err != nil {
			shared.err = err
			return
		}
		if shared.err = bundle.WriteTar(zw, shared.tree, nil); shared.err != nil {
			return
		}
		shared.err = zw.Close()
		shared.layer = buf.Bytes()
	})
	if shared.err != nil {
		b.Fatal(shared.err)
	}
	return shared.tree, shared.layer
}

func cleanupShared() {
	if shared.dir != "" {
		os.RemoveAll(shared.dir)
	}
}

// The pack benchmarks add one stage at a time to what `feval pack` does with a
// tree, so the differences between them price each stage.

func BenchmarkPackReadFiles(b *testing.B) {
	tree, _ := sharedTree(b)
	buf := make([]byte, 1<<20)
	b.SetBytes(benchSpec.total())
	for b.Loop() {
		err := filepath.WalkDir(tree, func(p string, d fs.DirEntry, err error) error {
			if err != nil || !d.Type().IsRegular() {
				return err
			}
			f, err := os.Open(p)
			if err != nil {
				return err
			}
			defer f.Close()
			_, err = io.CopyBuffer(io.Discard, f, buf)
			return err
		})
		if err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkPackTar(b *testing.B) {
	tree, _ := sharedTree(b)
	b.SetBytes(benchSpec.total())
	for b.Loop() {
		if err := bundle.WriteTar(io.Discard, tree, nil); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkPackTarSHA256(b *testing.B) {
	tree, _ := sharedTree(b)
	b.SetBytes(benchSpec.total())
	for b.Loop() {
		if err := bundle.WriteTar(sha256.New(), tree, nil); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkPackTarZstd(b *testing.B) {
	tree, _ := sharedTree(b)
	b.SetBytes(benchSpec.total())
	for b.Loop() {
		zw, err := bundle.NewZstdWriter(io.Discard)
		if err != nil {
			b.Fatal(err)
		}
		if err := bundle.WriteTar(zw, tree, nil); err != nil {
			b.Fatal(err)
		}
		if err := zw.Close(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkPackTree is the whole layer write of `feval pack`: tar, zstd, both
// digests, the temporary file, fsync and rename.
func BenchmarkPackTree(b *testing.B) {
	tree, _ := sharedTree(b)
	l, err := cas.Init(filepath.Join(b.TempDir(), "store"))
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(benchSpec.total())
	for b.Loop() {
		if _, err := bundle.PackTree(l, tree, nil); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkPackPath is `feval pack` of the tree once the key is decrypted:
// frames compressed in parallel, both digests, the layer staged with direct
// writes, the artifact signed and published.
func BenchmarkPackPath(b *testing.B) {
	tree, _ := sharedTree(b)
	priv, _, err := bundle.GenerateKey([]byte("bench"))
	if err != nil {
		b.Fatal(err)
	}
	s, err := bundle.LoadSigner(priv, []byte("bench"))
	if err != nil {
		b.Fatal(err)
	}
	root := b.TempDir()
	b.SetBytes(benchSpec.total())
	i := 0
	for b.Loop() {
		i++
		l, err := cas.Init(filepath.Join(root, strconv.Itoa(i)))
		if err != nil {
			b.Fatal(err)
		}
		if _, err := bundle.PackPath(context.Background(), l, s, tree, bundle.PackOptions{Kind: "submission"}); err != nil {
			b.Fatal(err)
		}
		l.Close()
	}
}

// BenchmarkUnzstd prices decompression of the layer (what a consumer of a pulled
// tree pays), against the uncompressed size.
func BenchmarkUnzstd(b *testing.B) {
	_, layer := sharedTree(b)
	b.SetBytes(benchSpec.total())
	for b.Loop() {
		zr, err := bundle.NewZstdReader(bytes.NewReader(layer))
		if err != nil {
			b.Fatal(err)
		}
		if _, err := io.Copy(io.Discard, zr); err != nil {
			b.Fatal(err)
		}
		zr.Close()
	}
}

// BenchmarkLayoutIngest is the store side of `feval pull` for the layer: verified
// write to a temporary file, fsync, rename, fsync of the directory. Each iteration
// uses a fresh store, as a pull into an empty store does.
func BenchmarkLayoutIngest(b *testing.B) {
	_, layer := sharedTree(b)
	desc := ocispec.Descriptor{MediaType: bundle.MediaTypeTree, Digest: digest.FromBytes(layer), Size: int64(len(layer))}
	root := b.TempDir()
	b.SetBytes(int64(len(layer)))
	i := 0
	for b.Loop() {
		i++
		l, err := cas.Init(filepath.Join(root, strconv.Itoa(i)))
		if err != nil {
			b.Fatal(err)
		}
		if err := l.Push(context.Background(), desc, bytes.NewReader(layer)); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkZstdClass compresses each content class of the tree on its own with
// feval's encoder settings, to show which content the encoder spends its time on.
func BenchmarkZstdClass(b *testing.B) {
	tree, _ := sharedTree(b)
	for _, c := range classes {
		var data []byte
		err := filepath.WalkDir(filepath.Join(tree, c.dir), func(p string, d fs.DirEntry, err error) error {
			if err != nil || !d.Type().IsRegular() {
				return err
			}
			f, err := os.ReadFile(p)
			data = append(data, f...)
			return err
		})
		if err != nil {
			b.Fatal(err)
		}
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(int64(len(data)))
			for b.Loop() {
				zw, err := bundle.NewZstdWriter(io.Discard)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := zw.Write(data); err != nil {
					b.Fatal(err)
				}
				if err := zw.Close(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
