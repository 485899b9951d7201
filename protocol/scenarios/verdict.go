package scenarios

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"github.com/feval/feval/sandbox"
	"io/fs"
	"math/big"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"

	"github.com/feval/feval/bundle"
	"github.com/feval/feval/cas"
	"github.com/feval/feval/gate"
	"github.com/feval/feval/meter"
	"github.com/feval/feval/protocol"
	"github.com/feval/feval/scoring"
	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

// KindRun is the artifact kind of a scenarios run record; RunFormat its format.
const (
	KindRun   = "scenario-run"
	RunFormat = "feval.scenarios.run.v1"
)

// Scenario statuses in a verdict.
const (
	// ScenarioScored: the verifier ran; the scenario scores Passed/Total.
	ScenarioScored = "scored"
	// ScenarioInfraError: the meter's upstream, the sandbox or the verifier
	// failed; the scenario has no score and the verdict is infra_error.
	ScenarioInfraError = "infra_error"
)

// Verdict is the record a validator signs about one scenario pack.
type Verdict struct {
	protocol.VerdictHead
	Detail     string           `json:"detail,omitempty"`
	Violations []gate.Violation `json:"violations,omitempty"`
	// Score is the exact sum over scenarios of passed/total ("" unless every
	// scenario scored); MaxScore the number of scenarios.
	Score    string `json:"score,omitempty"`
	MaxScore int    `json:"max_score"`
	// CostMicroUSD is what every model call of every scenario cost (shown,
	// never scored).
	CostMicroUSD int64            `json:"cost_micro_usd"`
	Scenarios    []ScenarioResult `json:"scenarios"`
	Digests      Digests          `json:"digests"`
}

// Digests name everything the verdict depends on beyond the shared inputs.
type Digests struct {
	Pack     digest.Digest `json:"pack"`
	Task     digest.Digest `json:"task"`
	Harness  digest.Digest `json:"harness"`
	Verifier digest.Digest `json:"verifier"`
	// Hidden is the hidden tests' artifact (its tree is the task's pin).
	Hidden digest.Digest `json:"hidden"`
	// Trace and Receipts are the meter's signed artifacts; Run the signed
	// scenario-run record (final workspaces and verifier reports).
	Trace    digest.Digest `json:"trace,omitempty"`
	Receipts digest.Digest `json:"receipts,omitempty"`
	Run      digest.Digest `json:"run,omitempty"`
}

// ScenarioResult is one scenario's line of the verdict.
type ScenarioResult struct {
	Name   string `json:"name"`
	Status string `json:"status"`
	Detail string `json:"detail,omitempty"`
	Passed int    `json:"passed"`
	Total  int    `json:"total"`
	Turns  int    `json:"turns"`
	Stop   string `json:"stop"`
	// CostMicroUSD and Models come from the scenario's receipts.
	CostMicroUSD int64             `json:"cost_micro_usd"`
	Models       []meter.ModelCost `json:"models"`
}

// Head returns the fields every protocol's verdict shares.
func (v Verdict) Head() protocol.VerdictHead { return v.VerdictHead }

// Details renders the scenarios for text output.
func (v Verdict) Details() []protocol.Detail {
	var out []protocol.Detail
	if v.Detail != "" {
		out = append(out, protocol.Detail{Label: "detail", Value: v.Detail})
	}
	if v.Score != "" {
		out = append(out, protocol.Detail{Label: "score", Value: fmt.Sprintf("%s of %d", v.Score, v.MaxScore)})
	}
	if len(v.Scenarios) > 0 {
		out = append(out, protocol.Detail{Label: "cost", Value: fmt.Sprintf("%d micro-USD", v.CostMicroUSD)})
	}
	for _, s := range v.Scenarios {
		val := fmt.Sprintf("%d/%d passed, %d turns (%s), %d micro-USD", s.Passed, s.Total, s.Turns, s.Stop, s.CostMicroUSD)
		if s.Status != ScenarioScored {
			val = s.Status + ": " + s.Detail
		}
		out = append(out, protocol.Detail{Label: "scenario " + s.Name, Value: val})
	}
	for _, vi := range v.Violations {
		out = append(out, protocol.Detail{Label: "violation", Value: vi.String()})
	}
	return out
}

// RunRecord is the record of a scenario-run artifact: per scenario, how the
// harness stopped, the final workspace (a payload layer: an uncompressed,
// normalised tar, named by its digest) and the verifier's report. Its subject
// is the submission.
type RunRecord struct {
	Format     string        `json:"format"`
	Submission digest.Digest `json:"submission"`
	Task       digest.Digest `json:"task"`
	Scenarios  []RunScenario `json:"scenarios"`
}

