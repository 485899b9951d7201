package cas_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"path/filepath"
	"testing"

	"github.com/feval/feval/cas"
	"github.com/feval/feval/internal/testenv"
	specs "github.com/opencontainers/image-spec/specs-go"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

// TestPullFindsReferrerOnlyInFallbackIndex: a referrer of a referrer that
// another tool listed only in the OCI fallback index (no referrer tag) is
// still pulled. The listing of the signature's referrers, made ahead of the
// walk, reads the fallback index only because the tag listing names it.
func TestPullFindsReferrerOnlyInFallbackIndex(t *testing.T) {
	reg := testenv.StartRegistry(t)
	ctx := context.Background()
	src, root := signedGraph(t)
	r := openRemote(t, reg.Addr, "lazy/a")
	if _, err := cas.Copy(ctx, src, r, root, cas.CopyOptions{Referrers: true}); err != nil {
		t.Fatal(err)
	}
	sigs, err := src.Referrers(ctx, root, "application/vnd.test.sig")
	if err != nil || len(sigs) != 1 {
		t.Fatalf("signature of the root: %v %v", sigs, err)
	}
	sig := sigs[0]
	// Another tool's record about the signature: its manifest by digest,
	// listed only in the signature's fallback index.
	scratch, err := cas.Init(filepath.Join(t.TempDir(), "scratch"))
	if err != nil {
		t.Fatal(err)
	}
	other := artifact(t, scratch, "application/vnd.test.other", "other", &sig)
	raw, err := readAll(t, scratch, other)
	if err != nil {
		t.Fatal(err)
	}
	var m ocispec.Manifest
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	for _, b := range append([]ocispec.Descriptor{m.Config}, m.Layers...) {
		rc, err := scratch.Fetch(ctx, b)
		if err != nil {
			t.Fatal(err)
		}
		err = r.Push(ctx, b, rc)
		rc.Close()
		if err != nil {
			t.Fatal(err)
		}
	}
	put := func(ref, mediaType string, b []byte) {
		t.Helper()
		req, err := http.NewRequest(http.MethodPut, "http://"+reg.Addr+"/v2/lazy/a/manifests/"+ref, bytes.NewReader(b))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", mediaType)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusCreated {
			t.Fatalf("PUT %s: %d %s", ref, resp.StatusCode, body)
		}
	}
	put(other.Digest.String(), ocispec.MediaTypeImageManifest, raw)
	idx, _ := json.Marshal(ocispec.Index{Versioned: specs.Versioned{SchemaVersion: 2}, MediaType: ocispec.MediaTypeImageIndex,
		Manifests: []ocispec.Descriptor{{MediaType: ocispec.MediaTypeImageManifest, Digest: other.Digest, Size: other.Size, ArtifactType: other.ArtifactType}}})
	put("sha256-"+sig.Digest.Encoded(), ocispec.MediaTypeImageIndex, idx)

	dst, err := cas.Init(filepath.Join(t.TempDir(), "dst"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cas.Copy(ctx, openRemote(t, reg.Addr, "lazy/a"), dst, root, cas.CopyOptions{Referrers: true}); err != nil {
		t.Fatal(err)
	}
	got, err := dst.Referrers(ctx, sig, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].Digest != other.Digest {
		t.Fatalf("referrers of the signature after the pull = %v, want %s", got, other.Digest)
	}
}
