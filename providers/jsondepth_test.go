package providers_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hookline/hookline/providers"
)

// referenceDepth is the deepest nesting of arrays and objects in a valid JSON
// body, from encoding/json's token stream.
func referenceDepth(body []byte) (int, error) {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber() // a number too large for a float64 is still valid JSON
	depth, deepest := 0, 0
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			return deepest, nil
		}
		if err != nil {
			return 0, err
		}
		switch tok {
		case json.Delim('['), json.Delim('{'):
			depth++
			deepest = max(deepest, depth)
		case json.Delim(']'), json.Delim('}'):
			depth--
		}
	}
}

func nested(open, close string, depth int) string {
	return strings.Repeat(open, depth) + strings.Repeat(close, depth)
}

// objects is a valid JSON object nesting depth levels deep.
func objects(depth int) string {
	return strings.Repeat(`{"a":`, depth-1) + `{}` + strings.Repeat(`}`, depth-1)
}

func TestCheckJSONDepth(t *testing.T) {
	t.Parallel()
	limit := providers.MaxJSONDepth
	cases := []struct {
		body string
		ok   bool
	}{
		{``, true},
		{`{}`, true},
		{`"[[[["`, true},
		{nested("[", "]", limit), true},
		{nested("[", "]", limit+1), false},
		{objects(limit), true},
		{objects(limit + 1), false},
		{nested(`[{"k":`, "}]", limit/2), true},
		{strings.Repeat(`[{"k":`, limit/2) + `[]` + strings.Repeat(`}]`, limit/2), false},
		// Brackets inside strings do not count, escaped quotes do not end them.
		{`[` + strings.Repeat(`"[{"`, 100) + `]`, true},
		{`{"a":"` + strings.Repeat(`\"[`, 100) + `"}`, true},
		{`{"a":"` + strings.Repeat(`\\\"{`, 100) + `"}`, true},
		{`["\\"` + strings.Repeat(`,[`, limit) + strings.Repeat(`]`, limit) + `]`, false}, // the string ends at \\"
		{`["\\\"` + strings.Repeat(`[`, limit+1) + `"]`, true},                            // the string goes on after \"
		{`["\u005b` + strings.Repeat(`[`, limit+1) + `"]`, true},
		// Only the deepest point counts, not the total.
		{strings.Repeat(nested("[", "]", limit)+",", 1000), true},
		{strings.Repeat("[", 1<<20), false},
		// Not JSON: still one pass, no panic.
		{`"` + strings.Repeat("[", limit+1), true}, // an unterminated string
		{`\`, true},
		{`"\`, true},
		{strings.Repeat("]", 10) + nested("[", "]", limit+5), true}, // closers first lower the count
	}
	for _, c := range cases {
		err := providers.CheckJSONDepth([]byte(c.body))
		short := c.body
		if len(short) > 80 {
			short = short[:80] + "…"
		}
		if c.ok {
			require.NoError(t, err, short)
			continue
		}
		require.ErrorIs(t, err, providers.ErrTooDeep, short)
		require.ErrorIs(t, err, providers.ErrMalformed, short)
	}
	// The reference agrees on the valid ones.
	for _, c := range cases {
		if !json.Valid([]byte(c.body)) {
			continue
		}
		d, err := referenceDepth([]byte(c.body))
		require.NoError(t, err)
		require.Equal(t, c.ok, d <= limit, c.body)
	}
}

func BenchmarkCheckJSONDepth(b *testing.B) {
	body := []byte(benchJSON)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if providers.CheckJSONDepth(body) != nil {
			b.Fatal("too deep")
		}
	}
}

// FuzzCheckJSONDepth: on valid JSON, CheckJSONDepth refuses exactly the
// bodies that encoding/json's token stream finds nested deeper than
// MaxJSONDepth; on anything else it does not panic.
func FuzzCheckJSONDepth(f *testing.F) {
	f.Add(`{"a":[1,{"b":"[{\"}"}]}`)
	f.Add(nested("[", "]", providers.MaxJSONDepth))
	f.Add(nested("[", "]", providers.MaxJSONDepth+1))
	f.Add(objects(providers.MaxJSONDepth + 1))
	f.Add(`["\\",` + nested("[", "]", providers.MaxJSONDepth) + `]`)
	f.Add(`["\\\"[[[["]`)
	f.Add(`"\u005b"`)
	f.Add(benchJSON)
	f.Fuzz(func(t *testing.T, body string) {
		err := providers.CheckJSONDepth([]byte(body))
		if err != nil && !errors.Is(err, providers.ErrTooDeep) {
			t.Fatalf("unexpected error %v", err)
		}
		if !json.Valid([]byte(body)) {
			return
		}
		depth, rerr := referenceDepth([]byte(body))
		if rerr != nil {
			t.Fatalf("valid JSON, but the token stream fails: %v", rerr)
		}
		if (err == nil) != (depth <= providers.MaxJSONDepth) {
			t.Fatalf("depth %d, CheckJSONDepth: %v, for %q", depth, err, body)
		}
	})
}
