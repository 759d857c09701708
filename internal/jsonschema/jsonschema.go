// Package jsonschema validates JSON documents against the subset of JSON
// Schema 2020-12 that weft's documented output schemas use. It exists so
// that tests can prove a command's JSON output matches its published
// schema without a third-party validator; it is not a general validator.
package jsonschema

import (
	"fmt"
	"regexp"
	"sort"
	"strings"

	"github.com/google/go-cmp/cmp"
)

// Validate checks doc (decoded with encoding/json into any) against the
// subset of JSON Schema (2020-12) that weft's documented schemas use
// (docs/conformance/schema.json, docs/topology/schema.json): type, const, enum, required,
// properties, additionalProperties: false, items, minimum, pattern and
// local $ref. It returns every violation, with its JSON path.
func Validate(schema, doc any) []string {
	root := schema.(map[string]any)
	var errs []string
	var walk func(s map[string]any, v any, path string)
	walk = func(s map[string]any, v any, path string) {
		if ref, ok := s["$ref"].(string); ok {
			name := strings.TrimPrefix(ref, "#/$defs/")
			def, ok := root["$defs"].(map[string]any)[name].(map[string]any)
			if !ok {
				errs = append(errs, fmt.Sprintf("%s: unresolvable $ref %s", path, ref))
				return
			}
			walk(def, v, path)
			return
		}
		if c, ok := s["const"]; ok && !cmp.Equal(c, v) {
			errs = append(errs, fmt.Sprintf("%s: %v, want %v", path, v, c))
		}
		if e, ok := s["enum"].([]any); ok {
			found := false
			for _, x := range e {
				found = found || cmp.Equal(x, v)
			}
			if !found {
				errs = append(errs, fmt.Sprintf("%s: %v is not one of %v", path, v, e))
			}
		}
		if t, ok := s["type"].(string); ok && !hasType(v, t) {
			errs = append(errs, fmt.Sprintf("%s: %T is not a JSON %s", path, v, t))
			return
		}
		if m, ok := s["minimum"].(float64); ok {
			if f, ok := v.(float64); ok && f < m {
				errs = append(errs, fmt.Sprintf("%s: %v below the minimum %v", path, f, m))
			}
		}
		if p, ok := s["pattern"].(string); ok {
			if str, ok := v.(string); ok && !regexp.MustCompile(p).MatchString(str) {
				errs = append(errs, fmt.Sprintf("%s: %q does not match %s", path, str, p))
			}
		}
		if obj, ok := v.(map[string]any); ok {
			props, _ := s["properties"].(map[string]any)
			for _, r := range asStrings(s["required"]) {
				if _, ok := obj[r]; !ok {
					errs = append(errs, fmt.Sprintf("%s: missing %q", path, r))
				}
			}
			keys := make([]string, 0, len(obj))
			for k := range obj {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			for _, k := range keys {
				ps, ok := props[k].(map[string]any)
				if !ok {
					if ap, ok := s["additionalProperties"].(bool); ok && !ap {
						errs = append(errs, fmt.Sprintf("%s: property %q is not in the schema", path, k))
					}
					continue
				}
				walk(ps, obj[k], path+"."+k)
			}
		}
		if arr, ok := v.([]any); ok {
			if is, ok := s["items"].(map[string]any); ok {
				for i, x := range arr {
					walk(is, x, fmt.Sprintf("%s[%d]", path, i))
				}
			}
		}
	}
	walk(root, doc, "$")
	return errs
}

func hasType(v any, t string) bool {
	switch t {
	case "object":
		_, ok := v.(map[string]any)
		return ok
	case "array":
		_, ok := v.([]any)
		return ok
	case "string":
		_, ok := v.(string)
		return ok
	case "number":
		_, ok := v.(float64)
		return ok
	case "integer":
		f, ok := v.(float64)
		return ok && f == float64(int64(f))
	case "boolean":
		_, ok := v.(bool)
		return ok
	case "null":
		return v == nil
	}
	return false
}

func asStrings(v any) []string {
	var out []string
	for _, x := range asSlice(v) {
		if s, ok := x.(string); ok {
			out = append(out, s)
		}
	}
	return out
}

func asSlice(v any) []any { s, _ := v.([]any); return s }
