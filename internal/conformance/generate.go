// Package conformance generates the language-neutral conformance vectors of
// testdata/conformance (docs/CONFORMANCE.md): small OCI image layouts, each
// holding a verdict with everything its replay needs and a header stating the
// outcome every correct verifier must reach. The vectors are made by feval's
// own production paths (task creation, commit, reveal, evaluate) with fixed
// keys, salts and clock readings, then tampered with where a vector says so,
// so generating them twice gives the same bytes.
package conformance

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/feval/feval/beacon"
	"github.com/feval/feval/bundle"
	"github.com/feval/feval/cas"
	"github.com/feval/feval/evaluate"
	fx "github.com/feval/feval/fixtures/rollouts"
	"github.com/feval/feval/protocol"
	"github.com/feval/feval/protocol/rollouts"
	"github.com/opencontainers/go-digest"
	specs "github.com/opencontainers/image-spec/specs-go"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

// Expected outcomes, as vector headers spell them.
const (
	ExpectIdentical        = "identical"
	ExpectDiffersAt        = "differs at" // followed by the differing paths
	ExpectSignatureFailure = "signature failure"
	ExpectDigestMismatch   = "digest mismatch"
	ExpectMissingBlob      = "missing blob"
	ExpectBeaconFailure    = "beacon failure"
)

// HeaderFile is the name of a vector's header; StoreDir holds its OCI layout.
const (
	HeaderFile = "vector.txt"
	StoreDir   = "store"
	KeysDir    = "keys"
)

// Vector is one conformance vector.
type Vector struct {
	Name        string
	Description string
	Protocol    string
	Verdict     digest.Digest
	Trust       []string // key files, relative to the conformance directory
	Expect      string
}

// Header returns the vector's header file: "key: value" lines after a comment.
func (v Vector) Header() []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "# %s\n", v.Description)
	fmt.Fprintf(&b, "protocol: %s\n", v.Protocol)
	fmt.Fprintf(&b, "verdict: %s\n", v.Verdict)
	for _, k := range v.Trust {
		fmt.Fprintf(&b, "trust: %s\n", k)
	}
	fmt.Fprintf(&b, "expect: %s\n", v.Expect)
	return b.Bytes()
}

// ParseHeader reads a header written by Header.
func ParseHeader(name string, b []byte) (Vector, error) {
	v := Vector{Name: name}
	for i, line := range strings.Split(strings.TrimRight(string(b), "\n"), "\n") {
		if strings.HasPrefix(line, "# ") && i == 0 {
			v.Description = line[2:]
			continue
		}
		k, val, ok := strings.Cut(line, ": ")
		if !ok {
			return v, fmt.Errorf("%s: line %d is not \"key: value\"", name, i+1)
		}
		switch k {
		case "protocol":
			v.Protocol = val
		case "verdict":
			d, err := digest.Parse(val)
			if err != nil {
				return v, fmt.Errorf("%s: verdict: %w", name, err)
			}
			v.Verdict = d
		case "trust":
			v.Trust = append(v.Trust, val)
		case "expect":
			v.Expect = val
		default:
			return v, fmt.Errorf("%s: unknown header key %q", name, k)
		}
	}
	if v.Protocol == "" || v.Verdict == "" || len(v.Trust) == 0 || v.Expect == "" {
		return v, fmt.Errorf("%s: header lacks protocol, verdict, trust or expect", name)
	}
	return v, nil
}

// Key names: the task owner, the miners, the validator whose verdicts the
// vectors hold, and another key nobody trusts.
var keyNames = []string{"owner", "miner-honest", "miner-inflated", "miner-undetermined", "miner-gate", "miner-format1", "miner-format2",
	modelHonest, modelSwap, modelTie, modelTies, modelPrompt, "validator", "other"}

// key derives a fixed P-256 key from its name (a scalar below the group
// order: SHA-256 of a domain tag and the name, counter appended until it is).
func key(name string) (*bundle.Signer, error) {
	for i := 0; ; i++ {
		h := sha256.Sum256([]byte(fmt.Sprintf("feval/conformance/v1/key\x00%s\x00%d", name, i)))
		k, err := ecdsa.ParseRawPrivateKey(elliptic.P256(), h[:])
		if err != nil {
			continue
		}
		return bundle.NewSigner(k)
	}
}

// saltReader is the deterministic stand-in for the operating system's
// randomness when a conformance miner draws its salt.
func saltReader(miner string) io.Reader {
	h := sha256.Sum256([]byte("feval/conformance/v1/salt\x00" + miner))
	return bytes.NewReader(h[:])
}

