package topology_test

import (
	"fmt"
	"math"
	"sort"
	"strings"
)

// validate checks doc against the subset of JSON Schema (2020-12) that
// docs/topology/schema.json uses: $ref to #/$defs/…, type (object, array,
// string, integer, number, boolean), properties, required,
// additionalProperties false, items, enum and minimum. It returns one
// message per violation, located by a JSONPath-like path.
func validate(root, schema map[string]any, doc any, at string) []string {
	if ref, ok := schema["$ref"].(string); ok {
		name, found := strings.CutPrefix(ref, "#/$defs/")
		defs, _ := root["$defs"].(map[string]any)
		target, ok := defs[name].(map[string]any)
		if !found || !ok {
			return []string{fmt.Sprintf("%s: unresolved $ref %s", at, ref)}
		}
		return validate(root, target, doc, at)
	}
	var errs []string
	if typ, ok := schema["type"].(string); ok {
		if !hasType(doc, typ) {
			return []string{fmt.Sprintf("%s: want %s, got %T", at, typ, doc)}
		}
	}
	if enum, ok := schema["enum"].([]any); ok {
		found := false
		for _, e := range enum {
			if fmt.Sprint(e) == fmt.Sprint(doc) {
				found = true
			}
		}
		if !found {
			errs = append(errs, fmt.Sprintf("%s: %q not in enum", at, fmt.Sprint(doc)))
		}
	}
	if min, ok := schema["minimum"].(float64); ok {
		if v, isNum := doc.(float64); isNum && v < min {
			errs = append(errs, fmt.Sprintf("%s: %v below minimum %v", at, v, min))
		}
	}
	switch d := doc.(type) {
	case map[string]any:
		props, _ := schema["properties"].(map[string]any)
		if req, ok := schema["required"].([]any); ok {
			for _, r := range req {
				if _, present := d[r.(string)]; !present {
					errs = append(errs, fmt.Sprintf("%s: missing required %s", at, r))
				}
			}
		}
		keys := make([]string, 0, len(d))
		for k := range d {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			sub, ok := props[k].(map[string]any)
			if !ok {
				if ap, set := schema["additionalProperties"].(bool); set && !ap {
					errs = append(errs, fmt.Sprintf("%s.%s: not in the schema", at, k))
				}
				continue
			}
			errs = append(errs, validate(root, sub, d[k], at+"."+k)...)
		}
	case []any:
		if items, ok := schema["items"].(map[string]any); ok {
			for i, x := range d {
				errs = append(errs, validate(root, items, x, fmt.Sprintf("%s[%d]", at, i))...)
			}
		}
	}
	return errs
}

func hasType(v any, typ string) bool {
	switch typ {
	case "object":
		_, ok := v.(map[string]any)
		return ok
	case "array":
		_, ok := v.([]any)
		return ok
	case "string":
		_, ok := v.(string)
		return ok
	case "boolean":
		_, ok := v.(bool)
		return ok
	case "number":
		_, ok := v.(float64)
		return ok
	case "integer":
		f, ok := v.(float64)
		return ok && f == math.Trunc(f)
	}
	return false
}