// RunScenario is one scenario's run.
type RunScenario struct {
	Name  string   `json:"name"`
	Agent AgentRun `json:"agent"`
	// Workspace is the digest of the final workspace's tar ("" if none).
	Workspace digest.Digest `json:"workspace,omitempty"`
	Report    *Report       `json:"report,omitempty"`
	// Control says why every test counts as failed: the verifier failed with
	// the workspace's answers and reported without them (a control run).
	Control string `json:"control,omitempty"`
	Infra   string `json:"infra,omitempty"`
}

// Params are the validator's choices for one evaluation.
type Params struct {
	// Upstream replaces every model's upstream base URL (an operator's gateway;
	// the fixture upstream in tests and the demo).
	Upstream string
	// Transport, if set, carries the meter's upstream calls.
	Transport http.RoundTripper
	// Credentials returns the bearer token for a model's upstream.
	Credentials func(model string) string
	// Policy starts the pack's policy (SidecarPolicy if nil).
	Policy PolicyStarter
	// Parallel is how many scenarios run at once (1 if zero).
	Parallel int
	// Hidden names the hidden tests' artifact (kind tests) in the store: the
	// tree whose digest the task pins, published by the task owner after
	// reveals close. Required to evaluate; replay takes the verdict's.
	Hidden digest.Digest
}

// ErrNoHidden reports an evaluation without the task's hidden tests.
var ErrNoHidden = errors.New("the task's hidden tests are needed: name their artifact (published by the task owner after reveals close)")

// Case is one evaluation (protocol.Case).
type Case = protocol.Case

// outcome is one scenario's result before it is written down.
type outcome struct {
	run       RunScenario
	workspace []byte // the final workspace's tar
}

type evaluation struct {
	hidden  digest.Digest
	spec    Spec
	cfg     meter.Config
	taskDir string
	pack    fs.FS
}

func (e *evaluation) close() {
	if e.taskDir != "" {
		os.RemoveAll(e.taskDir)
	}
}

func open(ctx context.Context, c Case, withPack bool, hidden digest.Digest) (*evaluation, error) {
	taskFS, err := protocol.LoadTaskFS(ctx, c.Store, c.Refs.Task)
	if err != nil {
		return nil, err
	}
	e := &evaluation{}
	if e.spec, err = LoadTask(taskFS); err != nil {
		return nil, err
	}
	if e.cfg, err = meter.LoadTaskConfig(taskFS); err != nil {
		return nil, err
	}
	if withPack {
		art, err := bundle.Load(ctx, c.Store, c.Refs.Submission)
		if err != nil {
			return nil, err
		}
		files, err := bundle.LoadTree(ctx, c.Store, art, bundle.Limits{MaxFiles: 256, MaxBytes: 16 << 20, MaxFile: 4 << 20})
		if err != nil {
			return nil, err
		}
		e.pack = bundle.TreeFS(files)
	}
	if e.taskDir, err = sandbox.Materialize(taskFS); err != nil {
		return nil, err
	}
	if err := e.addHidden(ctx, c.Store, hidden); err != nil {
		e.close()
		return nil, err
	}
	return e, nil
}

// addHidden checks that the artifact hidden holds the tree the task pins and
// writes each scenario's tests to scenarios/NAME/hidden of the host copy of
// the task, which only the verifier mounts.
func (e *evaluation) addHidden(ctx context.Context, st cas.Store, hidden digest.Digest) error {
	if hidden == "" {
		return ErrNoHidden
	}
	desc, err := st.Resolve(ctx, hidden.String())
	if err != nil {
		return fmt.Errorf("hidden tests %s: %w", hidden, err)
	}
	art, err := bundle.Load(ctx, st, desc)
	if err != nil {
		return fmt.Errorf("hidden tests %s: %w", hidden, err)
	}
	if art.Kind != KindTests || len(art.Payloads) != 1 || art.Payloads[0].Annotations[bundle.AnnotationContentDigest] != e.spec.Hidden.String() {
		return fmt.Errorf("hidden tests %s: %w: not a tests tree with the digest %s the task pins", hidden, ErrTask, e.spec.Hidden)
	}
	files, err := bundle.LoadTree(ctx, st, art, bundle.Limits{MaxFiles: 4096, MaxBytes: 64 << 20, MaxFile: 4 << 20})
	if err != nil {
		return fmt.Errorf("hidden tests %s: %w", hidden, err)
	}
	for _, f := range files {
		parts := strings.SplitN(f.Path, "/", 3)
		if len(parts) != 3 || parts[0] != ScenarioDir || !nameRE().MatchString(parts[1]) {
			return fmt.Errorf("hidden tests %s: %w: %s is not scenarios/NAME/FILE", hidden, ErrTask, f.Path)
		}
		dst := filepath.Join(e.taskDir, ScenarioDir, parts[1], "hidden", filepath.FromSlash(parts[2]))
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(dst, f.Data, 0o644); err != nil {
			return err
		}
	}
	e.hidden = desc.Digest
	return readable(e.taskDir)
}

