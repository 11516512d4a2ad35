package jobs_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/net/http/httpguts"

	"github.com/hookline/hookline/jobs"
)

func TestOrderKeyHeader(t *testing.T) {
	t.Parallel()
	require.Equal(t, "pi_3MtwBwLkdIwHu7ix28a3tqPa", jobs.OrderKeyHeader("pi_3MtwBwLkdIwHu7ix28a3tqPa"))
	require.Equal(t, "a b\tc%d", jobs.OrderKeyHeader("a b\tc%d"), "nothing to encode: left as it is")
	require.Equal(t, "line%0Abreak%25", jobs.OrderKeyHeader("line\nbreak%"))
	require.Equal(t, "ключ", jobs.OrderKeyHeader("ключ"))
}

// Whatever the key, the header value is one net/http sends.
func FuzzOrderKeyHeader(f *testing.F) {
	for _, s := range []string{"pi_1", "a\r\nX-Evil: 1", "\x00\x7f", "ключ"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, key string) {
		v := jobs.OrderKeyHeader(key)
		if !httpguts.ValidHeaderFieldValue(v) {
			t.Fatalf("%q renders as %q, which net/http refuses", key, v)
		}
		h := http.Header{}
		h.Set("Hookline-Order-Key", v)
		if h.Get("Hookline-Order-Key") != v {
			t.Fatalf("%q does not round-trip", v)
		}
	})
}
