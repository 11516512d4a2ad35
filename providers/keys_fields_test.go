package providers

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"
	"github.com/tidwall/gjson"
)

// slowFields is JSONFields by gjson paths, one walk per path: the reference
// for the one-walk road.
func slowFields(body []byte, paths ...string) []string {
	res := gjson.GetManyBytes(body, paths...)
	out := make([]string, len(res))
	for i, v := range res {
		out[i] = jsonValue(v)
	}
	return out
}

func TestJSONFieldsOneWalk(t *testing.T) {
	for _, body := range []string{
		`{"id":"evt_1","object":"event","type":"charge.succeeded","created":1764504000,"data":{"object":{"id":"ch_1","type":"inner"}}}`,
		`{"data":{"id":"inner"},"type":null,"id":"evt_2"}`,
		`{"id":"first","id":"second","type":"t"}`,
		`{"\u0069d":"escaped key","type":"t"}`,
		`{"id":12.50,"type":true,"created":"x"}`,
		`{"type":"only"}`,
		`[{"id":"in an array"}]`,
		`"a string"`,
		`{}`,
	} {
		for _, paths := range [][]string{{"id", "type", "created"}, {"type"}, {"id", "id"}, {"data.id", "id"}} {
			got, err := JSONFields([]byte(body), paths...)
			require.NoError(t, err, body)
			require.Equal(t, slowFields([]byte(body), paths...), got, "%s %v", body, paths)
		}
	}
	_, err := JSONFields([]byte(`{"id":`), "id")
	require.ErrorIs(t, err, ErrMalformed)
}

func FuzzJSONFields(f *testing.F) {
	f.Add([]byte(`{"id":"evt_1","type":"t","created":1,"data":{"id":"x"}}`))
	f.Add([]byte(`{"id":"a","id":"b"}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		if !gjson.ValidBytes(body) {
			return
		}
		got, err := JSONFields(body, "id", "type", "created")
		if err != nil {
			t.Fatal(err)
		}
		if want := slowFields(body, "id", "type", "created"); !equal(got, want) {
			t.Fatalf("%q: one walk %q, gjson paths %q", body, got, want)
		}
	})
}

func equal(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// A json: resolver reads its path literally: keys may hold characters that
// gjson would take for wildcards, counts or modifiers; numbers index arrays.
func TestJSONResolverPathIsLiteral(t *testing.T) {
	body := []byte(`{"data":{"livemode":"yes","items":["a","b"],"a*b?c#d|e@f!g":"odd"}}`)
	for path, want := range map[string]string{
		"data.livemode":       "yes",
		"data.livem?de":       "",
		"data.*":              "",
		"data.items.#":        "",
		"data.items.1":        "b",
		"data.a*b?c#d|e@f!g":  "odd",
		"data.items|@reverse": "",
	} {
		resolve, err := ParseKeyResolver("json:" + path)
		require.NoError(t, err)
		got, err := resolve(&Request{Body: body})
		require.NoError(t, err)
		require.Equal(t, want, got, path)
	}
}

// Escaped lone UTF-16 surrogates would all decode to U+FFFD, making
// different ids one: such a string is read as text that is not valid UTF-8
// (ingest refuses it as an id), different for different JSON text. Paired
// surrogates decode as usual.
func TestJSONStringKeepsLoneSurrogatesApart(t *testing.T) {
	seen := map[string]string{}
	for _, body := range []string{`{"id":"a\udc00"}`, `{"id":"a\ud801"}`, `{"id":"a\ufffd"}`, `{"id":"a\ud801x"}`, `{"id":"a\\ud801"}`, `{"id":"a\ud801\u0041"}`} {
		id, err := JSONString([]byte(body), "id")
		require.NoError(t, err)
		require.NotContains(t, seen, id, "%s reads as the same id as %s", body, seen[id])
		seen[id] = body
		require.Equal(t, strings.Contains(body, `"a\u`) && !strings.Contains(body, "fffd"), !utf8.ValidString(id), body)
	}
	id, err := JSONString([]byte(`{"id":"\ud83d\ude00 ok"}`), "id")
	require.NoError(t, err)
	require.Equal(t, "😀 ok", id)
	for raw, lone := range map[string]bool{`"\ud800"`: true, `"\udfff"`: true, `"\ud800\u0041"`: true, `"x\ud83d\ude00"`: false,
		`"\\ud800"`: false, `"\u00e9\n"`: false, `"\ud800\ud800"`: true, `"\ud800\`: true} {
		require.Equal(t, lone, hasLoneSurrogate(raw), raw)
	}
}

// A header resolver or setting whose name is no header name could never
// match: refused when the configuration is read.
func TestHeaderNamesAreTokens(t *testing.T) {
	for _, bad := range []string{"header:Bad Header", "header:X-Id:", "header:X\tId", "header:Ünï"} {
		_, err := ParseKeyResolver(bad)
		require.ErrorContains(t, err, "is not a header name", bad)
	}
	for _, good := range []string{"header:X-Acme-Delivery", "header:x_id", "header:X.Id~1"} {
		_, err := ParseKeyResolver(good)
		require.NoError(t, err, good)
	}
}
