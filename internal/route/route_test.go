package route

import (
	"regexp"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"
)

func TestGlob(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		pattern, s string
		want       bool
	}{
		{"invoice.*", "invoice.paid", true},
		{"invoice.*", "invoice.payment.failed", true},
		{"invoice.*", "invoiceitem.created", false},
		{"invoice.*", "invoice", false},
		{"invoice.*", "invoice.", true},
		{"*", "", true},
		{"*", "anything.at.all", true},
		{"customer.subscription.*", "customer.subscription.updated", true},
		{"customer.subscription.*", "customer.created", false},
		{"*.succeeded", "payment_intent.succeeded", true},
		{"*.succeeded", "payment_intent.succeeded.later", false},
		{"charge.refunded", "charge.refunded", true},
		{"charge.refunded", "charge.refunded.x", false},
		{"a*b*c", "aXbYc", true},
		{"a*b*c", "aXbY", false},
		{"", "", true},
		{"", "x", false},
	} {
		require.Equal(t, tc.want, Glob(tc.pattern, tc.s), "%q ~ %q", tc.pattern, tc.s)
	}
}

// FuzzGlob checks Glob against a regular expression built from the pattern.
func FuzzGlob(f *testing.F) {
	for _, s := range [][2]string{{"invoice.*", "invoice.paid"}, {"a*b*c", "aXbYc"}, {"**", ""}, {"*.x", "a.x.x"}, {"\xad", ""}} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, pattern, s string) {
		if len(pattern) > 64 || len(s) > 256 {
			return
		}
		if !utf8.ValidString(pattern) || !utf8.ValidString(s) {
			// The regexp oracle only speaks UTF-8; Glob is byte-wise, so a
			// pattern still matches itself.
			if !Glob(pattern, pattern) {
				t.Fatalf("Glob(%q, itself) = false", pattern)
			}
			return
		}
		parts := strings.Split(pattern, "*")
		for i, p := range parts {
			parts[i] = regexp.QuoteMeta(p)
		}
		re := regexp.MustCompile(`(?s)\A` + strings.Join(parts, ".*") + `\z`)
		if got, want := Glob(pattern, s), re.MatchString(s); got != want {
			t.Fatalf("Glob(%q, %q) = %v, the regexp says %v", pattern, s, got, want)
		}
	})
}

func compileYAML(t *testing.T, src string) *Matcher {
	t.Helper()
	var cfg struct {
		Types []string       `yaml:"types"`
		Where map[string]any `yaml:"where"`
	}
	require.NoError(t, yaml.Unmarshal([]byte(src), &cfg))
	m, err := Compile(cfg.Types, cfg.Where)
	require.Nil(t, err)
	return m
}

func TestMatch(t *testing.T) {
	t.Parallel()
	body := []byte(`{"type":"invoice.paid","data":{"object":{"livemode":true,"amount":1000,"currency":"usd","metadata":{"a":1,"b":[1,2]}}},"nothing":null,` +
		`"odd":{"a*b?c#d|e@f":1},"big":9007199254740993,"zero":-0.0e5,"huge":1e999999999999}`)
	for _, tc := range []struct {
		filter string
		typ    string
		want   bool
	}{
		{``, "anything", true},
		{`types: ["invoice.*"]`, "invoice.paid", true},
		{`types: ["invoice.*", "charge.*"]`, "charge.refunded", true},
		{`types: ["invoice.*"]`, "invoiceitem.created", false},
		{`where: {"data.object.livemode": true}`, "x", true},
		{`where: {"data.object.livemode": false}`, "x", false},
		{`where: {"data.object.amount": 1000}`, "x", true},
		{`where: {"data.object.amount": 1000.0}`, "x", true},
		{`where: {"data.object.amount": "1000"}`, "x", false},
		{`where: {"data.object.currency": usd}`, "x", true},
		{`where: {"data.object.metadata": {b: [1, 2], a: 1}}`, "x", true},
		{`where: {"data.object.metadata": {a: 1}}`, "x", false},
		{`where: {"nothing": null}`, "x", true},
		{`where: {"absent": null}`, "x", false},
		{`where: {"data.object.livemode": true, "data.object.currency": eur}`, "x", false},
		{`{types: ["invoice.*"], where: {"data.object.livemode": true}}`, "invoice.paid", true},
		{`{types: ["invoice.*"], where: {"data.object.livemode": true}}`, "charge.paid", false},
		// Paths are literal: no wildcards, counts or modifiers.
		{`where: {"data.object.livem?de": true}`, "x", false},
		{`where: {"data.object.*": true}`, "x", false},
		{`where: {"data.object.metadata.b.#": 2}`, "x", false},
		{`where: {"data.object.metadata.b.1": 2}`, "x", true},
		{`where: {"odd.a*b?c#d|e@f": 1}`, "x", true},
		// Numbers compare exactly, whatever their spelling.
		{`where: {"big": 9007199254740993}`, "x", true},
		{`where: {"big": 9007199254740992}`, "x", false},
		{`where: {"data.object.amount": 1e3}`, "x", true},
		{`where: {"data.object.amount": 1000.5}`, "x", false},
		{`where: {"zero": 0}`, "x", true},
		{`where: {"huge": 1}`, "x", false},
	} {
		m := compileYAML(t, tc.filter)
		require.Equal(t, tc.want, m.Match(tc.typ, body), "%s on %s", tc.filter, tc.typ)
	}
	require.False(t, compileYAML(t, `where: {"a": 1}`).Match("x", []byte("a=1")), "a body that is not JSON matches no where")
	require.True(t, compileYAML(t, `types: ["x"]`).Match("x", []byte("a=1")), "types alone need no JSON")
}

