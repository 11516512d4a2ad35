package cli_test

import (
	"io"
	"net/http"
	"regexp"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookline/hookline/internal/pgtest"
	"github.com/hookline/hookline/internal/proctest"
)

// TestServeSetsAMemoryLimit: serve gives the Go runtime a soft memory limit
// of 2 x ingest.max_pending_bytes + 256 MiB, so that large bodies in flight
// do not let the heap grow to GOGC's multiple of them; GOMEMLIMIT
// overrides it. /metrics reports the limit in force.
func TestServeSetsAMemoryLimit(t *testing.T) {
	t.Parallel()
	dbURL := pgtest.NewURL(t)
	for _, tc := range []struct {
		env  string
		want string
	}{
		{"GOMEMLIMIT=", "4.02653184e+08"},     // 2 x 64 MiB + 256 MiB
		{"GOMEMLIMIT=300MiB", "3.145728e+08"}, // the environment's
	} {
		addr := freeAddr(t)
		cfg := writeConfig(t, config(dbURL, addr, "http://127.0.0.1:9/x", "ingest: {max_pending_bytes: 67108864}\n"))
		p := proctest.Start(t, addr, []string{tc.env}, "serve", "--config", cfg)
		p.WaitHealthy(t, 90*time.Second)
		resp, err := http.Get(p.BaseURL() + "/metrics")
		require.NoError(t, err)
		raw, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.NoError(t, err)
		m := regexp.MustCompile(`(?m)^go_gc_gomemlimit_bytes (\S+)$`).FindSubmatch(raw)
		require.NotNil(t, m, "go_gc_gomemlimit_bytes in /metrics")
		require.Equal(t, tc.want, string(m[1]), tc.env)
		p.Kill()
	}
}
