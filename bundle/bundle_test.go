package bundle

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/feval/feval/cas"
	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

var update = flag.Bool("update", false, "rewrite golden files")

// TestMain lets the test binary act as a second process that packs a tree into a
// store of its own and prints the manifest digest.
func TestMain(m *testing.M) {
	if dir := os.Getenv("FEVAL_TEST_PACK_DIR"); dir != "" {
		d, err := packInto(os.Getenv("FEVAL_TEST_PACK_STORE"), dir)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		fmt.Print(d)
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func packInto(store, dir string) (digest.Digest, error) {
	l, err := cas.Init(store)
	if err != nil {
		return "", err
	}
	defer l.Close()
	layer, err := PackTree(l, dir, nil)
	if err != nil {
		return "", err
	}
	desc, err := Write(context.Background(), l, Artifact{Kind: "submission", Record: map[string]string{"note": "golden"}, Layers: []ocispec.Descriptor{layer}})
	return desc.Digest, err
}

// TestPackDeterministicAcrossProcessesAndStores packs the fixture tree in two
// separate processes into two different store directories, from two copies of
// the tree with different mtimes, and requires the same manifest digest, pinned
// by a golden file.
func TestPackDeterministicAcrossProcessesAndStores(t *testing.T) {
	src := filepath.Join("testdata", "tree")
	copyDir := filepath.Join(t.TempDir(), "elsewhere", "tree")
	if err := os.CopyFS(copyDir, os.DirFS(src)); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(filepath.Join(copyDir, "a.txt"), bytesTime, bytesTime); err != nil {
		t.Fatal(err)
	}
	var got []string
	for i, dir := range []string{src, copyDir} {
		cmd := exec.Command(os.Args[0])
		cmd.Env = append(os.Environ(), "FEVAL_TEST_PACK_DIR="+dir, "FEVAL_TEST_PACK_STORE="+filepath.Join(t.TempDir(), fmt.Sprint("store", i)))
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("process %d: %v", i, err)
		}
		got = append(got, string(out))
	}
	if got[0] != got[1] {
		t.Fatalf("two processes packed the same tree to %s and %s", got[0], got[1])
	}
	golden := filepath.Join("testdata", "tree.digest")
	if *update {
		if err := os.WriteFile(golden, []byte(got[0]+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run 'go test ./bundle -run Deterministic -update' to create it)", err)
	}
	if strings.TrimSpace(string(want)) != got[0] {
		t.Fatalf("packed fixture tree is %s, golden is %s: the artifact format changed", got[0], want)
	}
}

func TestTreeRoundTrip(t *testing.T) {
	var buf bytes.Buffer
	if err := WriteTar(&buf, filepath.Join("testdata", "tree"), nil); err != nil {
		t.Fatal(err)
	}
	files, err := ReadTree(bytes.NewReader(buf.Bytes()), DefaultLimits)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range files {
		names = append(names, fmt.Sprintf("%s:%o", f.Path, f.Mode))
	}
	want := "a.txt:644 dir/empty:644 dir/sub/n.txt:644 run.sh:755"
	if strings.Join(names, " ") != want {
		t.Fatalf("tree = %s, want %s", strings.Join(names, " "), want)
	}
	dest := filepath.Join(t.TempDir(), "out")
	if err := Unpack(bytes.NewReader(buf.Bytes()), dest, DefaultLimits); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dest, "dir", "sub", "n.txt"))
	if err != nil || string(b) != "nested ünïcode\n" {
		t.Fatalf("unpacked content %q, %v", b, err)
	}
}

func TestPackRefusesSymlinks(t *testing.T) {
	dir := t.TempDir()
	if err := os.Symlink("/etc/passwd", filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	if err := WriteTar(&bytes.Buffer{}, dir, nil); err == nil {
		t.Fatal("a symlink was packed")
	}
}