func (p Params) start(c Case, spec Spec) Verdict {
	return Verdict{VerdictHead: protocol.NewVerdictHead("scenarios", c.Refs, c.Entry, c.Sequence), Scenarios: []ScenarioResult{},
		MaxScore: len(spec.Scenarios)}
}

// Decide evaluates one reveal whose checks gave c.Entry: every scenario of the
// task through the pack's policy and the meter, then the hidden tests; it
// writes the signed trace, receipts and scenario-run artifacts and returns
// the verdict that names them.
func Decide(ctx context.Context, c Case, p Params) (Verdict, error) {
	if c.Entry.Status != protocol.StatusAccepted {
		return rejected(c), nil
	}
	e, err := open(ctx, c, true, p.Hidden)
	if err != nil {
		return Verdict{}, err
	}
	defer e.close()
	rec := meter.NewRecorder()
	outs, err := p.runAll(ctx, e, rec, nil)
	if err != nil {
		return Verdict{}, err
	}
	arts, err := meter.WriteArtifacts(ctx, c.Store, c.Signer, rec, e.cfg, c.Refs.Submission, c.Created)
	if err != nil {
		return Verdict{}, err
	}
	runDesc, err := writeRun(ctx, c, outs)
	if err != nil {
		return Verdict{}, err
	}
	v := p.start(c, e.spec)
	v.Digests = digests(c, e, arts.Trace.Digest, arts.Receipts.Digest, runDesc.Digest)
	settle(&v, e.spec, outs, rec.Receipts())
	return v, nil
}

func rejected(c Case) Verdict {
	v := Verdict{VerdictHead: protocol.NewVerdictHead("scenarios", c.Refs, c.Entry, c.Sequence), Scenarios: []ScenarioResult{}}
	v.Status, v.Reason, v.Violations = protocol.VerdictRejected, c.Entry.Reason, c.Entry.Violations
	return v
}

func digests(c Case, e *evaluation, trace, receipts, run digest.Digest) Digests {
	return Digests{Pack: c.Refs.Submission.Digest, Task: c.Refs.Task, Harness: e.spec.Harness.Digest, Verifier: e.spec.Verifier.Digest,
		Hidden: e.hidden, Trace: trace, Receipts: receipts, Run: run}
}

