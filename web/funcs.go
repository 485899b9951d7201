package web

import (
	"fmt"
	"html/template"
	"math/big"
	"net/url"
	"strings"

	"github.com/feval/feval/scoring"
	"github.com/opencontainers/go-digest"
)

var funcs = template.FuncMap{
	"short":      short,
	"ratio":      ratioText,
	"cellLabel":  cellLabel,
	"stateLabel": stateLabel,
	"usd":        usd,
	"add":        func(a, b int) int { return a + b },
	"digestOf":   func(d digest.Digest) string { return d.String() },
	"group":      func(name string, items []Linked) linkedGroup { return linkedGroup{name, items} },
	"nats":       nats,
	"pathEscape": url.PathEscape,
	"statuses": func() []scoring.CellStatus {
		return []scoring.CellStatus{scoring.CellPassed, scoring.CellInProgress, scoring.CellCarried, scoring.CellRejected}
	},
}

type linkedGroup struct {
	Name  string
	Items []Linked
}

// nats renders micro-nats as nats, exactly.
func nats(micro int64) string {
	sign := ""
	if micro < 0 {
		sign, micro = "-", -micro
	}
	return fmt.Sprintf("%s%d.%06d", sign, micro/1_000_000, micro%1_000_000)
}

// short abbreviates a digest or fingerprint to 12 hex digits.
func short(s any) string {
	var v string
	switch t := s.(type) {
	case string:
		v = t
	case digest.Digest:
		v = t.String()
	default:
		return ""
	}
	v = strings.TrimPrefix(v, "sha256:")
	if len(v) > 12 {
		return v[:12]
	}
	return v
}

// ratioText renders an exact rational with a 4-digit decimal beside it when
// it is not an integer.
func ratioText(r scoring.Ratio) string {
	s := r.String()
	if !strings.Contains(s, "/") {
		return s
	}
	return s + " (" + r.Rat().FloatString(4) + ")"
}

// rationalText renders a rational given as a canonical string the same way;
// anything else is returned as it is.
func rationalText(s string) string {
	r, ok := new(big.Rat).SetString(s)
	if !ok || !strings.Contains(s, "/") {
		return s
	}
	return s + " (" + r.FloatString(4) + ")"
}

func init() { funcs["rational"] = rationalText }

func cellLabel(s scoring.CellStatus) string {
	switch s {
	case scoring.CellPassed:
		return "Passed"
	case scoring.CellInProgress:
		return "In progress"
	case scoring.CellCarried:
		return "Carried"
	case scoring.CellRejected:
		return "Rejected"
	}
	return "—"
}

func stateLabel(s string) string {
	switch s {
	case StateCommitOpen:
		return "commits open"
	case StateRevealOpen:
		return "reveals open"
	case StateClosed:
		return "closed"
	}
	return "unknown (height windows)"
}
