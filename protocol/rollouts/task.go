// Package rollouts is the protocol driver for verifiable post-training
// (competition kind B): a miner commits one rollout row per task; a validator
// audits a beacon-selected sample of rows by recomputing their rewards with the
// deterministic checkers of package scoring, and signs a verdict that anyone can
// replay.
package rollouts

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"sync"

	"github.com/feval/feval/internal/strictjson"
	"github.com/feval/feval/model"
	"github.com/feval/feval/protocol"
	"github.com/feval/feval/scoring/ifeval"
	"github.com/feval/feval/scoring/mathverify"
	"github.com/opencontainers/go-digest"
)

// Files of a rollouts task directory.
const (
	TaskFile  = "task.json"
	TasksFile = "tasks.jsonl"
)

// Task kinds.
const (
	KindMath = "math"
	KindIF   = "if"
)

// Spec is task.json: the parameters of a rollouts task.
type Spec struct {
	Protocol    string   `json:"protocol"` // "rollouts"
	Rows        int      `json:"rows"`
	AuditRows   int      `json:"audit_rows"`
	MaxRowBytes int      `json:"max_row_bytes"`
	Checkers    Checkers `json:"checkers"`
	MathFuel    int      `json:"math_fuel"`
	// Model, when set, binds every row to a model the miner commits with
	// the submission (docs/PROTOCOL.md, "Model-bound rollouts"); a task
	// without it takes rows as text, bound to no model.
	Model *ModelSpec `json:"model,omitempty"`
}

// ModelSpec is what a task fixes about the model that writes its rows.
type ModelSpec struct {
	// Architecture is the model family; "qwen3" is the one the reference
	// runtime runs.
	Architecture string `json:"architecture"`
	// Tokenizer is the SHA-256 digest of the tokenizer.json every
	// committed model must carry: the task's prompts are encoded with it.
	Tokenizer digest.Digest `json:"tokenizer"`
	// MaxWeightsBytes bounds the committed model's model.safetensors.
	MaxWeightsBytes int64 `json:"max_weights_bytes"`
	// Sampling is how every completion token is sampled (docs/PROTOCOL.md,
	// "Seeded sampling").
	Sampling model.Sampling `json:"sampling"`
}

// MaxPromptTokens bounds an item's prompt_tokens.
const MaxPromptTokens = 1 << 15

// ArchitectureQwen3 is the architecture of ModelSpec the reference runtime
// implements (package model).
const ArchitectureQwen3 = "qwen3"

// valid reports whether the spec's parameters are in range.
func (m *ModelSpec) valid() error {
	switch {
	case m.Architecture != ArchitectureQwen3:
		return fmt.Errorf("model.architecture %q: this feval runs %q", m.Architecture, ArchitectureQwen3)
	case m.Tokenizer.Validate() != nil || m.Tokenizer.Algorithm() != digest.SHA256:
		return fmt.Errorf("model.tokenizer %q is not a sha256 digest", m.Tokenizer)
	case m.MaxWeightsBytes <= 0 || m.MaxWeightsBytes > model.DefaultLimits.MaxWeightsBytes:
		return fmt.Errorf("model.max_weights_bytes %d is outside 1 to %d", m.MaxWeightsBytes, model.DefaultLimits.MaxWeightsBytes)
	}
	if err := m.Sampling.Validate(); err != nil {
		return fmt.Errorf("model.sampling: %v", err)
	}
	return nil
}

// Limits returns the limits a committed model is loaded within.
func (m *ModelSpec) Limits() model.Limits {
	lim := model.DefaultLimits
	lim.MaxWeightsBytes = m.MaxWeightsBytes
	return lim
}

// Checkers names the checker versions the task's rewards are defined by.
type Checkers struct {
	Math string `json:"math"`
	IF   string `json:"if"`
}

// CurrentCheckers are the checker versions this build implements.
var CurrentCheckers = Checkers{Math: mathverify.Version, IF: ifeval.Version}

// Item is one line of tasks.jsonl.
type Item struct {
	TaskID string `json:"task_id"`
	Kind   string `json:"kind"`
	Prompt string `json:"prompt"`
	// Math: the reference answer (LaTeX).
	Answer string `json:"answer,omitempty"`
	// IF: IFEval instruction ids and their arguments.
	InstructionIDs []string         `json:"instruction_id_list,omitempty"`
	Kwargs         []map[string]any `json:"kwargs,omitempty"`
	// PromptTokens, in a task that binds rows to a model (and only there),
	// are the canonical prompt: the token ids every row of this task starts
	// from, as the task's tokenizer encodes the prompt (with whatever chat
	// template the task owner applies).
	PromptTokens []int `json:"prompt_tokens,omitempty"`
}

// LoadedTask is a parsed task directory.
type LoadedTask struct {
	Spec  Spec
	Items []Item
	index map[string]int
	// ids holds the task ids in file order, sorted the same ids in
	// byte-wise order and sortedDigest their gate.SortedIDsDigest, made
	// once (sortedIDs, idList).
	ids          []string
	sorted       []string
	sortedDigest [32]byte
	sortedOnce   sync.Once
}

