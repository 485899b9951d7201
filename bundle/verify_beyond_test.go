package bundle

import (
	"context"
	"testing"

	"github.com/opencontainers/go-digest"
)

// TestVerifyRangedBeyond: the manifests named sound are not read again (a
// damaged payload under one goes unreported), everything else is, and the
// root is verified even when named sound.
func TestVerifyRangedBeyond(t *testing.T) {
	s := testSigner(t)
	ctx := context.Background()
	l, p := signedFixture(t, s)
	subject := p.Artifact.OCI()
	top, err := WriteSigned(ctx, l, s, Artifact{Kind: "verdict", Record: map[string]int{"a": 1}, Subject: &subject})
	if err != nil {
		t.Fatal(err)
	}
	art, err := Load(ctx, l, p.Artifact.OCI())
	if err != nil {
		t.Fatal(err)
	}
	payload := art.Payloads[0].Digest
	flipByte(t, l.BlobPath(payload))
	names := func(rep Report) bool {
		for _, pr := range rep.Problems {
			if pr.Object == payload {
				return true
			}
		}
		return false
	}
	if rep := VerifyRanged(ctx, l, top, nil); !names(rep) {
		t.Fatalf("VerifyRanged of the record above did not find the damaged payload: %v", rep.Problems)
	}
	sound := map[digest.Digest]bool{p.Artifact.Digest: true}
	if rep := VerifyRangedBeyond(ctx, l, top, nil, sound); names(rep) {
		t.Errorf("the payload of a manifest named sound was read again: %v", rep.Problems)
	}
	if rep := VerifyRangedBeyond(ctx, l, p.Artifact.OCI(), nil, sound); !names(rep) {
		t.Errorf("the root named sound was not verified: %v", rep.Problems)
	}
	if rep := VerifyRangedBeyond(ctx, l, top, nil, map[digest.Digest]bool{p.Artifact.Digest: false}); !names(rep) {
		t.Errorf("a manifest not found sound was skipped: %v", rep.Problems)
	}
}