// The published quicknet round the vectors' drand beacon uses, and a commit
// window that makes it the required round (docs/PROTOCOL.md, Beacon).
const (
	drandRound       = 9683710
	drandSignature   = "b0a8b04e009cf72534321aca0f50048da596a3feec1172a0244d9a4a623a3123d0402da79854d4c705e94bc73224c342"
	drandCommitUntil = "2024-07-24T20:54:51Z"
	revealUntil      = "2024-07-25T00:00:00Z"
	commitSeen       = "2024-07-24T20:00:00Z"
	revealSeen       = "2024-07-24T21:00:00Z"
)

func drandBeacon(round uint64, sig string) rollouts.Beacon {
	return rollouts.Beacon{Drand: &beacon.Drand{Chain: beacon.Quicknet.Hash, Round: round, Signature: sig}}
}

// generator holds the keys and the working store of one generation.
type generator struct {
	ctx  context.Context
	tmp  string
	out  string
	keys map[string]*bundle.Signer
	vecs []Vector
}

// family is one round with its task, the miners' reveals, in one working
// store, and the validator's reading when it evaluates.
type family struct {
	g       *generator
	dir     string // scratch: the task and the miners' directories
	items   []rollouts.Item
	work    *cas.Layout
	task    ocispec.Descriptor
	round   ocispec.Descriptor
	reveals map[string]ocispec.Descriptor
	now     protocol.Observation
}

// windows are a round's windows and the validator's readings of the
// commitments and of the reveals.
type windows struct {
	commitUntil, revealUntil string
	commitSeen, revealSeen   protocol.Observation
}

// timeWindows close commits just before the published drand round.
var timeWindows = windows{drandCommitUntil, revealUntil, observation(commitSeen), observation(revealSeen)}

// miner is one conformance miner: its key name, its rows and the
// submission format its directory makes (0: what pack makes of a plain rows
// directory, format 3; 1: a rows file whose last line has no line feed,
// which cannot be indexed and stays a tree; 2: with a claims file).
type miner struct {
	name   string
	rows   func(items []rollouts.Item) []row
	format int
	// write, when set, writes the miner's submission directory instead.
	write func(f *family, dir string) error
}

type row struct{ taskID, response, claimed string }

func honestRows(items []rollouts.Item) []row {
	out := make([]row, len(items))
	for i, it := range items {
		a := honestAnswers[it.TaskID]
		out[i] = row{it.TaskID, a.response, a.reward}
	}
	return out
}

// Generate writes every vector into dir (which must be empty or absent) and
// returns them. tmp is a scratch directory.
func Generate(ctx context.Context, dir, tmp string) ([]Vector, error) {
	g := &generator{ctx: ctx, tmp: tmp, out: dir, keys: map[string]*bundle.Signer{}}
	if err := os.MkdirAll(filepath.Join(dir, KeysDir), 0o755); err != nil {
		return nil, err
	}
	for _, n := range keyNames {
		k, err := key(n)
		if err != nil {
			return nil, err
		}
		g.keys[n] = k
		if err := os.WriteFile(filepath.Join(dir, KeysDir, n+".pub"), k.Public().PEM, 0o644); err != nil {
			return nil, err
		}
	}
	if err := g.rollouts(); err != nil {
		return nil, err
	}
	if err := g.modelVectors(); err != nil {
		return nil, err
	}
	return g.vecs, nil
}

// newFamily publishes a task and a round, lets the miners commit (seen by the
// validator at commitSeen) and reveal.
func (g *generator) newFamily(name string, spec rollouts.Spec, items []rollouts.Item, w windows, miners []miner) (*family, error) {
	f, err := g.openFamily(name, spec, items, w)
	if err != nil {
		return nil, err
	}
	return f, f.join(w, miners)
}

// openFamily publishes a task and a round in a new working store.
func (g *generator) openFamily(name string, spec rollouts.Spec, items []rollouts.Item, w windows) (*family, error) {
	ctx := g.ctx
	dir := filepath.Join(g.tmp, name)
	work, err := cas.Init(filepath.Join(dir, "work"))
	if err != nil {
		return nil, err
	}
	if err := fx.WriteTask(filepath.Join(dir, "task"), spec, items); err != nil {
		return nil, err
	}
	f := &family{g: g, dir: dir, work: work, reveals: map[string]ocispec.Descriptor{}, now: w.revealSeen}
	if f.task, err = protocol.CreateTask(ctx, work, g.keys["owner"], "rollouts", filepath.Join(dir, "task"), ""); err != nil {
		return nil, err
	}
	cu, err := protocol.ParseWindow(w.commitUntil)
	if err != nil {
		return nil, err
	}
	ru, err := protocol.ParseWindow(w.revealUntil)
	if err != nil {
		return nil, err
	}
	if f.round, err = protocol.OpenRound(ctx, work, g.keys["owner"], f.task, cu, ru, ""); err != nil {
		return nil, err
	}
	f.items = items
	return f, nil
}