// ErrTask reports a task directory that does not have the rollouts form.
var ErrTask = errors.New("malformed rollouts task")

// LoadTask reads task.json and tasks.jsonl from a task tree. The result is
// shared with later calls for the same bytes (see cache.go) and must not be
// modified.
func LoadTask(fsys fs.FS) (*LoadedTask, error) {
	// The tree of a task artifact names the artifact it was read from: its
	// parse is kept by that digest, so the files are neither read nor hashed
	// again.
	tree, _ := fsys.(*protocol.TaskTree)
	if tree != nil && tree.TaskDigest() != "" {
		if t := tasksByDigest.get(tree.TaskDigest().String()); t != nil {
			return t, nil
		}
	}
	t, err := parseTask(fsys)
	if err == nil && tree != nil && tree.TaskDigest() != "" {
		tasksByDigest.put(tree.TaskDigest().String(), t)
	}
	return t, err
}

// parseTask is LoadTask for a tree not known by digest: its parse is kept by
// the content of its files.
func parseTask(fsys fs.FS) (*LoadedTask, error) {
	b, err := fs.ReadFile(fsys, TaskFile)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrTask, err)
	}
	var t LoadedTask
	if err := strictjson.Decode(b, &t.Spec); err != nil {
		return nil, fmt.Errorf("%w: task.json: %v", ErrTask, err)
	}
	s := t.Spec
	if s.Protocol != "rollouts" || s.Rows <= 0 || s.AuditRows <= 0 || s.AuditRows > s.Rows || s.MaxRowBytes <= 0 {
		return nil, fmt.Errorf("%w: task.json has bad parameters", ErrTask)
	}
	if s.Model != nil {
		if err := s.Model.valid(); err != nil {
			return nil, fmt.Errorf("%w: task.json: %v", ErrTask, err)
		}
	}
	if s.Checkers != CurrentCheckers {
		return nil, fmt.Errorf("%w: task needs checkers %+v, this feval has %+v", ErrTask, s.Checkers, CurrentCheckers)
	}
	data, err := fs.ReadFile(fsys, TasksFile)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrTask, err)
	}
	key := contentKey(b, data)
	if cached := tasksByContent.get(key); cached != nil {
		return cached, nil
	}
	t.index = map[string]int{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for line := 1; sc.Scan(); line++ {
		it, ok := parseItem(sc.Bytes())
		if !ok { // not the plain form: strictjson decides, with its error
			if err := strictjson.Decode(sc.Bytes(), &it); err != nil {
				return nil, fmt.Errorf("%w: tasks.jsonl line %d: %v", ErrTask, line, err)
			}
		}
		if _, dup := t.index[it.TaskID]; dup || it.TaskID == "" || (it.Kind != KindMath && it.Kind != KindIF) {
			return nil, fmt.Errorf("%w: tasks.jsonl line %d: bad or duplicate task", ErrTask, line)
		}
		if err := checkPromptTokens(it.PromptTokens, s.Model); err != nil {
			return nil, fmt.Errorf("%w: tasks.jsonl line %d: %v", ErrTask, line, err)
		}
		t.index[it.TaskID] = len(t.Items)
		t.Items = append(t.Items, it)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrTask, err)
	}
	if len(t.Items) != s.Rows {
		return nil, fmt.Errorf("%w: %d tasks, task.json says %d", ErrTask, len(t.Items), s.Rows)
	}
	tasksByContent.put(key, &t)
	return &t, nil
}

// checkPromptTokens checks an item's prompt_tokens: present in a task that
// binds rows to a model, 1 to MaxPromptTokens ids below the tokenizer's
// bound, and absent elsewhere.
func checkPromptTokens(ids []int, m *ModelSpec) error {
	switch {
	case m == nil && ids != nil:
		return errors.New("prompt_tokens belong to a task with a model section only")
	case m == nil:
		return nil
	case len(ids) == 0 || len(ids) > MaxPromptTokens:
		return fmt.Errorf("a task with a model section needs 1 to %d prompt_tokens per item", MaxPromptTokens)
	}
	for _, id := range ids {
		if id < 0 || id >= model.DefaultLimits.MaxVocab {
			return fmt.Errorf("prompt token %d is outside 0 to %d", id, model.DefaultLimits.MaxVocab-1)
		}
	}
	return nil
}

// IDs returns the task ids in file order.
func (t *LoadedTask) IDs() []string {
	ids := make([]string, len(t.Items))
	for i, it := range t.Items {
		ids[i] = it.TaskID
	}
	return ids
}

// Item returns the task with the given id.
func (t *LoadedTask) Item(id string) (Item, bool) {
	i, ok := t.index[id]
	if !ok {
		return Item{}, false
	}
	return t.Items[i], true
}
