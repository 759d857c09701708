package jsonschema

import (
	"encoding/json"
	"strings"
	"testing"
)

const schema = `{
  "$defs": {"rank": {"type": "integer", "minimum": 0}},
  "type": "object",
  "required": ["name", "ranks"],
  "additionalProperties": false,
  "properties": {
    "name": {"type": "string", "pattern": "^[a-z]+$"},
    "kind": {"enum": ["pass", "fail"]},
    "version": {"const": 1},
    "ranks": {"type": "array", "items": {"$ref": "#/$defs/rank"}}
  }
}`

func decode(t *testing.T, s string) any {
	t.Helper()
	var v any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatal(err)
	}
	return v
}

func TestValidate(t *testing.T) {
	sc := decode(t, schema)
	for _, tc := range []struct {
		doc  string
		want string // substring of the first violation; "" for valid
	}{
		{`{"name": "weft", "ranks": [0, 3], "kind": "pass", "version": 1}`, ""},
		{`{"ranks": []}`, `missing "name"`},
		{`{"name": "Weft", "ranks": []}`, "does not match"},
		{`{"name": "weft", "ranks": [-1]}`, "below the minimum"},
		{`{"name": "weft", "ranks": [1.5]}`, "is not a JSON integer"},
		{`{"name": "weft", "ranks": [], "kind": "maybe"}`, "is not one of"},
		{`{"name": "weft", "ranks": [], "version": 2}`, "want 1"},
		{`{"name": "weft", "ranks": [], "extra": true}`, `property "extra" is not in the schema`},
		{`[]`, "is not a JSON object"},
	} {
		errs := Validate(sc, decode(t, tc.doc))
		switch {
		case tc.want == "" && len(errs) > 0:
			t.Errorf("%s: unexpected violations %v", tc.doc, errs)
		case tc.want != "" && (len(errs) == 0 || !strings.Contains(errs[0], tc.want)):
			t.Errorf("%s: violations %v, want one containing %q", tc.doc, errs, tc.want)
		}
	}
}