func TestCompileErrors(t *testing.T) {
	t.Parallel()
	_, err := Compile([]string{"ok", " "}, nil)
	require.Equal(t, "types[1]", err.Field)
	_, err = Compile(nil, map[string]any{"": 1})
	require.Equal(t, "where", err.Field)
	_, err = Compile(nil, map[string]any{"a": func() {}})
	require.Equal(t, "where.a", err.Field)
	_, err = Compile([]string{}, nil)
	require.Equal(t, "types", err.Field, "an empty list would match nothing")
	_, err = Compile(nil, map[string]any{})
	require.Equal(t, "where", err.Field)
}

// An unquoted YAML date in where is decoded as a timestamp, which would
// compare as "2026-01-01T00:00:00Z" and never match: an error naming the
// path, which says to quote it.
func TestCompileRefusesYAMLTimestamps(t *testing.T) {
	t.Parallel()
	day := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, v := range []any{day, []any{"x", day}, map[string]any{"at": day}, map[any]any{"at": []any{day}}} {
		_, err := Compile(nil, map[string]any{"data.created": v})
		require.NotNil(t, err, "%v", v)
		require.Equal(t, "where.data.created", err.Field)
		require.Contains(t, err.Msg, "quote it")
	}
	m, err := Compile(nil, map[string]any{"data.created": "2026-01-01"})
	require.Nil(t, err)
	require.True(t, m.Match("", []byte(`{"data":{"created":"2026-01-01"}}`)))
}

func TestCanonicalNumber(t *testing.T) {
	t.Parallel()
	same := [][]string{
		{"1", "1.0", "1e0", "10e-1", "0.1e1", "1.000"},
		{"0", "-0", "0.0", "0e99", "-0.0e-5"},
		{"-12.5", "-125e-1", "-0.125E2", "-1.25e+1"},
		{"9007199254740993", "9.007199254740993e15"},
	}
	for _, group := range same {
		for _, s := range group {
			a, ok := canonicalNumber(group[0])
			require.True(t, ok, group[0])
			b, ok := canonicalNumber(s)
			require.True(t, ok, s)
			require.Equal(t, a, b, "%s and %s", group[0], s)
		}
	}
	for _, pair := range [][2]string{{"9007199254740993", "9007199254740992"}, {"1", "-1"}, {"1e2", "1e3"}, {"0.1", "0.01"}} {
		a, _ := canonicalNumber(pair[0])
		b, _ := canonicalNumber(pair[1])
		require.NotEqual(t, a, b, "%s and %s", pair[0], pair[1])
	}
	_, ok := canonicalNumber("1e1234567890123456")
	require.False(t, ok, "an exponent past 15 digits compares by text")
}

func FuzzMatch(f *testing.F) {
	f.Add("invoice.*", "data.id", `{"data":{"id":"x"}}`, `"x"`)
	f.Add("*", "a.b", `[1,2]`, `1`)
	f.Fuzz(func(t *testing.T, glob, path, body, value string) {
		var v any
		if err := yaml.Unmarshal([]byte(value), &v); err != nil {
			return
		}
		m, cerr := Compile([]string{glob}, map[string]any{path: v})
		if cerr != nil {
			return
		}
		_ = m.Match("invoice.paid", []byte(body)) // never panics
	})
}
