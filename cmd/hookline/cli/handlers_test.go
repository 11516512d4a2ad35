package cli

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/hookline/hookline/internal/pgtest"
	"github.com/hookline/hookline/jobs"
)

// A destination's `handler:` names a Go handler the program running the
// command registered (Options.Handlers); check, like serve, refuses a name
// nobody registered.
func TestHandlersRegisteredByName(t *testing.T) {
	t.Parallel()
	cfg := filepath.Join(t.TempDir(), "hookline.yaml")
	require.NoError(t, os.WriteFile(cfg, []byte(`database_url: postgres://hookline@127.0.0.1:1/hookline
sources:
  - name: stripe
    provider: stripe
    secrets: [whsec_x]
    destinations:
      - {name: ledger, handler: ledger}
      - {name: crm, url: "http://127.0.0.1:1/crm"}
`), 0o600))
	ledger := jobs.HandlerFunc(func(context.Context, pgx.Tx, *jobs.Event) error { return nil })

	var out, errb bytes.Buffer
	code := (&command{handlers: map[string]jobs.Handler{"ledger": ledger}}).run([]string{"check", "--config", cfg}, &out, &errb)
	require.Equal(t, 0, code, errb.String())

	out.Reset()
	errb.Reset()
	code = (&command{}).run([]string{"check", "--config", cfg}, &out, &errb)
	require.Equal(t, 2, code)
	require.Contains(t, errb.String(), `sources[0].destinations[0].handler: no Go handler is registered as "ledger"`)
}

// check refuses what serve would: a TLS certificate it cannot load (exit
// 2 naming tls_cert), not only a malformed configuration.
func TestCheckLoadsTheTLSCertificate(t *testing.T) {
	t.Parallel()
	cfg := filepath.Join(t.TempDir(), "hookline.yaml")
	require.NoError(t, os.WriteFile(cfg, []byte(`database_url: postgres://hookline@127.0.0.1:1/hookline
tls_cert: /nonexistent/cert.pem
tls_key: /nonexistent/key.pem
sources:
  - {name: s, provider: stripe, secrets: [whsec_x], destination: {url: "http://127.0.0.1:1/x"}}
`), 0o600))
	var out, errb bytes.Buffer
	code := (&command{}).run([]string{"check", "--config", cfg}, &out, &errb)
	require.Equal(t, 2, code, errb.String())
	require.Contains(t, errb.String(), "tls_cert: with tls_key: open /nonexistent/cert.pem")
}

// send --file sends the file as it is: an --event-id it could not apply
// (the source reads the id from the body) is refused, not ignored.
func TestSendFileRefusesAnEventIDItCannotApply(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg := filepath.Join(dir, "hookline.yaml")
	require.NoError(t, os.WriteFile(cfg, []byte(`listen: 127.0.0.1:1
database_url: postgres://hookline@127.0.0.1:1/hookline
sources:
  - {name: s, provider: stripe, secrets: [whsec_x], destination: {url: "http://127.0.0.1:1/x"}}
`), 0o600))
	body := filepath.Join(dir, "event.json")
	require.NoError(t, os.WriteFile(body, []byte(`{"id":"evt_in_file","type":"charge.succeeded"}`), 0o600))
	var out, errb bytes.Buffer
	code := (&command{}).run([]string{"send", "--config", cfg, "--source", "s", "--file", body, "--event-id", "evt_other"}, &out, &errb)
	require.Equal(t, 2, code, errb.String())
	require.Contains(t, errb.String(), "--event-id cannot apply to --file")
}

// migrate reads only the database settings: a migration step whose
// environment holds no source secret runs.
func TestMigrateNeedsNoSourceSecrets(t *testing.T) {
	t.Parallel()
	cfg := filepath.Join(t.TempDir(), "hookline.yaml")
	require.NoError(t, os.WriteFile(cfg, []byte(`database_url: "`+pgtest.NewURL(t)+`"
sources:
  - {name: s, provider: stripe, secrets: ["${HOOKLINE_TEST_NEVER_SET_SECRET}"]}
`), 0o600))
	var out, errb bytes.Buffer
	code := (&command{}).run([]string{"check", "--config", cfg}, &out, &errb)
	require.Equal(t, 2, code, "the whole configuration needs the secret")
	out.Reset()
	errb.Reset()
	code = (&command{}).run([]string{"migrate", "status", "--config", cfg}, &out, &errb)
	require.Equal(t, 0, code, errb.String())
	require.Contains(t, out.String(), "applied")
}