// join lets the miners commit to the family's round (seen by the validator
// at w.commitSeen) and reveal.
func (f *family) join(w windows, miners []miner) error {
	ctx, work, keys := f.g.ctx, f.work, f.g.keys
	commitments := map[string]string{}
	for _, m := range miners {
		sub := filepath.Join(f.dir, m.name)
		write := m.write
		if write == nil {
			write = func(*family, string) error { return writeSubmission(sub, m.rows(f.items), m.format) }
		}
		if err := write(f, sub); err != nil {
			return fmt.Errorf("%s: %w", m.name, err)
		}
		c, err := protocol.Commit(ctx, work, keys[m.name], f.round, sub, "", saltReader(m.name))
		if err != nil {
			return fmt.Errorf("%s: commit: %w", m.name, err)
		}
		commitments[m.name] = c.Commitment
	}
	if _, err := protocol.Collect(ctx, work, work, f.round, w.commitSeen); err != nil {
		return err
	}
	for _, m := range miners {
		sec, err := protocol.LoadSecret(work, commitments[m.name])
		if err != nil {
			return err
		}
		rv, err := protocol.RevealCommitment(ctx, work, keys[m.name], sec, "")
		if err != nil {
			return err
		}
		f.reveals[m.name] = rv.Artifact.OCI()
	}
	return work.Flush()
}

func observation(t string) protocol.Observation {
	ts, err := time.Parse(time.RFC3339, t)
	if err != nil {
		panic(err)
	}
	return protocol.Observation{Now: ts}
}

// atHeight is a reading with a block-height anchor.
func atHeight(t string, h int64) protocol.Observation {
	o := observation(t)
	o.Height = &h
	return o
}

// writeSubmission writes a rollouts submission: submission.json and
// rows.jsonl, and for format 2 claims.tsv (see miner).
func writeSubmission(dir string, rows []row, format int) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	meta := `{"model_revision":"0123456789abcdef0123456789abcdef01234567","rows":"rows.jsonl"}` + "\n"
	switch format {
	case 1:
		meta = `{"model_revision":"1123456789abcdef0123456789abcdef01234567","rows":"rows.jsonl"}` + "\n"
	case 2:
		meta = `{"claims":"claims.tsv","model_revision":"2123456789abcdef0123456789abcdef01234567","rows":"rows.jsonl"}` + "\n"
	}
	var b, claims bytes.Buffer
	for _, r := range rows {
		line, err := bundle.Canonical(map[string]string{"task_id": r.taskID, "response": r.response, "reward_claimed": r.claimed})
		if err != nil {
			return err
		}
		b.Write(line)
		b.WriteByte('\n')
		fmt.Fprintf(&claims, "%s\t%s\n", r.taskID, r.claimed)
	}
	rowsData := b.Bytes()
	switch format {
	case 1:
		rowsData = bytes.TrimSuffix(rowsData, []byte("\n"))
	case 2:
		if err := os.WriteFile(filepath.Join(dir, "claims.tsv"), claims.Bytes(), 0o644); err != nil {
			return err
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "submission.json"), []byte(meta), 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "rows.jsonl"), rowsData, 0o644)
}

// evaluate has the validator evaluate a miner's reveal.
func (f *family) evaluate(minerName string, b rollouts.Beacon, full bool) (evaluate.Outcome, error) {
	out, err := evaluate.Evaluate(f.g.ctx, f.work, f.g.keys["validator"], evaluate.Request{
		Reveal: f.reveals[minerName].Digest.String(), Obs: f.now,
		Options: evaluate.Options{Rollouts: rollouts.Params{Beacon: b, Full: full}}})
	if err != nil {
		return out, fmt.Errorf("evaluating %s: %w", minerName, err)
	}
	return out, nil
}

