package protocol

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/feval/feval/cas"
	"github.com/feval/feval/internal/strictjson"
	"github.com/opencontainers/go-digest"
)

// Seen is when a validator first observed an artifact: its own clock, and an
// external anchor (a block height) when one was supplied.
type Seen struct {
	Time   string `json:"time"`
	Height *int64 `json:"height,omitempty"`
}

// Observation is the clock reading at which artifacts are being observed.
type Observation struct {
	Now    time.Time
	Height *int64
}

func (o Observation) seen() Seen {
	return Seen{Time: o.Now.UTC().Format(time.RFC3339), Height: o.Height}
}

func seenPath(l *cas.Layout) string { return filepath.Join(l.Root(), cas.PrivateDir, "seen.json") }

// LoadSeen reads the validator's first-seen records.
func LoadSeen(l *cas.Layout) (map[digest.Digest]Seen, error) {
	b, err := os.ReadFile(seenPath(l))
	if errors.Is(err, fs.ErrNotExist) {
		return map[digest.Digest]Seen{}, nil
	}
	if err != nil {
		return nil, err
	}
	m := map[digest.Digest]Seen{}
	if err := strictjson.Decode(b, &m); err != nil {
		return nil, fmt.Errorf("first-seen records %s: %w: %v", seenPath(l), ErrDamaged, err)
	}
	return m, nil
}

// Observe records obs as the first-seen time of every digest not seen before, and
// returns the full record. Earlier records are never changed. The file is merged
// and replaced under the store lock.
func Observe(l *cas.Layout, ds []digest.Digest, obs Observation) (map[digest.Digest]Seen, error) {
	unlock, err := l.LockExclusive()
	if err != nil {
		return nil, err
	}
	defer unlock()
	m, err := LoadSeen(l)
	if err != nil {
		return nil, err
	}
	changed := false
	for _, d := range ds {
		if _, ok := m[d]; !ok {
			m[d] = obs.seen()
			changed = true
		}
	}
	if !changed {
		return m, nil
	}
	if err := os.MkdirAll(filepath.Dir(seenPath(l)), 0o700); err != nil {
		return nil, err
	}
	b, err := json.MarshalIndent(m, "", " ")
	if err != nil {
		return nil, err
	}
	return m, cas.WriteFileAtomic(seenPath(l), b)
}

// within reports whether s is at or before the window's end. A height window
// needs a height anchor; without one it is not met.
func within(s Seen, w Window) bool {
	if w.Kind == "height" {
		return s.Height != nil && *s.Height <= w.Height
	}
	return s.Time <= w.Time
}
