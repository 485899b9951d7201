package main

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/hex"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/feval/feval/bundle"
	"github.com/feval/feval/cas"
	"github.com/feval/feval/protocol"
	"github.com/rogpeppe/go-internal/testscript"
)

// Adversaries for the commit/reveal scripts. They use the library to write what
// a dishonest miner would push; the checks under test are the production ones.

// cmdForgeReveal writes and pushes a dishonest reveal of a commitment held in
// $FEVAL_STORE: forge-reveal salt|content|key COMMITMENT REPO [DIR].
//   - salt: the right submission with another salt
//   - content: another submission (packed from DIR) with the right salt
//   - key: the right opening, signed by a different key
func cmdForgeReveal(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) < 3 {
		ts.Fatalf("usage: forge-reveal salt|content|key COMMITMENT REPO [DIR]")
	}
	ctx := context.Background()
	l, err := cas.OpenLayout(ts.Getenv("FEVAL_STORE"))
	ts.Check(err)
	defer l.Close()
	sec, err := protocol.LoadSecret(l, args[1])
	ts.Check(err)
	pem, err := os.ReadFile(ts.Getenv("FEVAL_KEY"))
	ts.Check(err)
	signer, err := bundle.LoadSigner(pem, []byte(ts.Getenv("FEVAL_PASSWORD")))
	ts.Check(err)
	switch args[0] {
	case "salt":
		salt := make([]byte, protocol.SaltSize)
		rand.Read(salt)
		sec.Salt = hex.EncodeToString(salt)
	case "content":
		if len(args) != 4 {
			ts.Fatalf("forge-reveal content needs DIR")
		}
		p, err := bundle.PackPath(ctx, l, signer, ts.MkAbs(args[3]), bundle.PackOptions{Kind: protocol.KindSubmission})
		ts.Check(err)
		sec.Submission = p.Artifact.Digest
	case "key":
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		ts.Check(err)
		signer, err = bundle.NewSigner(k)
		ts.Check(err)
	default:
		ts.Fatalf("unknown forgery %q", args[0])
	}
	commit, err := l.Resolve(ctx, sec.CommitmentArtifact.String())
	ts.Check(err)
	rec := protocol.Reveal{Commitment: sec.Commitment, Round: sec.Round, Miner: sec.Miner, Submission: sec.Submission, Salt: sec.Salt}
	desc, err := bundle.WriteSigned(ctx, l, signer, bundle.Artifact{Kind: protocol.KindReveal, Record: rec, Subject: &commit})
	ts.Check(err)
	ref, err := cas.ParseRemote(args[2])
	ts.Check(err)
	dst, err := cas.OpenRemote(ref, cas.RemoteOptions{})
	ts.Check(err)
	sub, err := l.Resolve(ctx, sec.Submission.String())
	ts.Check(err)
	_, err = cas.Copy(ctx, l, dst, sub, cas.CopyOptions{Referrers: true})
	ts.Check(err)
	_, err = cas.Copy(ctx, l, dst, desc, cas.CopyOptions{Referrers: true, Subjects: true})
	ts.Check(err)
	ts.Logf("forged reveal %s", desc.Digest)
}

// cmdSaltPushed checks whether any salt kept in $FEVAL_STORE appears anywhere in
// the registry's storage ($REGISTRY_ROOT), as hex or raw bytes:
// [!] salt-pushed.
func cmdSaltPushed(ts *testscript.TestScript, neg bool, args []string) {
	l, err := cas.OpenLayout(ts.Getenv("FEVAL_STORE"))
	ts.Check(err)
	dir := filepath.Join(l.Root(), cas.PrivateDir, "commitments")
	entries, err := os.ReadDir(dir)
	ts.Check(err)
	if len(entries) == 0 {
		ts.Fatalf("no commitment secrets in %s", dir)
	}
	var needles [][]byte
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		ts.Check(err)
		i := strings.Index(string(b), `"salt":"`)
		salt := string(b[i+8 : i+8+2*protocol.SaltSize])
		raw, _ := hex.DecodeString(salt)
		needles = append(needles, []byte(salt), raw)
	}
	found := ""
	ts.Check(filepath.WalkDir(ts.Getenv("REGISTRY_ROOT"), func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		for _, n := range needles {
			if bytes.Contains(b, n) {
				found = p
			}
		}
		return nil
	}))
	switch {
	case found != "" && !neg:
		ts.Logf("salt found in %s", found)
	case found == "" && !neg:
		ts.Fatalf("no salt in the registry's storage")
	case found != "" && neg:
		ts.Fatalf("a salt was pushed: it is in %s", found)
	}
}
