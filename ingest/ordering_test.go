package ingest_test

import (
	"math/big"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookline/hookline/ingest"
)

func TestParseOrderBy(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ in, value, kind string }{
		{"1764504000", "1764504000", ingest.ByNumber},
		{" 42 ", "42", ingest.ByNumber},
		{"-3.25", "-3.25", ingest.ByNumber},
		{"1e3", "1e3", ingest.ByNumber},
		{"123456789012345678901234567890", "123456789012345678901234567890", ingest.ByNumber},
		{"2026-12-01T10:00:00Z", "1796119200.000000000", ingest.ByTime},
		{"2026-12-01T11:00:00+01:00", "1796119200.000000000", ingest.ByTime},
		{"2026-12-01T10:00:00.5Z", "1796119200.500000000", ingest.ByTime},
		{"2026-12-01t10:00:00z", "1796119200.000000000", ingest.ByTime}, // RFC 3339 allows lower case
		{"2026-12-01t11:00:00.5+01:00", "1796119200.500000000", ingest.ByTime},
		{"1969-12-31T23:59:59.75Z", "-0.250000000", ingest.ByTime},
		{"1960-01-01T00:00:00.000000001Z", "-315619199.999999999", ingest.ByTime},
		{"", "", ""},
		{"soon", "", ""},
		{"0x1F", "", ""},
		{"01", "", ""},
		{"1e99999", "", ""},
		{"2026-12-01", "", ""},
		{strings.Repeat("9", 65), "", ""},
	} {
		v, k := ingest.ParseOrderBy(tc.in)
		require.Equal(t, tc.value, v, tc.in)
		require.Equal(t, tc.kind, k, tc.in)
	}
}

// Every value ParseOrderBy returns is a decimal that orders as its input:
// times as instants.
func FuzzParseOrderBy(f *testing.F) {
	for _, s := range []string{"1", "-2.5", "1e3", "2026-12-01T10:00:00Z", "1969-12-31T23:59:59.75Z", "x", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, kind := ingest.ParseOrderBy(s)
		if v == "" {
			if kind != "" {
				t.Fatalf("%q: kind %q without a value", s, kind)
			}
			return
		}
		r, ok := new(big.Rat).SetString(v)
		if !ok {
			t.Fatalf("%q: %q is not a decimal", s, v)
		}
		if kind == ingest.ByTime {
			tm, err := time.Parse(time.RFC3339Nano, strings.ToUpper(strings.TrimSpace(s))) // RFC 3339's "t" and "z" may be lower case
			if err != nil {
				t.Fatalf("%q: kind time but not RFC 3339: %v", s, err)
			}
			want := new(big.Rat).SetFrac(big.NewInt(tm.Unix()*1e9+int64(tm.Nanosecond())), big.NewInt(1e9))
			if tm.Unix() > -9e9 && tm.Unix() < 9e9 && r.Cmp(want) != 0 {
				t.Fatalf("%q: %q is not the instant %s", s, v, want.FloatString(9))
			}
		}
	})
}
