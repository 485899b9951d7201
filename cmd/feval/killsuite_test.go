//go:build reliability

// The long reliability suite ('make reliability'): feval processes killed with
// SIGKILL at random points, and 32 concurrent committers through the CLI. Each
// kill counts only if the process was still running when the signal was sent.
// After every kill the suite checks what a reader can see.

package main

import (
	"bytes"
	"crypto/rand"
	"fmt"
	mrand "math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/feval/feval/fixtures/rollouts"
	"github.com/feval/feval/internal/testenv"
)

// kills is how many live processes each scenario kills.
const kills = 50

// proc runs the feval binary (this test binary, installed as "feval" on PATH by
// TestMain) as a separate process with env overriding the test's environment.
func proc(env map[string]string, args ...string) *exec.Cmd {
	cmd := exec.Command("feval", args...)
	cmd.Env = os.Environ()
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	return cmd
}

// outcome of one command run to completion.
type outcome struct {
	code           int
	stdout, stderr string
}

func runProc(t *testing.T, env map[string]string, args ...string) outcome {
	t.Helper()
	cmd := proc(env, args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	o := outcome{code, out.String(), errb.String()}
	if strings.Contains(o.stderr, "goroutine ") || strings.Contains(o.stderr, "panic:") {
		t.Fatalf("feval %v panicked:\n%s", args, o.stderr)
	}
	return o
}

func mustProc(t *testing.T, env map[string]string, args ...string) string {
	t.Helper()
	o := runProc(t, env, args...)
	if o.code != 0 {
		t.Fatalf("feval %v: exit %d: %s", args, o.code, o.stderr)
	}
	return o.stdout
}

// killer runs a command and kills it with SIGKILL after a random delay below
// max. It reports whether the kill landed on a live process; a process that
// finished first must have succeeded.
func killer(t *testing.T, max time.Duration, env map[string]string, args ...string) bool {
	t.Helper()
	cmd := proc(env, args...)
	var errb bytes.Buffer
	cmd.Stderr = &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("feval %v finished before the kill but failed: %v: %s", args, err, errb.String())
		}
		return false
	case <-time.After(time.Duration(mrand.Int64N(int64(max)))):
	}
	alive := cmd.Process.Signal(syscall.SIGKILL) == nil
	err := <-done
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL {
		return alive
	}
	if err != nil {
		t.Fatalf("feval %v failed on its own: %v: %s", args, err, errb.String())
	}
	return false // it finished just before the signal
}

// timed runs a command once to completion and returns how long it took.
func timed(t *testing.T, env map[string]string, args ...string) time.Duration {
	t.Helper()
	start := time.Now()
	mustProc(t, env, args...)
	return time.Since(start)
}

// storeSound requires a store to be usable after a kill: fsck finds nothing but
// temporary files of the killed writer, and after --repair nothing at all.
func storeSound(t *testing.T, env map[string]string) {
	t.Helper()
	o := runProc(t, env, "fsck", "--json")
	if o.code != 0 {
		if o.code != exitVerify || strings.Count(o.stdout, `"kind"`) != strings.Count(o.stdout, `"kind": "temporary_file"`) {
			t.Fatalf("store damaged after a kill: exit %d\n%s%s", o.code, o.stdout, o.stderr)
		}
		mustProc(t, env, "fsck", "--repair")
		mustProc(t, env, "fsck")
	}
}

