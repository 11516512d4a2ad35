package cli_test

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestCheckPrintsOrderingAndReconcile: check says, per source, the
// ordering and the reconciliation it found, so that an operator sees they
// were taken.
func TestCheckPrintsOrderingAndReconcile(t *testing.T) {
	t.Parallel()
	cfg := writeConfig(t, `database_url: postgres://h/db
sources:
  - name: s
    provider: stripe
    secrets: [abc]
    ordering: {key: "json:data.object.id", by: "json:created", stale: skip}
    reconcile: {api_key: k, every: 10m}
    destination: {url: "http://127.0.0.1:9/x"}
  - name: plain
    provider: stripe
    secrets: [abc]
    destination: {url: "http://127.0.0.1:9/x"}
`)
	code, out := run(t, "check", "--config", cfg)
	require.Equal(t, 0, code, out)
	require.Contains(t, out, "ORDERING")
	require.Contains(t, out, "key json:data.object.id, by json:created, stale skip")
	require.Contains(t, out, "every 10m0s, lookback 72h0m0s")
	require.Regexp(t, `(?m)^plain\s+stripe\s+1\s+skip\s+\S+\s+\S+\s+-\s+-\s+default=`, out)
}
