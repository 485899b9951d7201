package main

import (
	"fmt"
	"reflect"
	"regexp"
	"strings"
	"testing"
)

// snakeCase is the one spelling of feval's own JSON field names.
var snakeCase = regexp.MustCompile(`^[a-z][a-z0-9]*(_[a-z0-9]+)*$`)

// foreignPackages define JSON of their own standards; no command prints them
// (an OCI descriptor prints as cas.Descriptor).
var foreignPackages = []string{"github.com/opencontainers/", "github.com/sigstore/"}

// outputField is one field of a command's --json output.
type outputField struct {
	command string
	owner   reflect.Type // the struct that declares it
	name    string       // its Go name
	tag     string       // its JSON name
	typ     reflect.Type
}

// outputFields calls fn with every field, at any depth, of every command's
// --json output types, and with every foreign struct reached (fn's owner nil).
func outputFields(fn func(outputField)) {
	for cmd, forms := range outputTypes {
		seen := map[reflect.Type]bool{}
		var walk func(typ reflect.Type)
		walk = func(typ reflect.Type) {
			for typ.Kind() == reflect.Pointer || typ.Kind() == reflect.Slice || typ.Kind() == reflect.Array || typ.Kind() == reflect.Map {
				typ = typ.Elem()
			}
			if typ == verdictIface {
				for _, v := range verdictTypes {
					walk(reflect.TypeOf(v))
				}
			}
			if typ.Kind() != reflect.Struct || seen[typ] || encodesItself(typ) {
				return
			}
			seen[typ] = true
			for _, p := range foreignPackages {
				if strings.HasPrefix(typ.PkgPath(), p) {
					fn(outputField{command: cmd, typ: typ})
					return
				}
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
					walk(f.Type)
					continue
				}
				fn(outputField{cmd, typ, f.Name, tag, f.Type})
				walk(f.Type)
			}
		}
		for _, v := range forms {
			walk(reflect.TypeOf(v))
		}
	}
}

// encodesItself: a type with its own JSON or text form (a descriptor, a ratio
// as a string, a raw record).
func encodesItself(t reflect.Type) bool {
	for _, i := range []reflect.Type{marshalerType, textMarshaler} {
		if t.Implements(i) || reflect.PointerTo(t).Implements(i) {
			return true
		}
	}
	return false
}

// TestJSONFieldNamesAreSnakeCase: every field of every --json result, at any
// depth, has an explicit snake_case name, and no command prints a structure
// of another standard with its own spelling (docs/FORMAT.md section 5).
func TestJSONFieldNamesAreSnakeCase(t *testing.T) {
	outputFields(func(f outputField) {
		switch {
		case f.owner == nil:
			t.Errorf("%s: prints %s in its standard's spelling: convert it (an OCI descriptor to cas.Descriptor)", f.command, f.typ)
		case f.tag == "":
			t.Errorf("%s: %s.%s has no json name (would print %q)", f.command, f.owner, f.name, f.name)
		case !snakeCase.MatchString(f.tag):
			t.Errorf("%s: %s.%s is %q, not snake_case", f.command, f.owner, f.name, f.tag)
		}
	})
}

// jsonKind is the JSON type a Go type prints as: string, number, boolean,
// object, "array of" another kind, or "" for anything (a raw record).
func jsonKind(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch {
	case t == descriptorType:
		return "object"
	case t.Implements(textMarshaler) || reflect.PointerTo(t).Implements(textMarshaler):
		return "string"
	case encodesItself(t) || t.Kind() == reflect.Interface:
		return ""
	}
	switch t.Kind() {
	case reflect.String:
		return "string"
	case reflect.Bool:
		return "boolean"
	case reflect.Struct, reflect.Map:
		return "object"
	case reflect.Slice, reflect.Array:
		return "array of " + jsonKind(t.Elem())
	default:
		return "number"
	}
}

// sameNameExceptions are the JSON names that mean different things in
// different places, each with why it cannot change.
var sameNameExceptions = map[string]string{
	"incumbent": "consensus records, format 1: inputs.incumbent is the seat before the round (an object), seat.incumbent its holder's submission (a string)",
	"round":     "a drand beacon's round number, in drand's own spelling, beside feval's round digests",
	"seed":      "verdict records, format 1: an optimizer run's seed is a number, a rollouts audit's seed the hex of its bytes",
	"rows":      "rollouts verdicts, format 1: rows is the submission's row count; a leaderboard's rows are its lines",
}

// TestJSONFieldTypesAgree: one JSON name has one JSON type in every command's
// output (a submission is a digest string everywhere, an artifact a
// descriptor object everywhere).
func TestJSONFieldTypesAgree(t *testing.T) {
	kinds := map[string]map[string]string{} // name -> kind -> where
	outputFields(func(f outputField) {
		k := jsonKind(f.typ)
		if f.owner == nil || k == "" || sameNameExceptions[f.tag] != "" {
			return
		}
		if kinds[f.tag] == nil {
			kinds[f.tag] = map[string]string{}
		}
		kinds[f.tag][k] = fmt.Sprintf("%s (%s.%s)", f.command, f.owner, f.name)
	})
	for name, ks := range kinds {
		if len(ks) > 1 {
			t.Errorf("%q has %d JSON types: %v", name, len(ks), ks)
		}
	}
}

var marshalerType = reflect.TypeOf((*interface{ MarshalJSON() ([]byte, error) })(nil)).Elem()
