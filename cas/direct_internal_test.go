package cas

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/opencontainers/go-digest"
)

// TestStageBlobDirect: blobs of every shape around the alignment and the
// chunk, written in odd pieces or read from a reader, with direct I/O and
// without, are stored byte for byte under the digest of their bytes.
func TestStageBlobDirect(t *testing.T) {
	sizes := []int{0, 1, directAlign - 1, directAlign, directAlign + 1, directChunk, directChunk + 1, 2*directChunk + 12345}
	for _, off := range []bool{false, true} {
		for _, size := range sizes {
			for _, how := range []string{"write", "readfrom"} {
				t.Run(fmt.Sprintf("direct-off=%v/%d/%s", off, size, how), func(t *testing.T) {
					directOff = off
					defer func() { directOff = false }()
					l, err := Init(filepath.Join(t.TempDir(), "store"))
					if err != nil {
						t.Fatal(err)
					}
					defer l.Close()
					data := make([]byte, size)
					for i := range data {
						data[i] = byte(i*7 + i>>13)
					}
					st, err := l.StageBlobDirect("application/octet-stream", func(w io.Writer) error {
						if how == "readfrom" {
							_, err := io.Copy(w, bytes.NewReader(data))
							return err
						}
						for p := data; len(p) > 0; {
							k := min(len(p), 1000003)
							if _, err := w.Write(p[:k]); err != nil {
								return err
							}
							p = p[k:]
						}
						return nil
					})
					if err != nil {
						t.Fatal(err)
					}
					sum := sha256.Sum256(data)
					if want := digest.NewDigestFromBytes(digest.SHA256, sum[:]); st.Desc.Digest != want || st.Desc.Size != int64(size) {
						t.Fatalf("staged %s (%d bytes), want %s (%d)", st.Desc.Digest, st.Desc.Size, want, size)
					}
					if err := st.Publish(); err != nil {
						t.Fatal(err)
					}
					got, err := ReadAll(context.Background(), l, st.Desc, int64(size)+1)
					if err != nil || !bytes.Equal(got, data) {
						t.Fatalf("read back %d bytes, %v; want the %d written", len(got), err, size)
					}
				})
			}
		}
	}
}

// TestStageBlobDirectFailureLeavesNothing: a fill that fails leaves no
// temporary file.
func TestStageBlobDirectFailureLeavesNothing(t *testing.T) {
	l, err := Init(filepath.Join(t.TempDir(), "store"))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	boom := fmt.Errorf("source failed")
	_, err = l.StageBlobDirect("application/octet-stream", func(w io.Writer) error {
		w.Write(make([]byte, directChunk+5))
		return boom
	})
	if err != boom {
		t.Fatalf("StageBlobDirect = %v, want %v", err, boom)
	}
	ents, err := os.ReadDir(filepath.Join(l.root, blobsDir, "sha256"))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		t.Errorf("left behind: %s", e.Name())
	}
}
