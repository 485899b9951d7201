package cas

import (
	"encoding/json"

	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

// Descriptor is an OCI descriptor as feval's command output spells it: the
// descriptor's fields under feval's snake_case names (media_type,
// artifact_type, digest, size, annotations). Manifests and signed records keep
// the OCI spelling (mediaType, artifactType); this type is for what commands
// print with --json, where every name is snake_case.
type Descriptor ocispec.Descriptor

// OCI returns d as the OCI descriptor it is.
func (d Descriptor) OCI() ocispec.Descriptor { return ocispec.Descriptor(d) }

// Descriptors converts a list of OCI descriptors; nil stays nil.
func Descriptors(ds []ocispec.Descriptor) []Descriptor {
	if ds == nil {
		return nil
	}
	out := make([]Descriptor, len(ds))
	for i, d := range ds {
		out[i] = Descriptor(d)
	}
	return out
}

// descriptorJSON is Descriptor's JSON form. A descriptor feval prints never
// carries urls, data or platform.
type descriptorJSON struct {
	MediaType    string            `json:"media_type"`
	ArtifactType string            `json:"artifact_type,omitempty"`
	Digest       digest.Digest     `json:"digest"`
	Size         int64             `json:"size"`
	Annotations  map[string]string `json:"annotations,omitempty"`
}

// MarshalJSON writes d with snake_case names.
func (d Descriptor) MarshalJSON() ([]byte, error) {
	return json.Marshal(descriptorJSON{d.MediaType, d.ArtifactType, d.Digest, d.Size, d.Annotations})
}

// UnmarshalJSON reads what MarshalJSON writes.
func (d *Descriptor) UnmarshalJSON(b []byte) error {
	var j descriptorJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	*d = Descriptor{MediaType: j.MediaType, ArtifactType: j.ArtifactType, Digest: j.Digest, Size: j.Size, Annotations: j.Annotations}
	return nil
}