// forge writes a verdict signed by the validator key: v changed by mut, with
// the subject of the verdict it was made from. It models a validator that
// misstates what it found.
func (f *family) forge(out evaluate.Outcome, mut func(v *rollouts.Verdict)) (ocispec.Descriptor, error) {
	var v rollouts.Verdict
	b, err := json.Marshal(out.Verdict)
	if err != nil {
		return ocispec.Descriptor{}, err
	}
	if err := json.Unmarshal(b, &v); err != nil { // a deep copy
		return ocispec.Descriptor{}, err
	}
	mut(&v)
	art, err := bundle.Load(f.g.ctx, f.work, out.Artifact.OCI())
	if err != nil {
		return ocispec.Descriptor{}, err
	}
	return bundle.WriteSigned(f.g.ctx, f.work, f.g.keys["validator"], bundle.Artifact{Kind: protocol.KindVerdict, Record: v,
		Subject: art.Manifest.Subject, Created: art.Manifest.Annotations[ocispec.AnnotationCreated]})
}

// vectorStore is the store of one vector being built.
type vectorStore struct {
	f    *family
	l    *cas.Layout
	root string
}

// extract copies a verdict and everything its replay needs from the family's
// working store into a new vector store, as a replaying auditor fetches them:
// the verdict (with its signatures unless sigs is false), the reveal with its
// commitment, round and task, the submission, and the signatures of each.
func (f *family) extract(name string, verdict ocispec.Descriptor, sigs bool) (*vectorStore, error) {
	ctx := f.g.ctx
	root := filepath.Join(f.g.out, name, StoreDir)
	l, err := cas.Init(root)
	if err != nil {
		return nil, err
	}
	if _, err := cas.Copy(ctx, f.work, l, verdict, cas.CopyOptions{}); err != nil {
		return nil, err
	}
	if sigs {
		if err := copySignatures(ctx, f.work, l, verdict); err != nil {
			return nil, err
		}
	}
	_, v, err := evaluate.LoadVerdict(ctx, f.work, verdict)
	if err != nil {
		return nil, err
	}
	for _, d := range []digest.Digest{v.Inputs.Reveal, v.Submission, v.Inputs.Task} {
		desc, err := f.work.Resolve(ctx, d.String())
		if err != nil {
			return nil, err
		}
		if _, err := cas.Copy(ctx, f.work, l, desc, cas.CopyOptions{Subjects: true}); err != nil {
			return nil, err
		}
		if err := copySignatures(ctx, f.work, l, desc); err != nil {
			return nil, err
		}
	}
	// A model-bound submission's subject is its model, which comes with
	// the submission.
	if desc, err := f.work.Resolve(ctx, v.Submission.String()); err == nil {
		var m ocispec.Manifest
		if err := readJSON(ctx, f.work, desc, &m); err != nil {
			return nil, err
		}
		if m.Subject != nil {
			if err := copySignatures(ctx, f.work, l, *m.Subject); err != nil {
				return nil, err
			}
		}
	}
	for _, d := range []digest.Digest{v.Inputs.Commitment, v.Inputs.Round} {
		desc, err := f.work.Resolve(ctx, d.String())
		if err != nil {
			return nil, err
		}
		if err := copySignatures(ctx, f.work, l, desc); err != nil {
			return nil, err
		}
	}
	return &vectorStore{f: f, l: l, root: root}, l.Flush()
}

func copySignatures(ctx context.Context, src cas.Store, dst *cas.Layout, desc ocispec.Descriptor) error {
	sigs, err := src.Referrers(ctx, desc, bundle.MediaTypeSigstoreBundle)
	if err != nil {
		return err
	}
	for _, s := range sigs {
		if _, err := cas.Copy(ctx, src, dst, s, cas.CopyOptions{}); err != nil {
			return err
		}
	}
	return nil
}

// finish removes the store's private state (it holds nothing a vector needs)
// and writes the header.
func (g *generator) finish(vs *vectorStore, v Vector) error {
	if err := vs.l.Flush(); err != nil {
		return err
	}
	for _, p := range []string{cas.PrivateDir, "feval.lock"} {
		if err := os.RemoveAll(filepath.Join(vs.root, p)); err != nil {
			return err
		}
	}
	if v.Protocol == "" {
		v.Protocol = "rollouts"
	}
	if len(v.Trust) == 0 {
		v.Trust = []string{KeysDir + "/validator.pub"}
	}
	g.vecs = append(g.vecs, v)
	return os.WriteFile(filepath.Join(g.out, v.Name, HeaderFile), v.Header(), 0o644)
}

