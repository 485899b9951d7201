package optimizer_test

import (
	"encoding/json"
	"os/exec"
	"testing"

	"github.com/feval/feval/protocol/optimizer"
	"github.com/feval/feval/protocol/rollouts"
)

// TestDeriveAsDocumented derives a round's seeds and windows and checks them
// against a second implementation written from docs/OPTIMIZER.md §1a alone
// (Python's hashlib), for two beacons: equal beacons give equal derivations,
// another beacon other seeds and windows, all within range.
func TestDeriveAsDocumented(t *testing.T) {
	spec := optimizer.Spec{Model: optimizer.ModelSpec{Context: 8},
		Data: optimizer.DataSpec{HeldOutPoolBytes: 4 << 20, HeldOutWindows: 1000}}
	const second = `import hashlib, json, struct, sys
source, value, pool, context, n = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
root = hashlib.sha256(b"feval/optimizer/derive/v1\x00" + source.encode() + b"\x00" + value.encode()).digest()
seeds = [struct.unpack(">Q", hashlib.sha256(root + b"seed" + bytes([i])).digest()[:8])[0] >> 11 for i in range(2)]
windows = [struct.unpack(">Q", hashlib.sha256(root + b"window" + struct.pack(">Q", j)).digest()[:8])[0] % (pool - context) for j in range(n)]
print(json.dumps({"root": root.hex(), "seeds": seeds, "windows": windows}))
`
	var seen [][2]int64
	for _, b := range []rollouts.Beacon{{Source: "test:optimizer", Value: "5d41402abc4b2a76b9719d911017c592"},
		{Source: "drand:52db9ba70e0cc0f6eaf7803dd07447a1f5477735fd3f661792ba94600c84e971:1000", Value: "7d3f"}} {
		d, err := optimizer.Derive(b, spec)
		if err != nil {
			t.Fatal(err)
		}
		again, _ := optimizer.Derive(b, spec)
		if again.RootHex() != d.RootHex() || again.Seeds != d.Seeds {
			t.Fatalf("%s: two derivations differ", b.Source)
		}
		out, err := exec.Command("/usr/bin/python3", "-c", second, b.Source, b.Value, "4194304", "8", "1000").Output()
		if err != nil {
			t.Fatal(err)
		}
		var want struct {
			Root    string   `json:"root"`
			Seeds   []int64  `json:"seeds"`
			Windows []uint32 `json:"windows"`
		}
		if err := json.Unmarshal(out, &want); err != nil {
			t.Fatal(err)
		}
		if d.RootHex() != want.Root || d.Seeds[0] != want.Seeds[0] || d.Seeds[1] != want.Seeds[1] {
			t.Errorf("%s: root %s seeds %v, the documented derivation gives %s %v", b.Source, d.RootHex(), d.Seeds, want.Root, want.Seeds)
		}
		for j, w := range d.Windows {
			if w != want.Windows[j] || int64(w) >= spec.Data.HeldOutPoolBytes-8 {
				t.Fatalf("%s: window %d is %d, the documented derivation gives %d", b.Source, j, w, want.Windows[j])
			}
		}
		for _, s := range d.Seeds {
			if s < 0 || s >= 1<<53 {
				t.Errorf("seed %d out of [0, 2^53)", s)
			}
		}
		seen = append(seen, d.Seeds)
	}
	if seen[0] == seen[1] {
		t.Error("two beacons gave the same seeds")
	}
	if _, err := optimizer.Derive(rollouts.Beacon{}, spec); err == nil {
		t.Error("no beacon: derived anyway")
	}
}

// BenchmarkDerive derives the reference task's seeds and 65,536 held-out
// windows from a beacon, what every evaluation and replay of an accepted
// reveal does once (BenchmarkTraining's heldout-ms is the evaluation it
// feeds).
//
//	go test -run '^$' -bench 'BenchmarkDerive|BenchmarkTraining' -benchtime 3x ./protocol/optimizer/
func BenchmarkDerive(b *testing.B) {
	spec := optimizer.Spec{Model: optimizer.ModelSpec{Context: 8},
		Data: optimizer.DataSpec{HeldOutPoolBytes: 4 << 20, HeldOutWindows: 65536}}
	for b.Loop() {
		if _, err := optimizer.Derive(testBeacon, spec); err != nil {
			b.Fatal(err)
		}
	}
}
