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
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/hookline/hookline/providers"
	"github.com/tidwall/gjson"
)

// Matcher is a compiled filter. The nil Matcher matches every event.
type Matcher struct {
	types []string // globs: '*' matches any run of characters, dots included
	where []condition
}

type condition struct {
	path string // a gjson path read literally (providers.JSONPath)
	want any    // the value, decoded by decodeJSON (numbers as json.Number)
}

// CompileError names the filter field that is wrong ("types[1]",
// "where.data.id").
type CompileError struct {
	Field, Msg string
}

func (e *CompileError) Error() string { return e.Field + ": " + e.Msg }

// Compile builds the filter of types (globs; none: every type) and where
// (JSON path → value; none: every body). A path is read literally
// (providers.JSONPath). Values are compared as JSON (jsonEqual): 1 and 1.0
// are equal, large integers exactly, and objects compare by their members,
// not their order.
//
// An empty list or map given (not nil) is an error: written out, it reads
// as "no type" or "no condition", which no event would ever pass.
func Compile(types []string, where map[string]any) (*Matcher, *CompileError) {
	if types != nil && len(types) == 0 {
		return nil, &CompileError{"types", "empty list: remove types to match every event type"}
	}
	if where != nil && len(where) == 0 {
		return nil, &CompileError{"where", "empty: remove where to match every body"}
	}
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
		v, err := normalize(where[p])
		if err != nil {
			return nil, &CompileError{"where." + p, err.Error()}
		}
		raw, err := json.Marshal(v)
		if err != nil {
			return nil, &CompileError{"where." + p, fmt.Sprintf("value cannot be written as JSON: %v", err)}
		}
		want, err := decodeJSON(raw)
		if err != nil {
			return nil, &CompileError{"where." + p, err.Error()}
		}
		m.where = append(m.where, condition{path: providers.JSONPath(p), want: want})
	}
	return m, nil
}

// errYAMLTime refuses a YAML timestamp: YAML reads an unquoted 2026-01-01
// as a time, which would be compared as "2026-01-01T00:00:00Z" and never
// equal the text a body carries.
var errYAMLTime = errors.New(`a YAML date or time: quote it ("2026-01-01") to compare it as the text the body carries`)

// normalize turns YAML-decoded maps (map[string]any with nested
// map[any]any) into values encoding/json can write, refusing a YAML
// timestamp anywhere in v (errYAMLTime).
func normalize(v any) (any, error) {
	var err error
	switch x := v.(type) {
	case time.Time:
		return nil, errYAMLTime
	case map[any]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			if out[fmt.Sprint(k)], err = normalize(e); err != nil {
				return nil, err
			}
		}
		return out, nil
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			if out[k], err = normalize(e); err != nil {
				return nil, err
			}
		}
		return out, nil
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			if out[i], err = normalize(e); err != nil {
				return nil, err
			}
		}
		return out, nil
	}
	return v, nil
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
		got, err := decodeJSON([]byte(r.Raw))
		if err != nil || !jsonEqual(got, c.want) {
			return false
		}
	}
	return true
}

// decodeJSON decodes one JSON value, numbers as json.Number so that they
// compare exactly (jsonEqual), not as float64.
func decodeJSON(raw []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	return v, nil
}

// jsonEqual is JSON equality of two decodeJSON values: numbers by their
// exact value (1, 1.0 and 1e0 are equal; 9007199254740993 and
// 9007199254740992 are not), strings by their text, arrays element by
// element, objects member by member whatever their order.
func jsonEqual(a, b any) bool {
	switch x := a.(type) {
	case json.Number:
		y, ok := b.(json.Number)
		if !ok {
			return false
		}
		cx, okx := canonicalNumber(string(x))
		cy, oky := canonicalNumber(string(y))
		if !okx || !oky {
			return x == y
		}
		return cx == cy
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for i := range x {
			if !jsonEqual(x[i], y[i]) {
				return false
			}
		}
		return true
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for k, v := range x {
			w, ok := y[k]
			if !ok || !jsonEqual(v, w) {
				return false
			}
		}
		return true
	}
	return a == b // string, bool, nil
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

// number is a JSON number's exact value: sign, significant digits (no
// leading or trailing zeros; "" for zero) and the power of ten they are
// multiplied by.
type number struct {
	neg    bool
	digits string
	exp    int64
}

// canonicalNumber reads a JSON number (-?int(.frac)?([eE][+-]?exp)?)
// without arithmetic on its value, so a huge exponent costs nothing. ok is
// false for what is not a JSON number or whose exponent does not fit 15
// digits (such numbers then compare by their text).
func canonicalNumber(s string) (n number, ok bool) {
	if strings.HasPrefix(s, "-") {
		n.neg, s = true, s[1:]
	}
	mant, expText, hasExp := strings.Cut(strings.ToLower(s), "e")
	intPart, frac, _ := strings.Cut(mant, ".")
	if intPart == "" || !allDigits(intPart) || !allDigits(frac) {
		return number{}, false
	}
	if hasExp {
		t := strings.TrimLeft(expText, "+-")
		if t == "" || len(t) > 15 || !allDigits(t) {
			return number{}, false
		}
		e, err := strconv.ParseInt(expText, 10, 64)
		if err != nil {
			return number{}, false
		}
		n.exp = e
	}
	digits := strings.TrimLeft(intPart+frac, "0")
	n.exp -= int64(len(frac))
	trimmed := strings.TrimRight(digits, "0")
	n.exp += int64(len(digits) - len(trimmed))
	n.digits = trimmed
	if n.digits == "" {
		return number{}, true // zero, whatever its sign and exponent
	}
	return n, true
}

func allDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}