// attach adds a signature referrer holding bundleBytes to target, in the form
// feval writes signatures (FORMAT.md §4).
func (vs *vectorStore) attach(target ocispec.Descriptor, bundleBytes []byte) error {
	ctx := vs.f.g.ctx
	layer, err := bundle.PushBytes(ctx, vs.l, bundle.MediaTypeSigstoreBundle, bundleBytes)
	if err != nil {
		return err
	}
	cfg, err := bundle.PushBytes(ctx, vs.l, ocispec.MediaTypeEmptyJSON, ocispec.DescriptorEmptyJSON.Data)
	if err != nil {
		return err
	}
	cfg.Data = ocispec.DescriptorEmptyJSON.Data
	subj := ocispec.Descriptor{MediaType: target.MediaType, Digest: target.Digest, Size: target.Size, ArtifactType: target.ArtifactType}
	m := ocispec.Manifest{
		Versioned:    specs.Versioned{SchemaVersion: 2},
		MediaType:    ocispec.MediaTypeImageManifest,
		ArtifactType: bundle.MediaTypeSigstoreBundle,
		Config:       cfg,
		Layers:       []ocispec.Descriptor{layer},
		Subject:      &subj,
		Annotations: map[string]string{
			ocispec.AnnotationCreated:           bundle.EpochCreated,
			"dev.sigstore.bundle.content":       "dsse-envelope",
			"dev.sigstore.bundle.predicateType": bundle.PredicateType,
		},
	}
	mb, err := bundle.Canonical(m)
	if err != nil {
		return err
	}
	_, err = bundle.PushBytes(ctx, vs.l, ocispec.MediaTypeImageManifest, mb)
	return err
}

// blobPath is the file of a blob in the vector store.
func (vs *vectorStore) blobPath(d digest.Digest) string {
	return filepath.Join(vs.root, "blobs", d.Algorithm().String(), d.Encoded())
}

// corrupt flips one bit in the middle of a blob, leaving its name.
func (vs *vectorStore) corrupt(d digest.Digest) error {
	if err := vs.l.Flush(); err != nil {
		return err
	}
	p := vs.blobPath(d)
	b, err := os.ReadFile(p)
	if err != nil {
		return err
	}
	b[len(b)/2] ^= 0x01
	return os.WriteFile(p, b, 0o644)
}

// corruptAt flips one bit of a blob at offset off, leaving its name.
func (vs *vectorStore) corruptAt(d digest.Digest, off int64) error {
	if err := vs.l.Flush(); err != nil {
		return err
	}
	p := vs.blobPath(d)
	b, err := os.ReadFile(p)
	if err != nil {
		return err
	}
	b[off] ^= 0x01
	return os.WriteFile(p, b, 0o644)
}

// remove deletes a blob.
func (vs *vectorStore) remove(d digest.Digest) error {
	if err := vs.l.Flush(); err != nil {
		return err
	}
	return os.Remove(vs.blobPath(d))
}

// mutateBundle returns the validator's signature bundle for target with mut
// applied to its decoded signature bytes.
func (g *generator) bundleBytes(signer string, target ocispec.Descriptor, mutSig func([]byte) []byte) ([]byte, error) {
	b, err := g.keys[signer].SignatureBytes(target)
	if err != nil || mutSig == nil {
		return b, err
	}
	var sb map[string]any
	if err := json.Unmarshal(b, &sb); err != nil {
		return nil, err
	}
	env := sb["dsseEnvelope"].(map[string]any)
	sigs := env["signatures"].([]any)
	s0 := sigs[0].(map[string]any)
	raw, err := base64.StdEncoding.DecodeString(s0["sig"].(string))
	if err != nil {
		return nil, err
	}
	s0["sig"] = base64.StdEncoding.EncodeToString(mutSig(slices.Clone(raw)))
	return bundle.Canonical(sb)
}

// dropFromIndex removes the manifests drop selects from index.json, written as
// the layout writes it.
func (vs *vectorStore) dropFromIndex(drop func(ocispec.Descriptor) bool) error {
	if err := vs.l.Flush(); err != nil {
		return err
	}
	p := filepath.Join(vs.root, "index.json")
	b, err := os.ReadFile(p)
	if err != nil {
		return err
	}
	var idx ocispec.Index
	if err := json.Unmarshal(b, &idx); err != nil {
		return err
	}
	idx.Manifests = slices.DeleteFunc(idx.Manifests, drop)
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(idx); err != nil {
		return err
	}
	return os.WriteFile(p, buf.Bytes(), 0o644)
}

// readJSON reads a small JSON blob of the store.
func readJSON(ctx context.Context, st cas.Store, desc ocispec.Descriptor, v any) error {
	b, err := cas.ReadAll(ctx, st, desc, cas.MaxManifestSize)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, v)
}