// bigTree writes a tree of random files (about 24 MB) so that commands take
// long enough to be killed in the middle.
func bigTree(t *testing.T, dir string) {
	t.Helper()
	for i := range 12 {
		b := make([]byte, 2<<20)
		rand.Read(b)
		os.MkdirAll(filepath.Join(dir, fmt.Sprint("d", i%3)), 0o755)
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprint("d", i%3), fmt.Sprint("f", i)), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

type suite struct {
	dir string
	reg *testenv.Registry
	env map[string]string
}

func newSuite(t *testing.T) *suite {
	dir := t.TempDir()
	s := &suite{dir: dir, reg: testenv.StartRegistry(t), env: map[string]string{
		"HOME":              filepath.Join(dir, "home"),
		"XDG_DATA_HOME":     filepath.Join(dir, "home", "data"),
		"DOCKER_CONFIG":     filepath.Join(dir, "home", "docker"),
		"FEVAL_STORE":       filepath.Join(dir, "store"),
		"FEVAL_KEY":         filepath.Join(dir, "keys", "me.key"),
		"FEVAL_PASSWORD":    "reliability",
		"FEVAL_PROGRESS":    "0",
		"SOURCE_DATE_EPOCH": "0",
	}}
	mustProc(t, s.env, "init")
	mustProc(t, s.env, "key", "generate")
	return s
}

func with(env map[string]string, kv ...string) map[string]string {
	out := map[string]string{}
	for k, v := range env {
		out[k] = v
	}
	for i := 0; i+1 < len(kv); i += 2 {
		out[kv[i]] = kv[i+1]
	}
	return out
}

// TestReliabilityKillPack kills pack: the store stays sound, and a tag that is
// listed names an artifact that verifies.
func TestReliabilityKillPack(t *testing.T) {
	s := newSuite(t)
	tree := filepath.Join(s.dir, "tree")
	bigTree(t, tree)
	max := timed(t, s.env, "pack", "--kind", "submission", "--tag", "first", tree)
	killed := 0
	for i := 0; killed < kills; i++ {
		if i > 20*kills {
			t.Fatalf("only %d of %d kills landed", killed, kills)
		}
		os.WriteFile(filepath.Join(tree, "varies"), []byte(fmt.Sprint(i)), 0o644)
		tag := fmt.Sprint("k", i)
		if !killer(t, max, s.env, "pack", "--kind", "submission", "--tag", tag, tree) {
			continue
		}
		killed++
		storeSound(t, s.env)
		if o := runProc(t, s.env, "verify", tag); o.code != 0 && o.code != exitNotFound {
			t.Fatalf("after a kill, tag %s is listed but does not verify: exit %d: %s", tag, o.code, o.stderr)
		}
	}
	mustProc(t, s.env, "pack", "--kind", "submission", "--tag", "last", tree)
	mustProc(t, s.env, "verify", "last")
	t.Logf("pack: %d kills survived", killed)
}

// TestReliabilityKillPush kills push: the registry shows either nothing under
// the tag and digest, or the whole artifact with its signature.
func TestReliabilityKillPush(t *testing.T) {
	s := newSuite(t)
	tree := filepath.Join(s.dir, "tree")
	bigTree(t, tree)
	sub := strings.TrimSpace(mustProc(t, s.env, "pack", "--kind", "submission", tree))
	max := timed(t, s.env, "push", sub, s.reg.Addr+"/kill/calibrate:v")
	killed, complete := 0, 0
	for i := 0; killed < kills; i++ {
		if i > 20*kills {
			t.Fatalf("only %d of %d kills landed", killed, kills)
		}
		repo := fmt.Sprintf("%s/kill/p%d", s.reg.Addr, i)
		if !killer(t, max, s.env, "push", sub, repo+":v") {
			continue
		}
		killed++
		reader := with(s.env, "FEVAL_STORE", filepath.Join(s.dir, fmt.Sprint("reader", i)))
		mustProc(t, reader, "init")
		for _, ref := range []string{repo + ":v", repo + "@" + sub} {
			o := runProc(t, reader, "pull", "--tag", "got", ref)
			switch o.code {
			case exitNotFound:
			case 0:
				if v := runProc(t, reader, "verify", "got"); v.code != 0 {
					t.Fatalf("after a killed push, %s pulls but does not verify: exit %d: %s", ref, v.code, v.stderr)
				}
				complete++
			default:
				t.Fatalf("after a killed push, pull %s: exit %d: %s", ref, o.code, o.stderr)
			}
		}
		os.RemoveAll(reader["FEVAL_STORE"])
	}
	t.Logf("push: %d kills survived, %d reads found a complete artifact, the rest found nothing", killed, complete)
}

// TestReliabilityKillPull kills pull: the local store stays sound, and the tag is
// listed only for a complete artifact.
func TestReliabilityKillPull(t *testing.T) {
	s := newSuite(t)
	tree := filepath.Join(s.dir, "tree")
	bigTree(t, tree)
	sub := strings.TrimSpace(mustProc(t, s.env, "pack", "--kind", "submission", tree))
	ref := s.reg.Addr + "/kill/pull:v"
	mustProc(t, s.env, "push", sub, ref)
	reader := with(s.env, "FEVAL_STORE", filepath.Join(s.dir, "reader"))
	mustProc(t, reader, "init")
	max := timed(t, reader, "pull", "--tag", "calibrate", ref)
	killed := 0
	for i := 0; killed < kills; i++ {
		if i > 20*kills {
			t.Fatalf("only %d of %d kills landed", killed, kills)
		}
		// A fresh store each time, so that every pull moves the whole artifact.
		reader = with(s.env, "FEVAL_STORE", filepath.Join(s.dir, fmt.Sprint("reader", i)))
		mustProc(t, reader, "init")
		if !killer(t, max, reader, "pull", "--tag", "got", ref) {
			continue
		}
		killed++
		storeSound(t, reader)
		if o := runProc(t, reader, "verify", "got"); o.code != 0 && o.code != exitNotFound {
			t.Fatalf("after a killed pull, the tag is listed but does not verify: exit %d: %s", o.code, o.stderr)
		}
		mustProc(t, reader, "pull", "--tag", "got", ref)
		mustProc(t, reader, "verify", "got")
		os.RemoveAll(reader["FEVAL_STORE"])
	}
	t.Logf("pull: %d kills survived", killed)
}

// round opens a round whose commit window is years away and pushes it.
func (s *suite) round(t *testing.T, repo string) string {
	t.Helper()
	task := filepath.Join(s.dir, "task")
	os.MkdirAll(task, 0o755)
	os.WriteFile(filepath.Join(task, "task.json"), []byte(`{"protocol": "optimizer"}`), 0o644)
	mustProc(t, s.env, "task", "create", "--protocol", "optimizer", "--tag", "task", task)
	round := strings.TrimSpace(mustProc(t, s.env, "round", "open", "--task", "task", "--commit-until", "2099-01-01T00:00:00Z", "--reveal-until", "2099-01-02T00:00:00Z", "--tag", "r1"))
	mustProc(t, s.env, "push", "r1", repo+":round")
	return round
}

// miner makes a store and key for one miner with the round pulled and a
// submission packed, and returns its environment.
func (s *suite) miner(t *testing.T, name, repo string) map[string]string {
	t.Helper()
	env := with(s.env, "FEVAL_STORE", filepath.Join(s.dir, name, "store"), "FEVAL_KEY", filepath.Join(s.dir, name, "me.key"))
	mustProc(t, env, "init")
	mustProc(t, env, "key", "generate")
	mustProc(t, env, "pull", "--tag", "r1", repo+":round")
	sub := filepath.Join(s.dir, name, "sub")
	os.MkdirAll(sub, 0o755)
	os.WriteFile(filepath.Join(sub, "optimizer.py"), []byte("# "+name+"\n"+sgd), 0o644)
	mustProc(t, env, "pack", "--kind", "submission", "--tag", "sub", sub)
	return env
}

// reveals lists what a validator sees of the round in the registry.
func (s *suite) reveals(t *testing.T, round, repo string) string {
	t.Helper()
	val := with(s.env, "FEVAL_STORE", filepath.Join(s.dir, fmt.Sprint("validator", time.Now().UnixNano())))
	mustProc(t, val, "init")
	return mustProc(t, val, "reveals", "--round", round, "--from", repo, "--now", "2098-01-01T00:00:00Z", "--json")
}

// TestReliabilityConcurrentCommitters has 32 miners commit to one round at the
// same moment through the CLI: every commitment must be visible to reveals.
func TestReliabilityConcurrentCommitters(t *testing.T) {
	s := newSuite(t)
	repo := s.reg.Addr + "/comp/r1"
	round := s.round(t, repo)
	miners := make([]map[string]string, committers)
	var wg sync.WaitGroup
	for i := range miners {
		miners[i] = s.miner(t, fmt.Sprint("m", i), repo)
	}
	commits := make([]string, committers)
	start := make(chan struct{})
	for i := range miners {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			o := runProc(t, miners[i], "commit", "--round", "r1", "--to", repo, filepath.Join(s.dir, fmt.Sprint("m", i), "sub"))
			if o.code != 0 {
				t.Errorf("committer %d: exit %d: %s", i, o.code, o.stderr)
			}
			commits[i] = strings.TrimSpace(o.stdout)
		}()
	}
	close(start)
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	seen := s.reveals(t, round, repo)
	lost := 0
	for _, c := range commits {
		if len(c) != 71 || !strings.Contains(seen, c) {
			lost++
		}
	}
	if lost > 0 {
		t.Fatalf("%d of %d concurrent commitments are invisible to reveals", lost, committers)
	}
	t.Logf("commit: %d concurrent committers, %d commitments discoverable", committers, committers-lost)
}

