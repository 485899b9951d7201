package cas_test

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/feval/feval/cas"
	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

// TestDescriptorJSON: a descriptor prints in snake_case, never in the OCI
// spelling, and reads back to the same descriptor (decoding it as the OCI
// struct's tags would leave every renamed field empty).
func TestDescriptorJSON(t *testing.T) {
	d := cas.Descriptor(ocispec.Descriptor{MediaType: ocispec.MediaTypeImageManifest, ArtifactType: "application/vnd.feval.round.v1+json",
		Digest: digest.FromString("x"), Size: 12, Annotations: map[string]string{"k": "v"}})
	b, err := json.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"media_type":"application/vnd.oci.image.manifest.v1+json","artifact_type":"application/vnd.feval.round.v1+json","digest":"` +
		digest.FromString("x").String() + `","size":12,"annotations":{"k":"v"}}`
	if string(b) != want || strings.Contains(string(b), "mediaType") {
		t.Fatalf("%s\nwant %s", b, want)
	}
	var back cas.Descriptor
	if err := json.Unmarshal(b, &back); err != nil || !reflect.DeepEqual(back, d) {
		t.Fatalf("read back %+v, %v; want %+v", back, err, d)
	}
}