// runAll runs every scenario (Parallel at a time) with a meter recording
// into rec, or answering from replay when it is not nil.
func (p Params) runAll(ctx context.Context, e *evaluation, rec *meter.Recorder, replay []meter.TraceEntry) ([]outcome, error) {
	start := p.Policy
	if start == nil {
		start = SidecarPolicy
	}
	if replay != nil && len(replay) == 0 {
		replay = []meter.TraceEntry{} // replay mode with an empty trace
	}
	m, err := meter.New(e.cfg, meter.Options{Recorder: rec, Upstream: p.Upstream, Transport: p.Transport, Credentials: p.Credentials, Replay: replay})
	if err != nil {
		return nil, err
	}
	defer m.Close()
	pol, err := start(ctx, e.pack, e.spec.Models)
	if err != nil {
		return nil, err
	}
	defer pol.Close()
	outs := make([]outcome, len(e.spec.Scenarios))
	errs := make([]error, len(e.spec.Scenarios))
	n := max(p.Parallel, 1)
	sem := make(chan struct{}, n)
	var wg sync.WaitGroup
	steps := cas.StepsFrom(ctx)
	steps.Begin("scenario", len(e.spec.Scenarios))
	for i, sc := range e.spec.Scenarios {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			outs[i], errs[i] = runScenario(ctx, e, m, pol, sc)
			steps.Step("scenario")
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return outs, nil
}

func runScenario(ctx context.Context, e *evaluation, m *meter.Meter, pol Policy, sc ScenarioSpec) (outcome, error) {
	o := outcome{run: RunScenario{Name: sc.Name}}
	ms, err := m.Scenario(sc.Name)
	if err != nil {
		return o, err
	}
	h, release, err := pol.Scenario(ctx, ms)
	if err != nil {
		// The pack's policy did not start: the harness meets an endpoint that
		// answers every request with a policy error, and the scenario is
		// verified on the untouched workspace.
		h, release = policyDown{}, func() {}
	}
	out, err := os.MkdirTemp("", "feval-scenario-")
	if err != nil {
		release()
		return o, err
	}
	defer os.RemoveAll(out)
	if err := os.Chmod(out, 0o777); err != nil {
		release()
		return o, err
	}
	a, err := runAgent(ctx, e.spec, e.taskDir, sc, h, out)
	release()
	if err != nil {
		return o, err
	}
	o.run.Agent = a
	if a.Infra != "" {
		o.run.Infra = a.Infra
		return o, nil
	}
	ws := filepath.Join(out, "workspace")
	if fi, err := os.Stat(ws); err != nil || !fi.IsDir() {
		if err := os.Mkdir(ws, 0o755); err != nil {
			return o, err
		}
	}
	if err := readable(ws); err != nil {
		return o, err
	}
	var tar bytes.Buffer
	if err := bundle.WriteTar(&tar, ws, nil); err != nil {
		return o, fmt.Errorf("scenario %s: packing the final workspace: %w", sc.Name, err)
	}
	o.workspace = tar.Bytes()
	o.run.Workspace = digest.FromBytes(o.workspace)
	o.run.Report, o.run.Infra, o.run.Control = verify(ctx, e.spec, e.taskDir, sc, ws)
	return o, nil
}

func writeRun(ctx context.Context, c Case, outs []outcome) (ocispec.Descriptor, error) {
	rr, layers := runRecord(c, outs), []ocispec.Descriptor{}
	for _, o := range outs {
		if o.workspace == nil {
			continue
		}
		l, err := bundle.PushData(ctx, c.Store, o.run.Name+".tar", o.workspace)
		if err != nil {
			return ocispec.Descriptor{}, err
		}
		layers = append(layers, l)
	}
	subject := c.Refs.Submission
	return bundle.WriteSigned(ctx, c.Store, c.Signer, bundle.Artifact{Kind: KindRun, Record: rr, Layers: layers, Subject: &subject, Created: c.Created})
}

// settle fills the scenario lines, the score and the status from the runs
// and the receipts.
func settle(v *Verdict, spec Spec, outs []outcome, receipts []meter.Receipt) {
	sums := map[string]meter.Summary{}
	for _, s := range meter.Summarize(receipts) {
		sums[s.Scenario] = s
	}
	score := new(big.Rat)
	infra := 0
	for i, o := range outs {
		sc := spec.Scenarios[i]
		sm := sums[sc.Name]
		r := ScenarioResult{Name: sc.Name, Status: ScenarioScored, Total: len(sc.Tests), Turns: o.run.Agent.Turns, Stop: o.run.Agent.Stop,
			CostMicroUSD: sm.CostMicroUSD, Models: sm.Models}
		if r.Models == nil {
			r.Models = []meter.ModelCost{}
		}
		switch {
		case sm.Status == meter.StatusInfraError:
			r.Status, r.Detail = ScenarioInfraError, "a model call failed upstream after its retries"
		case sm.Status == meter.StatusDiverged:
			r.Status, r.Detail = ScenarioInfraError, "a model call was missing from the trace"
		case o.run.Infra != "":
			r.Status, r.Detail = ScenarioInfraError, o.run.Infra
		case o.run.Report != nil:
			r.Passed, r.Detail = o.run.Report.Summary.Passed, o.run.Control
		}
		if r.Status == ScenarioScored {
			score.Add(score, big.NewRat(int64(r.Passed), int64(r.Total)))
		} else {
			infra++
		}
		v.CostMicroUSD += r.CostMicroUSD
		v.Scenarios = append(v.Scenarios, r)
	}
	if infra > 0 {
		v.Status, v.Detail = protocol.VerdictInfraError, fmt.Sprintf("%d of %d scenarios hit an infrastructure failure", infra, len(outs))
		return
	}
	v.Status, v.Score = protocol.VerdictPassed, scoring.RatioOf(score).String()
}

// sortedNames is a helper for deterministic iteration.
func sortedNames(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// policyDown answers every request with an OpenAI-shaped policy error.
type policyDown struct{}

func (policyDown) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusBadGateway)
	w.Write([]byte(`{"error":{"code":"start_failed","message":"the pack's policy did not start","param":null,"type":"policy_error"}}`))
}
