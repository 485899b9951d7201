package main

import (
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/feval/feval/bundle"
	"github.com/feval/feval/cas"
	"github.com/feval/feval/consensus"
	"github.com/feval/feval/evaluate"
	"github.com/feval/feval/protocol"
	"github.com/feval/feval/replay"
	"github.com/feval/feval/sandbox"
	"github.com/feval/feval/scoring"
)

// renderedTypes are the values commands print with --json.
var renderedTypes = map[string]any{
	"env":                             envResult{},
	"version":                         versionResult{},
	"ls":                              []lsEntry{},
	"inspect":                         inspectResult{},
	"key":                             keyResult{},
	"push, pull":                      transferResult{},
	"sample":                          sampleResult{},
	"sandbox check":                   checkResult{},
	"sandbox run":                     sandbox.Result{},
	"pack":                            bundle.Packed{},
	"unpack":                          bundle.Extracted{},
	"verify":                          bundle.Report{},
	"fsck":                            cas.FsckReport{},
	"commit":                          protocol.Committed{},
	"reveal":                          protocol.Revealed{},
	"reveals":                         protocol.RoundReport{},
	"evaluate":                        evaluate.Outcome{},
	"evaluate (several reveals)":      evaluateBatch{},
	"replay":                          replay.Result{},
	"replay (several)":                replayBatch{},
	"replay (consensus)":              consensus.ReplayResult{},
	"consensus":                       consensus.Outcome{},
	"leaderboard":                     consensus.Board{},
	"frontier":                        scoring.FrontierHistory{},
	"emission":                        scoring.Emission{},
	"task create, round open, record": ociDesc{},
}

// snakeCase is the one spelling of feval's own JSON field names.
var snakeCase = regexp.MustCompile(`^[a-z][a-z0-9]*(_[a-z0-9]+)*$`)

// foreignPackages define JSON of their own standards (OCI, Sigstore); their
// field names are kept as those standards spell them.
var foreignPackages = []string{"github.com/opencontainers/", "github.com/sigstore/"}

// TestJSONFieldNamesAreSnakeCase: every field of every --json result, at any
// depth, has an explicit snake_case name, except inside OCI and Sigstore
// structures, which keep their standards' spelling (docs/FORMAT.md).
func TestJSONFieldNamesAreSnakeCase(t *testing.T) {
	for cmd, v := range renderedTypes {
		seen := map[reflect.Type]bool{}
		var walk func(path string, typ reflect.Type)
		walk = func(path string, typ reflect.Type) {
			for typ.Kind() == reflect.Pointer || typ.Kind() == reflect.Slice || typ.Kind() == reflect.Array || typ.Kind() == reflect.Map {
				typ = typ.Elem()
			}
			if typ.Kind() != reflect.Struct || seen[typ] {
				return
			}
			seen[typ] = true
			for _, p := range foreignPackages {
				if strings.HasPrefix(typ.PkgPath(), p) {
					return
				}
			}
			if typ.Implements(marshalerType) || reflect.PointerTo(typ).Implements(marshalerType) {
				return // encodes itself (a ratio as a string, a raw record)
			}
			for i := 0; i < typ.NumField(); i++ {
				f := typ.Field(i)
				if !f.IsExported() {
					continue
				}
				tag, _, _ := strings.Cut(f.Tag.Get("json"), ",")
				if tag == "-" {
					continue
				}
				if f.Anonymous && tag == "" {
					walk(path, f.Type)
					continue
				}
				name := path + "." + f.Name
				if tag == "" {
					t.Errorf("%s: %s%s has no json name (would print %q)", cmd, typ, name, f.Name)
				} else if !snakeCase.MatchString(tag) {
					t.Errorf("%s: %s.%s is %q, not snake_case", cmd, typ, f.Name, tag)
				}
				walk(name, f.Type)
			}
		}
		walk("", reflect.TypeOf(v))
	}
}

var marshalerType = reflect.TypeOf((*interface{ MarshalJSON() ([]byte, error) })(nil)).Elem()