const committers = 32

// TestReliabilityKillCommit kills commit --to: the miner's store stays sound,
// and reveals lists only commitments that were pushed whole.
func TestReliabilityKillCommit(t *testing.T) {
	s := newSuite(t)
	repo := s.reg.Addr + "/comp/r1"
	round := s.round(t, repo)
	m := s.miner(t, "miner", repo)
	tree := filepath.Join(s.dir, "miner", "sub")
	max := timed(t, m, "commit", "--round", "r1", "--to", repo, tree)
	killed := 0
	for i := 0; killed < kills; i++ {
		if i > 20*kills {
			t.Fatalf("only %d of %d kills landed", killed, kills)
		}
		os.WriteFile(filepath.Join(tree, "optimizer.py"), []byte(fmt.Sprintf("# attempt %d\n%s", i, sgd)), 0o644)
		if !killer(t, max, m, "commit", "--round", "r1", "--to", repo, tree) {
			continue
		}
		killed++
		storeSound(t, m)
	}
	// Whatever the kills left in the registry, reveals works and lists sound
	// commitments only (it verifies each one it lists).
	s.reveals(t, round, repo)
	t.Logf("commit: %d kills survived", killed)
}

// sgd is a submission that passes the optimizer protocol's static gate.
const sgd = `import torch
from torch.optim import Optimizer


class SGD(Optimizer):
    def __init__(self, params, lr=0.01):
        super().__init__(params, dict(lr=lr))

    @torch.no_grad()
    def step(self, closure=None):
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is not None:
                    p.add_(p.grad, alpha=-group["lr"])
        return None
`

