package policy

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/feval/feval/gate"
)

// Form is a pack's policy form.
type Form string

// The three policy forms.
const (
	FormJSON   Form = "policy.json"
	FormPython Form = "policy.py"
	FormServer Form = "server"
)

// ErrPack is wrapped by every error LoadPack returns for a pack that breaks
// the scenarios gate.
var ErrPack = errors.New("invalid scenario pack")

// Pack is a gated scenario pack on disk.
type Pack struct {
	// Dir is the pack's absolute directory.
	Dir string
	// Form is the policy form the pack holds.
	Form Form
	// Policy is the parsed policy.json (FormJSON only).
	Policy *gate.Policy
	// Server is the parsed server.json (FormServer only).
	Server *gate.ServerEntry
	// Models is the allowlist the pack was gated against.
	Models []string
}

// LoadPack reads the pack in dir and runs the scenarios gate over it with the
// allowlisted models; a pack with violations is refused with an error
// wrapping ErrPack that lists them.
func LoadPack(dir string, models []string) (*Pack, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("pack %s: %w", dir, err)
	}
	vs, err := gate.Scenarios(os.DirFS(abs), models, gate.ScenarioLimits{})
	if err != nil {
		return nil, fmt.Errorf("pack %s: %w", dir, err)
	}
	if len(vs) > 0 {
		lines := make([]string, len(vs))
		for i, v := range vs {
			lines[i] = v.String()
		}
		return nil, fmt.Errorf("%w %s: %s", ErrPack, dir, strings.Join(lines, "; "))
	}
	p := &Pack{Dir: abs, Models: append([]string(nil), models...)}
	switch {
	case exists(filepath.Join(abs, gate.PolicyFile)):
		p.Form = FormJSON
		data, err := os.ReadFile(filepath.Join(abs, gate.PolicyFile))
		if err != nil {
			return nil, fmt.Errorf("pack %s: %w", dir, err)
		}
		p.Policy, _ = gate.ParsePolicy(data, models)
	case exists(filepath.Join(abs, gate.PolicyCodeFile)):
		p.Form = FormPython
	default:
		p.Form = FormServer
		data, err := os.ReadFile(filepath.Join(abs, gate.ServerFile))
		if err != nil {
			return nil, fmt.Errorf("pack %s: %w", dir, err)
		}
		p.Server, _ = gate.ParseServerEntry(data)
	}
	return p, nil
}

func exists(p string) bool {
	_, err := os.Lstat(p)
	return err == nil
}
