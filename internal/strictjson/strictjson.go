// Package strictjson decodes JSON into Go values the way feval's formats are
// specified, which encoding/json alone does not: object member names match
// field names exactly (encoding/json matches them case-insensitively, so
// "Miner" would fill the field "miner"), a name that matches no field is
// refused, no object has a name twice, and nothing follows the value.
//
// It is the one decoder of every feval record and input file: bundle's
// canonical records, the gates' JSON files, task files, stake tables and rules
// all go through Decode; their own rules (canonical bytes, key spelling, size)
// are layered on top.
package strictjson

import (
	"bytes"
	"encoding"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"
	"sync"
	"unicode/utf8"
)

// ErrStrict is wrapped by every error Decode returns for data that does not
// have the required form.
var ErrStrict = errors.New("not strict JSON for this record")

// Error is a decoding failure at a path in the document ("audit.rows[3]");
// for a value of the wrong type, Offset is the byte offset after it (else 0).
type Error struct {
	Path   string
	Msg    string
	Offset int64
}

func (e *Error) Error() string {
	if e.Path == "" {
		return e.Msg
	}
	return e.Path + ": " + e.Msg
}

// Unwrap makes every *Error an ErrStrict.
func (e *Error) Unwrap() error { return ErrStrict }

// MaxDepth bounds the nesting of a document.
const MaxDepth = 64

// Decode decodes data, one JSON value, into v (a non-nil pointer). Beyond
// encoding/json's checks it requires valid UTF-8, every object member name to
// be exactly the JSON name of a field of the target struct (case-sensitive;
// maps and interface values take any name), no duplicate names, nesting of at
// most MaxDepth, and nothing but whitespace after the value. Numbers decoded
// into interface values are json.Number. Values of types with their own
// UnmarshalJSON are checked only for duplicates and depth.
func Decode(data []byte, v any) error {
	rv := reflect.ValueOf(v)
	if rv.Kind() != reflect.Pointer || rv.IsNil() {
		return fmt.Errorf("strictjson: Decode needs a non-nil pointer, not %T", v)
	}
	if !utf8.Valid(data) {
		return &Error{Msg: "not valid UTF-8"}
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if err := check(dec, rv.Type().Elem(), "", 0); err != nil {
		return err
	}
	if _, err := dec.Token(); err != io.EOF {
		return &Error{Msg: "data after the JSON value"}
	}
	dec = json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return &Error{Path: te.Field, Msg: fmt.Sprintf("%s value where %s is expected", te.Value, te.Type), Offset: te.Offset}
		}
		return &Error{Msg: err.Error()}
	}
	return nil
}

var (
	jsonUnmarshaler = reflect.TypeFor[json.Unmarshaler]()
	textUnmarshaler = reflect.TypeFor[encoding.TextUnmarshaler]()
)

// opaque reports whether t decodes itself, so its members cannot be checked
// against fields.
func opaque(t reflect.Type) bool {
	if t == nil {
		return true
	}
	return t.Implements(jsonUnmarshaler) || reflect.PointerTo(t).Implements(jsonUnmarshaler) ||
		t.Implements(textUnmarshaler) || reflect.PointerTo(t).Implements(textUnmarshaler)
}

// check reads one value from dec and checks its member names against t (nil:
// any names).
func check(dec *json.Decoder, t reflect.Type, path string, depth int) error {
	tok, err := dec.Token()
	if err != nil {
		return &Error{Path: path, Msg: "invalid JSON: " + err.Error()}
	}
	delim, ok := tok.(json.Delim)
	if !ok {
		return nil // a scalar: encoding/json checks its type
	}
	if depth >= MaxDepth {
		return &Error{Path: path, Msg: fmt.Sprintf("nested deeper than %d levels", MaxDepth)}
	}
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t != nil && (opaque(t) || t.Kind() == reflect.Interface) {
		t = nil
	}
	switch delim {
	case '[':
		var elem reflect.Type
		if t != nil && (t.Kind() == reflect.Slice || t.Kind() == reflect.Array) {
			elem = t.Elem()
		}
		for i := 0; dec.More(); i++ {
			if err := check(dec, elem, fmt.Sprintf("%s[%d]", path, i), depth+1); err != nil {
				return err
			}
		}
		return closing(dec, path)
	case '{':
		var fields map[string]reflect.Type
		var elem reflect.Type
		if t != nil {
			switch t.Kind() {
			case reflect.Struct:
				fields = fieldsOf(t)
			case reflect.Map:
				elem = t.Elem()
			}
		}
		seen := map[string]bool{}
		for dec.More() {
			tok, err := dec.Token()
			if err != nil {
				return &Error{Path: path, Msg: "invalid JSON: " + err.Error()}
			}
			name, _ := tok.(string)
			p := name
			if path != "" {
				p = path + "." + name
			}
			if seen[name] {
				return &Error{Path: p, Msg: "duplicate member name"}
			}
			seen[name] = true
			ft := elem
			if fields != nil {
				var ok bool
				if ft, ok = fields[name]; !ok {
					return unknown(p, name, fields)
				}
			}
			if err := check(dec, ft, p, depth+1); err != nil {
				return err
			}
		}
		return closing(dec, path)
	}
	return nil
}

func closing(dec *json.Decoder, path string) error {
	if _, err := dec.Token(); err != nil {
		return &Error{Path: path, Msg: "invalid JSON: " + err.Error()}
	}
	return nil
}

func unknown(path, name string, fields map[string]reflect.Type) *Error {
	for f := range fields {
		if strings.EqualFold(f, name) {
			return &Error{Path: path, Msg: fmt.Sprintf("unknown field %q: field names are case-sensitive, the field is %q", name, f)}
		}
	}
	return &Error{Path: path, Msg: fmt.Sprintf("unknown field %q", name)}
}

var fieldCache sync.Map // reflect.Type -> map[string]reflect.Type

// fieldsOf returns the JSON member names of a struct type and their types, as
// encoding/json names them: the tag's name, else the Go name; "-" fields
// omitted; untagged embedded structs contribute their fields.
func fieldsOf(t reflect.Type) map[string]reflect.Type {
	if m, ok := fieldCache.Load(t); ok {
		return m.(map[string]reflect.Type)
	}
	m := map[string]reflect.Type{}
	addFields(t, m, 0)
	fieldCache.Store(t, m)
	return m
}

func addFields(t reflect.Type, m map[string]reflect.Type, depth int) {
	var embedded []reflect.Type
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		if f.Anonymous && name == "" {
			ft := f.Type
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				embedded = append(embedded, ft)
				continue
			}
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		if _, dup := m[name]; !dup {
			m[name] = f.Type
		}
	}
	// Fields of embedded structs come after the struct's own: the shallower
	// field wins, as in encoding/json.
	if depth < 8 {
		for _, et := range embedded {
			addFields(et, m, depth+1)
		}
	}
}