// TestReliabilityKillEvaluate kills a validator's evaluate --to: its store stays
// sound, and an evaluation run to the end afterwards succeeds and pushes a
// verdict that verifies.
func TestReliabilityKillEvaluate(t *testing.T) {
	s := newSuite(t)
	repo := s.reg.Addr + "/comp/r1"
	fx := filepath.Join(s.dir, "fx")
	g := rollouts.Generate([]byte(rollouts.ReferenceSeed), 20, 20)
	if err := rollouts.WriteTask(filepath.Join(fx, "task"), g.Spec, g.Items); err != nil {
		t.Fatal(err)
	}
	if _, err := rollouts.WriteMiners(filepath.Join(fx, "miners"), g, []byte(rollouts.ReferenceMinerSeed)); err != nil {
		t.Fatal(err)
	}
	task := strings.TrimSpace(mustProc(t, s.env, "task", "create", "--protocol", "rollouts", "--tag", "task", filepath.Join(fx, "task")))
	round := strings.TrimSpace(mustProc(t, s.env, "round", "open", "--task", "task", "--commit-until", "2099-01-01T00:00:00Z", "--reveal-until", "2099-01-02T00:00:00Z", "--tag", "r1"))
	mustProc(t, s.env, "push", "r1", repo+":round")

	miner := with(s.env, "FEVAL_STORE", filepath.Join(s.dir, "miner"), "FEVAL_KEY", filepath.Join(s.dir, "keys", "miner.key"))
	mustProc(t, miner, "init")
	mustProc(t, miner, "key", "generate")
	mustProc(t, miner, "pull", "--tag", "r1", repo+":round")
	commit := strings.TrimSpace(mustProc(t, miner, "commit", "--round", "r1", "--to", repo, filepath.Join(fx, "miners", "honest")))

	val := with(s.env, "FEVAL_STORE", filepath.Join(s.dir, "validator"), "FEVAL_KEY", filepath.Join(s.dir, "keys", "validator.key"))
	mustProc(t, val, "init")
	mustProc(t, val, "key", "generate")
	mustProc(t, val, "reveals", "--round", round, "--from", repo, "--now", "2098-12-31T18:00:00Z")
	reveal := strings.TrimSpace(mustProc(t, miner, "reveal", "--now", "2099-01-01T06:00:00Z", "--to", repo, commit))

	args := []string{"evaluate", "--full", "--task", task, "--from", repo, "--to", repo, "--now", "2099-01-01T06:00:00Z", "--beacon", "b1", "--beacon-source", "drand:test:1", reveal}
	max := timed(t, val, args...)
	killed := 0
	for i := 0; killed < kills; i++ {
		if i > 20*kills {
			t.Fatalf("only %d of %d kills landed", killed, kills)
		}
		if !killer(t, max, val, args...) {
			continue
		}
		killed++
		storeSound(t, val)
	}
	verdict := strings.TrimSpace(mustProc(t, val, args...))
	if verdict == "" {
		t.Fatal("evaluate printed no verdict")
	}
	t.Logf("evaluate: %d kills survived", killed)
}
