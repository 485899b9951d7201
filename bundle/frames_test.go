package bundle

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/feval/feval/cas"
	"github.com/feval/feval/internal/detrand"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

// framedTree writes a tree whose tar stream spans three frames (two full, one
// partial): compressible text and incompressible bytes, both from detrand, so
// the tree is the same on every machine.
func framedTree(t testing.TB) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "tree")
	if err := os.MkdirAll(filepath.Join(dir, "data"), 0o755); err != nil {
		t.Fatal(err)
	}
	src := detrand.New("bundle-frames-test", nil)
	words := []string{"alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta", "iota", "kappa", "lambda", "mu"}
	var text bytes.Buffer
	for text.Len() < 5<<20 {
		text.WriteString(detrand.Pick(src, words))
		if src.Intn(12) == 0 {
			text.WriteByte('\n')
		} else {
			text.WriteByte(' ')
		}
	}
	random := make([]byte, 3<<20+12345)
	for i := 0; i+8 <= len(random); i += 8 {
		v := src.Uint64()
		for k := range 8 {
			random[i+k] = byte(v >> (8 * k))
		}
	}
	for name, b := range map[string][]byte{"data/text.txt": text.Bytes(), "data/random.bin": random, "readme": []byte("framed\n")} {
		if err := os.WriteFile(filepath.Join(dir, filepath.FromSlash(name)), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// layerBytes packs dir with the given number of encoders and returns the layer.
func layerBytes(t *testing.T, dir string, workers int) []byte {
	t.Helper()
	l, err := cas.Init(filepath.Join(t.TempDir(), "store"))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	desc, err := packTree(l, dir, nil, workers)
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(l.BlobPath(desc.Digest))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestTreeFramesFollowTheDocumentedRule re-derives the layer from
// docs/FORMAT.md's rule (cut the tar stream into TreeFrameSize pieces, one
// fresh streaming frame each, concatenated) and requires the bytes PackTree
// stores, with one encoder and with several.
func TestTreeFramesFollowTheDocumentedRule(t *testing.T) {
	dir := framedTree(t)
	var tarStream bytes.Buffer
	if err := WriteTar(&tarStream, dir, nil); err != nil {
		t.Fatal(err)
	}
	if n := tarStream.Len(); n <= 2*TreeFrameSize || n >= 3*TreeFrameSize {
		t.Fatalf("fixture tar stream is %d bytes, want three frames", n)
	}
	var want bytes.Buffer
	for s := tarStream.Bytes(); len(s) > 0; {
		piece := s[:min(len(s), TreeFrameSize)]
		s = s[len(piece):]
		zw, err := NewZstdWriter(&want)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := zw.Write(piece); err != nil {
			t.Fatal(err)
		}
		if err := zw.Close(); err != nil {
			t.Fatal(err)
		}
	}
	for _, workers := range []int{1, 3} {
		if got := layerBytes(t, dir, workers); !bytes.Equal(got, want.Bytes()) {
			t.Fatalf("%d encoders: layer of %d bytes differs from the documented frames (%d bytes)", workers, len(got), want.Len())
		}
	}
	// The frames are one standard zstd stream of the tar stream.
	zr, err := NewZstdReader(bytes.NewReader(want.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	defer zr.Close()
	back, err := io.ReadAll(zr)
	if err != nil || !bytes.Equal(back, tarStream.Bytes()) {
		t.Fatalf("decoding the frames: %d bytes, %v; want the %d-byte tar stream", len(back), err, tarStream.Len())
	}
}

// TestTreeOfOneFrameIsUnchanged: a stream shorter than a frame is what one
// streaming encoder wrote before frames (encoding 1), so small trees keep
// their digests.
func TestTreeOfOneFrameIsUnchanged(t *testing.T) {
	dir := filepath.Join("testdata", "tree")
	var want bytes.Buffer
	zw, err := NewZstdWriter(&want)
	if err != nil {
		t.Fatal(err)
	}
	if err := WriteTar(zw, dir, nil); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	if got := layerBytes(t, dir, 2); !bytes.Equal(got, want.Bytes()) {
		t.Fatal("a one-frame tree is not the single streaming frame of encoding 1")
	}
}

// TestFramedPackDeterministicAcrossProcesses packs the three-frame tree in two
// processes with different GOMAXPROCS (one encoder, four encoders) and pins
// the manifest digest by a golden file.
func TestFramedPackDeterministicAcrossProcesses(t *testing.T) {
	dir := framedTree(t)
	var got []string
	for i, procs := range []string{"1", "4"} {
		cmd := exec.Command(os.Args[0])
		cmd.Env = append(os.Environ(), "GOMAXPROCS="+procs, "FEVAL_TEST_PACK_DIR="+dir, "FEVAL_TEST_PACK_STORE="+filepath.Join(t.TempDir(), fmt.Sprint("store", i)))
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("process %d: %v", i, err)
		}
		got = append(got, string(out))
	}
	if got[0] != got[1] {
		t.Fatalf("GOMAXPROCS 1 and 4 packed the same tree to %s and %s", got[0], got[1])
	}
	golden := filepath.Join("testdata", "tree-frames.digest")
	if *update {
		if err := os.WriteFile(golden, []byte(got[0]+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run 'go test ./bundle -run Framed -update' to create it)", err)
	}
	if strings.TrimSpace(string(want)) != got[0] {
		t.Fatalf("packed framed tree is %s, golden is %s: the tree layer encoding changed", got[0], want)
	}
}

// failingBlobWriter gives fill a writer that fails after limit bytes.
type failingBlobWriter struct{ limit int }

var errDiskFull = errors.New("disk full")

func (f failingBlobWriter) WriteBlob(mediaType string, fill func(io.Writer) error) (ocispec.Descriptor, error) {
	return ocispec.Descriptor{}, fill(&limitedWriter{n: f.limit})
}

type limitedWriter struct{ n int }

func (w *limitedWriter) Write(p []byte) (int, error) {
	if len(p) > w.n {
		return 0, errDiskFull
	}
	w.n -= len(p)
	return len(p), nil
}

// TestFramedPackStopsOnFailure: a failing output or a tree that cannot be
// read ends the pack with that error and leaves no goroutine behind.
func TestFramedPackStopsOnFailure(t *testing.T) {
	dir := framedTree(t)
	before := runtime.NumGoroutine()
	for _, limit := range []int{0, 100} {
		if _, err := packTree(failingBlobWriter{limit: limit}, dir, nil, 3); !errors.Is(err, errDiskFull) {
			t.Fatalf("pack into a writer failing after %d bytes = %v, want %v", limit, err, errDiskFull)
		}
	}
	if err := os.Symlink("/etc/passwd", filepath.Join(dir, "data", "z-link")); err != nil {
		t.Fatal(err)
	}
	if _, err := packTree(failingBlobWriter{limit: 1 << 30}, dir, nil, 3); !errors.Is(err, ErrUnsafeEntry) {
		t.Fatalf("pack of a tree with a link = %v, want ErrUnsafeEntry", err)
	}
	// A producer that fails after two full frames: its error, not a
	// truncated layer.
	fw, err := newFrameWriter(1<<10, 2)
	if err != nil {
		t.Fatal(err)
	}
	errTorn := errors.New("file changed while being packed")
	go func() {
		_, err := fw.Write(make([]byte, 2<<10+5))
		fw.closeWrite(errors.Join(err, errTorn))
	}()
	var out bytes.Buffer
	if err := fw.drainTo(&out); !errors.Is(err, errTorn) {
		t.Fatalf("drainTo after a failing producer = %v, want %v", err, errTorn)
	}
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > before {
		t.Fatalf("%d goroutines after failed packs, %d before", n, before)
	}
}
