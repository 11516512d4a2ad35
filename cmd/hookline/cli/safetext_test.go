package cli

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestSafeText(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"evt_1 ok é 日本 →":                    "evt_1 ok é 日本 →",
		"a\x1b[31mred\x1b[0m":                `a\x1b[31mred\x1b[0m`,
		"\x1b]0;title\x07":                   `\x1b]0;title\x07`,
		"line\r\nfake line":                  `line\r\nfake line`,
		"tab\there":                          `tab\there`,
		"nul\x00 bs\x08 del\x7f":             `nul\x00 bs\x08 del\x7f`,
		"c1 \u009b2J \u0085 \u0090":          `c1 \u009b2J \u0085 \u0090`,
		"sep\u2028para\u2029":                `sep\u2028para\u2029`,
		"bidi \u202eevil\u202c \u2066\u200f": `bidi \u202eevil\u202c \u2066\u200f`,
		"not utf-8 \xff\xc3":                 `not utf-8 \xff\xc3`,
		"":                                   "",
	} {
		require.Equal(t, want, safe(in), "%q", in)
	}

	// A payload keeps its lines and tabs, indented; a carriage return and
	// the rest are escaped.
	require.Equal(t, "  {\n  \t\"a\": \"\\x1b[2J\"\\r\n  }", safeLines("{\n\t\"a\": \"\x1b[2J\"\r\n}", "  "))
	require.Equal(t, "  ", safeLines("", "  "))

	// A table cell: white space folded, escaped, cut without splitting an
	// escape.
	require.Equal(t, `destination answered 502: bad gateway`, oneLine("destination answered 502:\r\n\tbad  gateway\n", 60))
	require.Equal(t, `a \x1b[1mb`, oneLine("a\n\x1b[1mb", 60))
	require.Equal(t, "abcd…", oneLine("abcdefgh", 5))
	require.Equal(t, `ab…`, oneLine("ab\x1b[1m", 6), `\x1b does not fit in the 5 characters before …`)
	require.Equal(t, `ab\x1b…`, oneLine("ab\x1b[1m", 7))
}
