package strictjson

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

type inner struct {
	Round uint64 `json:"round"`
}

type Base struct {
	Kind string `json:"kind"`
}

type record struct {
	Base
	Miner  string            `json:"miner"`
	Salt   string            `json:"salt,omitempty"`
	Inner  *inner            `json:"inner,omitempty"`
	List   []inner           `json:"list,omitempty"`
	Labels map[string]inner  `json:"labels,omitempty"`
	Any    any               `json:"any,omitempty"`
	Raw    json.RawMessage   `json:"raw,omitempty"`
	Skip   string            `json:"-"`
	Free   map[string]string `json:"free,omitempty"`
}

func TestDecode(t *testing.T) {
	good := []string{
		`{"miner":"a"}`,
		`{"kind":"k","miner":"a","inner":{"round":3},"list":[{"round":1}],"labels":{"Any Name":{"round":2}}}`,
		`{"any":{"Whatever":1,"x":[{"Y":2}]},"raw":{"Free":1},"free":{"UPPER":"ok"}}`,
		" {\"miner\" : \"a\"}\n",
	}
	for _, s := range good {
		var r record
		if err := Decode([]byte(s), &r); err != nil {
			t.Errorf("%s: %v", s, err)
		}
	}
	var r record
	if err := Decode([]byte(`{"any":{"n":12345678901234567890}}`), &r); err != nil {
		t.Fatal(err)
	}
	if n, ok := r.Any.(map[string]any)["n"].(json.Number); !ok || n.String() != "12345678901234567890" {
		t.Errorf("number in an interface value decoded as %#v", r.Any)
	}

	bad := map[string]string{
		"case of a field":           `{"Miner":"a"}`,
		"case of a nested field":    `{"inner":{"Round":1}}`,
		"case in a list element":    `{"list":[{"round":1},{"ROUND":2}]}`,
		"case in a map value":       `{"labels":{"x":{"Round":2}}}`,
		"case of an embedded field": `{"Kind":"k"}`,
		"unknown field":             `{"miner":"a","extra":1}`,
		"the Go name of a field":    `{"Skip":"x"}`,
		"a tagged-out field":        `{"-":"x"}`,
		"duplicate names":           `{"miner":"a","miner":"b"}`,
		"duplicate in any":          `{"any":{"a":1,"a":2}}`,
		"both spellings":            `{"miner":"a","Miner":"b"}`,
		"trailing data":             `{"miner":"a"} {}`,
		"wrong type":                `{"miner":1}`,
		"invalid UTF-8":             "{\"miner\":\"\xff\"}",
		"truncated":                 `{"miner":"a"`,
		"deep":                      `{"any":` + strings.Repeat("[", 70) + strings.Repeat("]", 70) + `}`,
	}
	for name, s := range bad {
		var r record
		err := Decode([]byte(s), &r)
		if err == nil {
			t.Errorf("%s: %s was accepted", name, s)
			continue
		}
		if !errors.Is(err, ErrStrict) {
			t.Errorf("%s: error %v is not ErrStrict", name, err)
		}
	}
	var r2 record
	err := Decode([]byte(`{"inner":{"Round":1}}`), &r2)
	if err == nil || !strings.Contains(err.Error(), `inner.Round: unknown field "Round": field names are case-sensitive, the field is "round"`) {
		t.Errorf("error %v does not name the path and the field", err)
	}
}

// FuzzDecode: Decode never panics, and whatever it accepts encoding/json
// accepts too, with the same result.
func FuzzDecode(f *testing.F) {
	for _, s := range []string{`{"miner":"a"}`, `{"Miner":"a"}`, `{"inner":{"round":1},"list":[{"round":2}]}`, `{"any":[1,{"a":null}]}`, `[]`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var r record
		if Decode(b, &r) != nil {
			return
		}
		var r2 record
		if err := json.Unmarshal(b, &r2); err != nil {
			t.Fatalf("%q: strict decode accepted what encoding/json refuses: %v", b, err)
		}
	})
}
