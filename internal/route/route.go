// Package route decides which destinations an event goes to: a
// destination's filter is a list of globs on the event type and a set of
// JSON paths into the raw body, each of which must equal a value. The
// decision is taken once, at ingest.
//
// Internal: no stability promise.
package route

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"sort"
	"strings"

	"github.com/tidwall/gjson"
)

// Matcher is a compiled filter. The nil Matcher matches every event.
type Matcher struct {
	types []string // globs: '*' matches any run of characters, dots included
	where []condition
}

type condition struct {
	path string
	want any // the value, decoded as encoding/json decodes (numbers float64)
}

// CompileError names the filter field that is wrong ("types[1]",
// "where.data.id").
type CompileError struct {
	Field, Msg string
}

func (e *CompileError) Error() string { return e.Field + ": " + e.Msg }

// Compile builds the filter of types (globs; none: every type) and where
// (JSON path → value; none: every body). Values are compared as JSON: 1 and
// 1.0 are equal, and objects compare by their members, not their order.
func Compile(types []string, where map[string]any) (*Matcher, *CompileError) {
	if len(types) == 0 && len(where) == 0 {
		return nil, nil
	}
	m := &Matcher{}
	for i, t := range types {
		if strings.TrimSpace(t) == "" {
			return nil, &CompileError{fmt.Sprintf("types[%d]", i), "empty glob"}
		}
		m.types = append(m.types, t)
	}
	paths := make([]string, 0, len(where))
	for p := range where {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	for _, p := range paths {
		if strings.TrimSpace(p) == "" {
			return nil, &CompileError{"where", "empty JSON path"}
		}
		raw, err := json.Marshal(normalize(where[p]))
		if err != nil {
			return nil, &CompileError{"where." + p, fmt.Sprintf("value cannot be written as JSON: %v", err)}
		}
		var want any
		if err := json.Unmarshal(raw, &want); err != nil {
			return nil, &CompileError{"where." + p, err.Error()}
		}
		m.where = append(m.where, condition{path: p, want: want})
	}
	return m, nil
}

// normalize turns YAML-decoded maps (map[string]any with nested
// map[any]any) into values encoding/json can write.
func normalize(v any) any {
	switch x := v.(type) {
	case map[any]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[fmt.Sprint(k)] = normalize(e)
		}
		return out
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = normalize(e)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = normalize(e)
		}
		return out
	}
	return v
}

// Match reports whether an event of type eventType whose raw body is body
// passes the filter: its type matches one of the globs (if any), and every
// where path is present in the body and equal to its value. A body that is
// not JSON matches no where condition.
func (m *Matcher) Match(eventType string, body []byte) bool {
	if m == nil {
		return true
	}
	if len(m.types) > 0 {
		ok := false
		for _, g := range m.types {
			if Glob(g, eventType) {
				ok = true
				break
			}
		}
		if !ok {
			return false
		}
	}
	if len(m.where) == 0 {
		return true
	}
	if !gjson.ValidBytes(body) {
		return false
	}
	for _, c := range m.where {
		r := gjson.GetBytes(body, c.path)
		if !r.Exists() {
			return false
		}
		var got any
		dec := json.NewDecoder(bytes.NewReader([]byte(r.Raw)))
		if err := dec.Decode(&got); err != nil || !reflect.DeepEqual(got, c.want) {
			return false
		}
	}
	return true
}

// Glob reports whether s matches pattern, where '*' stands for any run of
// characters (dots included) and every other character for itself:
// "invoice.*" matches "invoice.paid" and "invoice.payment.failed", never
// "invoiceitem.created".
func Glob(pattern, s string) bool {
	// Iterative matching with one backtrack point: linear in practice,
	// O(len(pattern)·len(s)) at worst.
	p, i := 0, 0
	star, mark := -1, 0
	for i < len(s) {
		switch {
		case p < len(pattern) && pattern[p] == '*':
			star, mark = p, i
			p++
		case p < len(pattern) && pattern[p] == s[i]:
			p++
			i++
		case star >= 0:
			p = star + 1
			mark++
			i = mark
		default:
			return false
		}
	}
	for p < len(pattern) && pattern[p] == '*' {
		p++
	}
	return p == len(pattern)
}
