package config_test

import (
	"cmp"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookline/hookline/internal/config"
	_ "github.com/hookline/hookline/providers/all"
)

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

const full = `
listen: ":9090"
database_url: "${DATABASE_URL}"
admin_token: "${HOOKLINE_ADMIN_TOKEN}"
max_body_bytes: 2048
workers: 7
shutdown_timeout: 12s
sources:
  - name: stripe
    provider: stripe
    secrets: ["${STRIPE_WEBHOOK_SECRET}", "whsec_old"]
    tolerance: 5m
    on_duplicate: reject
    lease: 2m
    dedup_window: 30d
    destination:
      url: "http://127.0.0.1:9000/hooks/stripe"
      timeout: 3s
      max_attempts: 4
      backoff: {min: 2s, max: 1m}
      secret: "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
  - name: acme
    provider: hmac
    secrets: ["${ACME_SECRET}"]
    hmac: {header: X-Acme-Signature, algorithm: sha256, encoding: hex, prefix: "sha256="}
    event_id: "header:X-Acme-Delivery"
    event_type: "json:type"
    destination: {url: "http://127.0.0.1:9000/hooks/acme"}
`

func TestParseFull(t *testing.T) {
	t.Parallel()
	c, err := config.Parse([]byte(full), env(map[string]string{
		"DATABASE_URL": "postgres://x", "HOOKLINE_ADMIN_TOKEN": "tok", "STRIPE_WEBHOOK_SECRET": "whsec_new", "ACME_SECRET": "acme",
	}))
	require.NoError(t, err)
	require.Equal(t, ":9090", c.Listen)
	require.Equal(t, "postgres://x", c.DatabaseURL)
	require.Equal(t, "tok", c.AdminToken)
	require.Equal(t, 12*time.Second, c.ShutdownTimeout.D())
	s := c.Sources[0]
	require.Equal(t, []string{"whsec_new", "whsec_old"}, s.Secrets)
	require.Equal(t, "reject", s.OnDuplicate)
	require.Equal(t, 30*24*time.Hour, s.DedupWindow.D())
	require.Equal(t, 4, s.Destination.MaxAttempts)
	require.NotNil(t, s.Adapter())
	a := c.Sources[1]
	require.Equal(t, "skip", a.OnDuplicate, "default")
	require.Equal(t, config.DefaultLease, a.Lease.D())
	require.Equal(t, config.DefaultMaxAttempts, a.Destination.MaxAttempts)
	id, typ := a.KeyResolvers()
	require.NotNil(t, id)
	require.NotNil(t, typ)
	require.True(t, c.BatchEnabled())
	require.True(t, c.PaceEnabled(), "ingest paces itself to the workers by default")
	require.Equal(t, 250*time.Millisecond, c.Ingest.PaceLag.D())
	require.Equal(t, 20*time.Millisecond, c.Ingest.PaceMaxDelay.D())
	require.Equal(t, int64(config.DefaultMaxPendingBytes), c.Ingest.MaxPendingBytes)
	require.Empty(t, c.Tracing.OTLPEndpoint, "no exporter unless configured")
	require.Equal(t, 1.0, *c.Tracing.SampleRatio)
	require.Equal(t, config.DefaultServiceName, c.Tracing.ServiceName)
}

func TestValidationNamesTheField(t *testing.T) {
	t.Parallel()
	base := "database_url: x\nsources:\n"
	cases := map[string]string{
		"sources[0].name":                     "  - {name: 'Bad Name', provider: stripe, secrets: [s]}",
		"sources[0].provider":                 "  - {name: a, provider: nope, secrets: [s]}",
		"sources[0].secrets":                  "  - {name: a, provider: stripe}",
		"sources[0].secrets[0]":               "  - {name: a, provider: stripe, secrets: ['${UNSET}']}",
		"sources[1].name":                     "  - {name: a, provider: stripe, secrets: [s]}\n  - {name: a, provider: stripe, secrets: [s]}",
		"sources[0].on_duplicate":             "  - {name: a, provider: stripe, secrets: [s], on_duplicate: maybe}",
		"sources[0].event_id":                 "  - {name: a, provider: hmac, secrets: [s], hmac: {header: X-S}}",
		"sources[0].destination.url":          "  - {name: a, provider: stripe, secrets: [s], destination: {url: 'ftp://x'}}",
		"sources[0].destination.backoff":      "  - {name: a, provider: stripe, secrets: [s], destination: {url: 'http://x', backoff: {min: 1h, max: 1s}}}",
		"sources[0].paypal":                   "  - {name: a, provider: stripe, secrets: [s], paypal: {webhook_id: x}}",
		"sources[0].hmac.header":              "  - {name: a, provider: hmac, secrets: [s], event_id: 'header:X', hmac: {algorithm: sha256}}",
		"sources[0].lease":                    "  - {name: a, provider: stripe, secrets: [s], lease: 1ms}",
		"sources[0].destination.secret":       "  - {name: a, provider: stripe, secrets: [s], destination: {url: 'http://x', secret: plain}}",
		"sources[0].destination.max_attempts": "  - {name: a, provider: stripe, secrets: [s], destination: {url: 'http://x', max_attempts: -1}}",
		"sources[1].destination.max_attempts": "  - {name: a, provider: stripe, secrets: [s]}\n  - {name: b, provider: stripe, secrets: [s], destination: {url: 'http://x', max_attempts: 8001}}",
		"sources[0].destination.timeout":      "  - {name: a, provider: stripe, secrets: [s], destination: {url: 'http://x', timeout: 5m}}",
		"sources[0].destination.backoff.min":  "  - {name: a, provider: stripe, secrets: [s], destination: {url: 'http://x', backoff: {min: -1s}}}",
		"sources[0].dedup_window":             "  - {name: a, provider: stripe, secrets: [s], dedup_window: 5xd}",
		"hmac.header":                         "  - {name: a, provider: hmac, secrets: [s], event_id: 'json:id', hmac: {header: 'X Sig'}}",
	}
	for want, src := range cases {
		_, err := config.Parse([]byte(base+src), env(nil))
		require.Error(t, err, want)
		require.True(t, errors.Is(err, config.ErrInvalid), want)
		require.Contains(t, err.Error(), want, "error %q should name %s", err, want)
	}
	// Top-level settings.
	src := "  - {name: a, provider: stripe, secrets: [s]}\n"
	for want, top := range map[string]string{
		"ingest.max_pending_bytes": "max_body_bytes: 4096\ningest: {max_pending_bytes: 1024}\n",
		"ingest.batch_size":        "ingest: {batch_size: 5000}\n",
		"ingest.batch_wait":        "ingest: {batch_wait: -1ms}\n",
		"ingest.queue_timeout":     "ingest: {queue_timeout: -1s}\n",
		"ingest.body_timeout":      "ingest: {body_timeout: -1s}\n",
		"ingest.pace_lag":          "ingest: {pace_lag: -1s}\n",
		"ingest.pace_max_delay":    "ingest: {pace_max_delay: 3s}\n", // not shorter than queue_timeout
		"shutdown_timeout":         "shutdown_timeout: -1s\n",
		"retention.deliveries":     "retention: {deliveries: -1d}\n",
		"metrics_on_admin":         "metrics_on_admin: true\n",
		"tracing.sample_ratio":     "tracing: {sample_ratio: 1.5}\n",
		"tracing.otlp_endpoint":    "tracing: {otlp_endpoint: 'localhost:4318'}\n",
	} {
		_, err := config.Parse([]byte(top+base+src), env(nil))
		require.Error(t, err, want)
		require.True(t, errors.Is(err, config.ErrInvalid), want)
		require.Contains(t, err.Error(), want, "error %q should name %s", err, want)
	}
}

// A header name with a space could never match: refused, naming the field.
func TestHeaderResolverNamesAHeader(t *testing.T) {
	t.Parallel()
	_, err := config.Parse([]byte("database_url: x\nsources:\n  - {name: a, provider: stripe, secrets: [s], event_id: 'header:Bad Header'}\n"), env(nil))
	require.Equal(t, "sources[0].event_id", fieldError(t, err).Path)
	require.Contains(t, err.Error(), "is not a header name")
}

// A second YAML document would be ignored: refused instead.
func TestOneYAMLDocument(t *testing.T) {
	t.Parallel()
	one := "database_url: x\nsources:\n" + oneSource
	_, err := config.Parse([]byte("---\n"+one), env(nil))
	require.NoError(t, err, "a leading --- is one document")
	_, err = config.Parse([]byte(one+"---\nworkers: abc\n"), env(nil))
	require.ErrorIs(t, err, config.ErrInvalid)
	require.Contains(t, err.Error(), "more than one YAML document")
}

func TestUnknownFieldsAreErrors(t *testing.T) {
	t.Parallel()
	for _, src := range []string{
		"database_url: x\nlisten_addr: ':1'\nsources:\n  - {name: a, provider: stripe, secrets: [s]}",
		"database_url: x\nsources:\n  - {name: a, provider: stripe, secrets: [s], destination: {urll: 'http://x'}}",
	} {
		_, err := config.Parse([]byte(src), env(nil))
		require.ErrorIs(t, err, config.ErrInvalid)
		require.Contains(t, err.Error(), "unknown field")
	}
}

// A value of the wrong kind is named by its path, with what the field
// wants, and never quoted (it may be a secret); so is an unknown field.
func TestTypeErrorsNameTheField(t *testing.T) {
	t.Parallel()
	for want, src := range map[string]string{
		"workers: want a whole number, not text":                                                    "workers: lots\nsources:\n" + oneSource,
		"max_body_bytes: want a whole number, not text":                                             "max_body_bytes: big\nsources:\n" + oneSource,
		"sources[0].secrets: want a list, not text":                                                 "sources:\n  - {name: a, provider: stripe, secrets: topsecretvalue}\n",
		"sources[1].destination.max_attempts: want a whole number, not text":                        "sources:\n" + oneSource + "  - name: b\n    provider: stripe\n    secrets: [s]\n    destination:\n      url: http://x\n      max_attempts: many\n",
		"sources[0].destination.bogus: unknown field":                                               "sources:\n  - {name: a, provider: stripe, secrets: [s], destination: {url: 'http://x', bogus: 1}}\n",
		"ingest.batch: want true or false, not a whole number":                                      "ingest: {batch: 3}\nsources:\n" + oneSource,
		"workers: want a whole number, not a number with a fraction":                                "workers: 1.5\nsources:\n" + oneSource,
		"max_body_bytes: want a whole number, not a number with a fraction":                         "max_body_bytes: 1.5\nsources:\n" + oneSource,
		"database.max_conns: want a whole number, not a number with a fraction":                     "database: {max_conns: 2.5e0}\nsources:\n" + oneSource,
		"sources[1].destination.max_attempts: want a whole number, not a number with a fraction":    "sources:\n" + oneSource + "  - name: b\n    provider: stripe\n    secrets: [s]\n    destination:\n      url: http://x\n      max_attempts: 2.7\n",
		"sources: want a list, not a mapping":                                                       "sources: {a: 1}\n",
		"sources[0].destinations[0].types: want a list, not text":                                   "sources:\n  - {name: a, provider: stripe, secrets: [s], destinations: [{name: d, url: 'http://x', types: 'invoice.*'}]}\n",
		"sources[0].destinations[0].circuit: want a mapping (key: value lines), not a whole number": "sources:\n  - {name: a, provider: stripe, secrets: [s], destinations: [{name: d, url: 'http://x', circuit: 5}]}\n",
	} {
		_, err := config.Parse([]byte("database_url: x\n"+src), env(nil))
		fieldError(t, err)
		require.Contains(t, err.Error(), want)
		require.NotContains(t, err.Error(), "topsecret")
	}
}

// ${VAR} fills numeric and boolean fields too, quoted or not, while a
// string field keeps the value's text.
func TestExpandTypedValues(t *testing.T) {
	t.Parallel()
	e := env(map[string]string{"W": "7", "MB": "1234", "B": "false", "TOK": "007", "R": "0.5"})
	c, err := config.Parse([]byte(`database_url: x
workers: ${W}
max_body_bytes: "${MB}"
admin_token: ${TOK}
ingest:
  batch: ${B}
  pace: ${B}
tracing:
  sample_ratio: ${R}
sources:
`+oneSource), e)
	require.NoError(t, err)
	require.Equal(t, 7, c.Workers)
	require.EqualValues(t, 1234, c.MaxBodyBytes)
	require.Equal(t, "007", c.AdminToken, "a string field keeps the text")
	require.False(t, c.BatchEnabled())
	require.False(t, c.PaceEnabled())
	require.Equal(t, 0.5, *c.Tracing.SampleRatio)

	_, err = config.Parse([]byte("database_url: x\nworkers: ${W:-many}\nsources:\n"+oneSource), env(nil))
	require.Equal(t, "workers: want a whole number, not text", fieldError(t, err).Error())
}

func TestBadDurationNamesTheValue(t *testing.T) {
	t.Parallel()
	_, err := config.Parse([]byte("database_url: x\nshutdown_timeout: soon\nsources:\n  - {name: a, provider: stripe, secrets: [s]}"), env(nil))
	require.ErrorIs(t, err, config.ErrInvalid)
	require.Contains(t, err.Error(), `"soon" is not a duration`)
}

func TestSecretsNeverInErrors(t *testing.T) {
	t.Parallel()
	_, err := config.Parse([]byte("database_url: x\nsources:\n  - {name: a, provider: standardwebhooks, secrets: ['whsec_!!notbase64-topsecret']}"), env(nil))
	require.Error(t, err)
	require.NotContains(t, err.Error(), "topsecret")
}

// fieldError returns err as a *config.FieldError, checking that it wraps
// ErrInvalid.
func fieldError(t *testing.T, err error) *config.FieldError {
	t.Helper()
	require.Error(t, err)
	require.ErrorIs(t, err, config.ErrInvalid)
	var fe *config.FieldError
	require.ErrorAs(t, err, &fe, "%v", err)
	return fe
}

const oneSource = "  - {name: a, provider: stripe, secrets: [s]}\n"

func TestExpand(t *testing.T) {
	t.Parallel()
	e := env(map[string]string{"A": "a", "B": "b", "EMPTY": "", "U": "ü"})
	for _, tc := range []struct{ in, want string }{
		{`${A}`, "a"},
		{`x${A}y${B}z`, "xaybz"},
		{`${UNSET}`, ""}, // non-secret field: unset is ""
		{`${EMPTY}`, ""},
		{`${A:-d}`, "a"},
		{`${UNSET:-d}`, "d"},
		{`${EMPTY:-d}`, "d"},
		{`${UNSET:-}`, ""},
		{`${UNSET:-a b:-c}`, "a b:-c"},
		{`${UNSET:-{x}-}`, "{x-}"}, // the first } closes the default
		{`${UNSET:-${B}}`, "b"},
		{`${UNSET:-${EMPTY:-${UNSET2:-deep}}}`, "deep"},
		{`${UNSET:-${EMPTY}}`, ""},
		{`${A:-${UNSET}}`, "a"},
		{`${UNSET:-x${A}y}`, "xay"},
		{`é${U}${UNSET:-ß}`, "éüß"},
		{`$${A}`, "${A}"},
		{`${UNSET:-$${A}}`, "${A}"},
		{`$$`, "$$"},
		{`pa$$word`, "pa$$word"},
		{`$A $ {A} $(A) a$`, "$A $ {A} $(A) a$"},
		{`}{`, "}{"},
		{`${A}}`, "a}"},
		{`$`, "$"},
	} {
		src := fmt.Sprintf("database_url: x\ntracing: {service_name: %q}\nsources:\n%s", tc.in, oneSource)
		c, err := config.Parse([]byte(src), e)
		require.NoError(t, err, tc.in)
		want := cmp.Or(tc.want, config.DefaultServiceName) // "" takes the default
		require.Equal(t, want, c.Tracing.ServiceName, tc.in)
	}
}

func TestExpandSecretFields(t *testing.T) {
	t.Parallel()
	e := env(map[string]string{"A": "a", "EMPTY": "", "TOK": "tok", "SECRET": "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"})
	src := func(top, source string) string {
		return top + "sources:\n  - name: a\n    provider: stripe\n" + source
	}
	ok := map[string]struct{ top, source string }{
		"set":                {"database_url: ${A}\n", "    secrets: ['whsec_${A}']\n"},
		"default":            {"database_url: ${NOPE:-postgres://x}\n", "    secrets: ['${NOPE:-s}']\n"},
		"empty default":      {"database_url: x\nadmin_token: ${NOPE:-}\n", "    secrets: [s]\n"},
		"nested default":     {"database_url: x\nadmin_token: ${NOPE:-${TOK}}\n", "    secrets: [s]\n"},
		"unused default var": {"database_url: x\nadmin_token: ${TOK:-${NOPE}}\n", "    secrets: [s]\n"},
		"non-secret field":   {"database_url: x\ntracing: {service_name: 'hl${NOPE}'}\n", "    secrets: [s]\n    event_type: 'json:${NOPE}type'\n"},
		"destination":        {"database_url: x\n", "    secrets: [s]\n    destination: {url: 'http://h/${A}', secret: '${SECRET}'}\n"},
	}
	for name, tc := range ok {
		_, err := config.Parse([]byte(src(tc.top, tc.source)), e)
		require.NoError(t, err, name)
	}
	bad := []struct{ path, name, top, source string }{
		{"sources[0].secrets[0]", "X", "database_url: x\n", "    secrets: ['whsec_${X}']\n"},
		{"sources[0].secrets[1]", "STRIPE_SECRET", "database_url: x\n", "    secrets: [s, '${STRIPE_SECRET}']\n"},
		{"sources[0].secrets[0]", "EMPTY", "database_url: x\n", "    secrets: ['${EMPTY}']\n"},
		{"database_url", "DATABASE_URL", "database_url: ${DATABASE_URL}\n", "    secrets: [s]\n"},
		{"admin_token", "TOKEN", "database_url: x\nadmin_token: '${TOKEN}'\n", "    secrets: [s]\n"},
		{"admin_token", "INNER", "database_url: x\nadmin_token: '${OUTER:-${INNER}}'\n", "    secrets: [s]\n"},
		{"tls_key", "K", "database_url: x\ntls_cert: c\ntls_key: '${K}'\n", "    secrets: [s]\n"},
		{"sources[0].destination.url", "DEST", "database_url: x\n", "    secrets: [s]\n    destination: {url: '${DEST}'}\n"},
		{"sources[0].destination.secret", "DS", "database_url: x\n", "    secrets: [s]\n    destination: {url: 'http://x', secret: 'whsec_${DS}'}\n"},
		{"sources[0].stripe.authorization_key", "AK", "database_url: x\n", "    secrets: [s]\n    stripe: {authorization_key: '${AK}'}\n"},
		// URLs by other names: an endpoint, an audience, a host.
		{"tracing.otlp_endpoint", "OTLP", "database_url: x\ntracing: {otlp_endpoint: 'http://${OTLP}:4318'}\n", "    secrets: [s]\n"},
		{"sources[0].googleplay.audience", "AUD", "database_url: x\n", "    secrets: [s]\n    googleplay: {audience: 'https://${AUD}/webhooks/googleplay'}\n"},
		// A value anchored in a plain field and aliased into a secret is
		// checked where it is used.
		{"sources[0].secrets[0]", "X", "database_url: x\ntracing: {service_name: &l '${X}'}\n", "    secrets: [*l]\n"},
		{"sources[0].secrets[0]", "X", "database_url: x\ntracing: {service_name: &l ['${X}']}\n", "    secrets: *l\n"},
	}
	for _, tc := range bad {
		_, err := config.Parse([]byte(src(tc.top, tc.source)), e)
		fe := fieldError(t, err)
		require.Equal(t, tc.path, fe.Path, "%v", err)
		want := fmt.Sprintf("%s: ${%s} is not set (write ${%s:-default} for a default)", tc.path, tc.name, tc.name)
		require.Equal(t, want, err.Error())
	}
}

// An unset variable in a number, boolean or duration field (whose "" the
// field cannot take) is reported as the variable being unset, at the field.
func TestExpandUnsetInTypedFields(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ path, name, top, source string }{
		{"workers", "WORKERS", "workers: ${WORKERS}\n", ""},
		{"workers", "WORKERS", "workers: '${WORKERS}'\n", ""},
		{"ingest.batch", "BATCH", "ingest: {batch: '${BATCH}'}\n", ""},
		{"shutdown_timeout", "GRACE", "shutdown_timeout: ${GRACE}\n", ""},
		{"sources[0].lease", "LEASE", "", "    lease: ${LEASE}\n"},
		{"sources[0].destination.max_attempts", "MA", "", "    destination: {url: 'http://x', max_attempts: '${MA}'}\n"},
	} {
		src := "database_url: x\n" + tc.top + "sources:\n  - name: a\n    provider: stripe\n    secrets: [s]\n" + tc.source
		_, err := config.Parse([]byte(src), env(nil))
		fe := fieldError(t, err)
		require.Equal(t, tc.path, fe.Path, "%v", err)
		require.Equal(t, fmt.Sprintf("%s: ${%s} is not set (write ${%s:-default} for a default)", tc.path, tc.name, tc.name), err.Error())
	}
	// Set, or with a default, they fill the field.
	c, err := config.Parse([]byte("database_url: x\nworkers: ${WORKERS}\nshutdown_timeout: ${GRACE:-45s}\nsources:\n"+oneSource), env(map[string]string{"WORKERS": "7"}))
	require.NoError(t, err)
	require.Equal(t, 7, c.Workers)
	require.Equal(t, 45*time.Second, c.ShutdownTimeout.D())
}

func TestExpandSyntaxErrors(t *testing.T) {
	t.Parallel()
	for in, msg := range map[string]string{
		"topsecret${":           "character 10: want a variable name after ${",
		"topsecret${}":          "character 10: want a variable name after ${",
		"topsecret${1A}":        "character 10: want a variable name after ${",
		"topsecret${A":          "character 10: ${A is not closed with }",
		"topsecret${A-x}":       "character 10: ${A is followed by neither } nor :-",
		"topsecret${A:?x}":      "character 10: ${A is followed by neither } nor :-",
		"topsecret${A B}":       "character 10: ${A is followed by neither } nor :-",
		"topsecret${A:-x":       "character 10: the default of ${A is not closed with }",
		"topsecret${A:-${B}":    "character 10: the default of ${A is not closed with }",
		"topsecret${A:-${B:-x}": "character 10: the default of ${A is not closed with }",
		"topsecret${A:-${B:x}}": "character 15: ${B is followed by neither } nor :-",
	} {
		src := fmt.Sprintf("database_url: x\nsources:\n  - {name: a, provider: stripe, secrets: [s, %q]}", in)
		_, err := config.Parse([]byte(src), env(map[string]string{"A": "a"}))
		fe := fieldError(t, err)
		require.Equal(t, "sources[0].secrets[1]", fe.Path, in)
		require.Contains(t, fe.Msg, msg, in)
		require.NotContains(t, err.Error(), "topsecret", "a secret's value is never in an error")
	}
	// The same in a plain field.
	_, err := config.Parse([]byte("database_url: x\nlisten: ':${PORT'\nsources:\n"+oneSource), env(nil))
	require.Equal(t, "listen", fieldError(t, err).Path)
}

func TestDurations(t *testing.T) {
	t.Parallel()
	day := 24 * time.Hour
	for in, want := range map[string]time.Duration{
		"30d":   30 * day,
		"1.5d":  36 * time.Hour,
		".5d":   12 * time.Hour,
		"2.d":   2 * day,
		"+2d":   2 * day,
		"0.25d": 6 * time.Hour,
		"720h":  720 * time.Hour,
		"1h30m": 90 * time.Minute,
		"90s":   90 * time.Second,
		"1.5h":  90 * time.Minute,
	} {
		src := fmt.Sprintf("database_url: x\nsources:\n  - {name: a, provider: stripe, secrets: [s], dedup_window: %q}", in)
		c, err := config.Parse([]byte(src), env(nil))
		require.NoError(t, err, in)
		require.Equal(t, want, c.Sources[0].DedupWindow.D(), in)
	}
	for _, in := range []string{
		"5xd", " 30d ", "30d ", " 30s", "d", "", "5 d", "30D", "5dd", "1d2h", "1e3d", "0x10d",
		"1,5d", "NaNd", "Infd", "d5", "5", "5x", "soon", "106752d", "99999999999999999999d",
	} {
		src := fmt.Sprintf("database_url: x\nsources:\n  - {name: a, provider: stripe, secrets: [s], dedup_window: %q}", in)
		_, err := config.Parse([]byte(src), env(nil))
		fe := fieldError(t, err)
		require.Equal(t, "sources[0].dedup_window", fe.Path, "%q: %v", in, err)
		require.Equal(t, fmt.Sprintf("%q is not a duration (write e.g. 30s, 5m, 720h or 30d)", in), fe.Msg)
	}
	// Negative days parse, and the field's own rule refuses them.
	_, err := config.Parse([]byte("database_url: x\nsources:\n  - {name: a, provider: stripe, secrets: [s], dedup_window: -1d}"), env(nil))
	fe := fieldError(t, err)
	require.Equal(t, "sources[0].dedup_window: must not be negative", err.Error(), fe.Path)
	// Nested and top-level fields are named too.
	for path, src := range map[string]string{
		"shutdown_timeout":                   "shutdown_timeout: 5xd\nsources:\n" + oneSource,
		"ingest.body_timeout":                "ingest: {body_timeout: 10sx}\nsources:\n" + oneSource,
		"sources[0].destination.backoff.min": "sources:\n  - name: a\n    provider: stripe\n    secrets: [s]\n    destination:\n      backoff:\n        min: 5xd\n",
		"sources[1].lease":                   "sources:\n" + oneSource + "  - {name: b, provider: stripe, secrets: [s], lease: '${L:-5xd}'}\n",
	} {
		_, err := config.Parse([]byte("database_url: x\n"+src), env(nil))
		require.Equal(t, path, fieldError(t, err).Path, "%v", err)
	}
	// A null duration is unset: the default applies.
	c, err := config.Parse([]byte("database_url: x\nsources:\n  - name: a\n    provider: stripe\n    secrets: [s]\n    lease:\n"), env(nil))
	require.NoError(t, err)
	require.Equal(t, config.DefaultLease, c.Sources[0].Lease.D())
}

func TestDestinationSecretIsDecoded(t *testing.T) {
	t.Parallel()
	for secret, ok := range map[string]bool{
		"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw": true,
		"whsec_YWJj":                             true,
		"whsec_YWI=":                             true,
		"whsec_":                                 false, // no key bytes
		"whsec_YWI":                              false, // unpadded
		"whsec_!!topsecret!!":                    false,
		"whsec_top-secret_==":                    false, // URL alphabet
		"MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw":       false, // no prefix
	} {
		src := fmt.Sprintf("database_url: x\nsources:\n  - {name: a, provider: stripe, secrets: [s], destination: {url: 'http://x', secret: %q}}", secret)
		c, err := config.Parse([]byte(src), env(nil))
		if ok {
			require.NoError(t, err, secret)
			require.Equal(t, secret, c.Sources[0].Destination.Secret)
			continue
		}
		fe := fieldError(t, err)
		require.Equal(t, "sources[0].destination.secret", fe.Path, secret)
		if v := secret[len("whsec_"):]; v != "" {
			require.NotContains(t, err.Error(), v, "a secret's value is never in an error")
		}
	}
}

func TestBodyTimeout(t *testing.T) {
	t.Parallel()
	c, err := config.Parse([]byte("database_url: x\nsources:\n"+oneSource), env(nil))
	require.NoError(t, err)
	require.Equal(t, config.DefaultBodyTimeout, c.Ingest.BodyTimeout.D())
	require.Equal(t, 10*time.Second, config.DefaultBodyTimeout)

	c, err = config.Parse([]byte("database_url: x\ningest: {body_timeout: 30s}\nsources:\n"+oneSource), env(nil))
	require.NoError(t, err)
	require.Equal(t, 30*time.Second, c.Ingest.BodyTimeout.D())

	_, err = config.Parse([]byte("database_url: x\ningest: {body_timeout: -1s}\nsources:\n"+oneSource), env(nil))
	fieldError(t, err)
	require.Equal(t, "ingest.body_timeout: must be positive", err.Error())
}

func TestMetricsOnAdmin(t *testing.T) {
	t.Parallel()
	c, err := config.Parse([]byte("database_url: x\nsources:\n"+oneSource), env(nil))
	require.NoError(t, err)
	require.False(t, c.MetricsOnAdmin)

	c, err = config.Parse([]byte("database_url: x\nadmin_listen: ':8081'\nmetrics_on_admin: true\nsources:\n"+oneSource), env(nil))
	require.NoError(t, err)
	require.True(t, c.MetricsOnAdmin)

	_, err = config.Parse([]byte("database_url: x\nmetrics_on_admin: true\nsources:\n"+oneSource), env(nil))
	require.Equal(t, "metrics_on_admin", fieldError(t, err).Path)
	require.Equal(t, "metrics_on_admin: requires admin_listen (without it, /metrics is served on listen)", err.Error())

	// admin_listen expanding to "" counts as unset.
	_, err = config.Parse([]byte("database_url: x\nadmin_listen: '${ADMIN:-}'\nmetrics_on_admin: true\nsources:\n"+oneSource), env(nil))
	require.Equal(t, "metrics_on_admin", fieldError(t, err).Path)
}

// An unset variable in listen or admin_listen is an error: "" would mean
// the default, and admin_listen's default puts the admin API on the public
// listener. The same address for both is refused too.
func TestListenAddresses(t *testing.T) {
	t.Parallel()
	for _, key := range []string{"listen", "admin_listen"} {
		_, err := config.Parse([]byte("database_url: x\n"+key+": '${ADDR}'\nsources:\n"+oneSource), env(nil))
		require.Equal(t, key, fieldError(t, err).Path)
		require.Contains(t, err.Error(), "ADDR")
	}
	c, err := config.Parse([]byte("database_url: x\nadmin_listen: '${ADDR}'\nsources:\n"+oneSource), env(map[string]string{"ADDR": "127.0.0.1:9090"}))
	require.NoError(t, err)
	require.Equal(t, "127.0.0.1:9090", c.AdminListen)
	_, err = config.Parse([]byte("database_url: x\nlisten: ':8080'\nadmin_listen: ':8080'\nsources:\n"+oneSource), env(nil))
	require.Equal(t, "admin_listen", fieldError(t, err).Path)
	// A wildcard host listens on every interface: the other address cannot
	// take the same port on any of them.
	for _, tc := range []struct {
		listen, admin string
		refused       bool
	}{
		{":8080", "127.0.0.1:8080", true},
		{"127.0.0.1:8080", ":8080", true},
		{"0.0.0.0:8080", "10.0.0.5:8080", true},
		{"[::]:8080", "127.0.0.1:8080", true},
		{"127.0.0.1:8080", "127.0.0.1:8080", true},
		{"127.0.0.1:8080", "10.0.0.5:8080", false},
		{":8080", "127.0.0.1:8081", false},
		{":0", ":0", false},
	} {
		_, err = config.Parse([]byte("database_url: x\nlisten: '"+tc.listen+"'\nadmin_listen: '"+tc.admin+"'\nsources:\n"+oneSource), env(nil))
		if !tc.refused {
			require.NoError(t, err, "%s and %s", tc.listen, tc.admin)
			continue
		}
		require.Equal(t, "admin_listen", fieldError(t, err).Path, "%s and %s", tc.listen, tc.admin)
		require.Contains(t, err.Error(), "takes the port of listen")
	}
	for key, src := range map[string]string{"database.max_conns": "database: {max_conns: -3}\n", "workers": "workers: 99999999\n"} {
		_, err = config.Parse([]byte("database_url: x\n"+src+"sources:\n"+oneSource), env(nil))
		require.Equal(t, key, fieldError(t, err).Path)
	}
}

func TestDestinationTimeoutWithinLease(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ dest, lease, want string }{
		{"{url: 'http://x', timeout: 10m}", "", "sources[0].destination.timeout: must be shorter than lease (5m0s): an attempt must finish within its lease"},
		{"{url: 'http://x', timeout: 30s}", "30s", "sources[0].destination.timeout: must be shorter than lease (30s): an attempt must finish within its lease"},
		{"{url: 'http://x'}", "5s", "sources[0].lease: must be longer than destination.timeout (10s, the default): an attempt must finish within its lease"},
		{"{url: 'http://x', timeout: -1s}", "", "sources[0].destination.timeout: must be positive"},
		{"{url: 'http://x', timeout: 29s}", "30s", ""},
		{"{url: 'http://x'}", "", ""},
		{"{timeout: 10m}", "", ""}, // no destination: nothing is forwarded
	} {
		lease := ""
		if tc.lease != "" {
			lease = ", lease: " + tc.lease
		}
		src := fmt.Sprintf("database_url: x\nsources:\n  - {name: a, provider: stripe, secrets: [s]%s, destination: %s}", lease, tc.dest)
		_, err := config.Parse([]byte(src), env(nil))
		if tc.want == "" {
			require.NoError(t, err, tc.dest)
			continue
		}
		fieldError(t, err)
		require.Equal(t, tc.want, err.Error())
	}
}

// With a Lookup (what Load uses), an empty variable is a deliberate "": it
// is only an unset one that is an error in a secret, token or URL field.
func TestLookupTellsEmptyFromUnset(t *testing.T) {
	t.Parallel()
	lookup := func(vars map[string]string) config.Lookup {
		return func(n string) (string, bool) { v, ok := vars[n]; return v, ok }
	}
	raw := []byte("database_url: x\nadmin_token: '${TOKEN}'\nsources:\n  - name: a\n    provider: stripe\n    secrets: [s]\n")
	c, err := config.ParseLookup(raw, lookup(map[string]string{"TOKEN": ""}))
	require.NoError(t, err)
	require.Empty(t, c.AdminToken, "set but empty: the admin API is off")
	_, err = config.ParseLookup(raw, lookup(nil))
	require.Equal(t, "admin_token", fieldError(t, err).Path)
	c, err = config.ParseLookup([]byte("database_url: x\nadmin_token: '${TOKEN:-d}'\nsources:\n  - name: a\n    provider: stripe\n    secrets: [s]\n"), lookup(map[string]string{"TOKEN": ""}))
	require.NoError(t, err)
	require.Equal(t, "d", c.AdminToken, "a default replaces an empty value, as in the shell")
}

// destinations: a list of named destinations, each a URL or a handler with
// its filters and flow control; destination: is the one named "default";
// both together is an error naming the field.
func TestDestinations(t *testing.T) {
	t.Parallel()
	base := "database_url: x\nsources:\n  - name: s\n    provider: stripe\n    secrets: [s]\n"
	c, err := config.Parse([]byte(base+`    destinations:
      - {name: billing, url: "http://b", types: ["invoice.*"], where: {"data.object.livemode": true}, rate_limit: 50/s, max_in_flight: 10, circuit: {failures: 20, cool_down: 1m}}
      - {name: ledger, handler: ledger, rate_limit: 120/m}
`), env(nil))
	require.NoError(t, err)
	ds := c.Sources[0].Destinations
	require.Len(t, ds, 2)
	require.Equal(t, 50.0, ds[0].Rate())
	require.Equal(t, 2.0, ds[1].Rate())
	require.True(t, ds[0].Matcher().Match("invoice.paid", []byte(`{"data":{"object":{"livemode":true}}}`)))
	require.False(t, ds[0].Matcher().Match("invoice.paid", []byte(`{"data":{"object":{"livemode":false}}}`)))
	require.True(t, ds[1].Matcher().Match("anything", nil), "no filter: every event")
	require.Equal(t, config.DefaultMaxAttempts, ds[1].MaxAttempts)

	c, err = config.Parse([]byte(base+"    destination: {url: \"http://x\"}\n"), env(nil))
	require.NoError(t, err)
	require.Len(t, c.Sources[0].Destinations, 1)
	require.Equal(t, config.DefaultDestination, c.Sources[0].Destinations[0].Name)

	for path, src := range map[string]string{
		"sources[0].destinations":                       "    destination: {url: \"http://x\"}\n    destinations: [{name: a, url: \"http://a\"}]\n",
		"sources[0].destinations[1].name":               "    destinations: [{name: a, url: \"http://a\"}, {name: a, url: \"http://b\"}]\n",
		"sources[0].destinations[0].name":               "    destinations: [{name: \"Bad Name\", url: \"http://a\"}]\n",
		"sources[0].destinations[0].url":                "    destinations: [{name: a}]\n",
		"sources[0].destinations[0].handler":            "    destinations: [{name: a, url: \"http://a\", handler: h}]\n",
		"sources[0].destinations[0].rate_limit":         "    destinations: [{name: a, url: \"http://a\", rate_limit: fast}]\n",
		"sources[0].destinations[0].max_in_flight":      "    destinations: [{name: a, url: \"http://a\", max_in_flight: -1}]\n",
		"sources[0].destinations[0].circuit.failures":   "    destinations: [{name: a, url: \"http://a\", circuit: {cool_down: 1m}}]\n",
		"sources[0].destinations[0].types[0]":           "    destinations: [{name: a, url: \"http://a\", types: [\" \"]}]\n",
		"sources[0].destination.name":                   "    destination: {name: other, url: \"http://x\"}\n",
		"sources[0].destinations[0].timeout":            "    lease: 1s\n    destinations: [{name: a, url: \"http://a\", timeout: 2s}]\n",
		"sources[0].destinations[0].types":              "    destinations: [{name: a, url: \"http://a\", types: []}]\n",
		"sources[0].destinations[0].where":              "    destinations: [{name: a, url: \"http://a\", where: {}}]\n",
		"sources[0].destinations[0].where.data.created": "    destinations: [{name: a, url: \"http://a\", where: {data.created: 2026-01-01}}]\n",
	} {
		_, err := config.Parse([]byte(base+src), env(nil))
		require.Equal(t, path, fieldError(t, err).Path, "%s: %v", src, err)
	}
	// An empty list names destinations, not the single destination's url.
	_, err = config.Parse([]byte(base+"    destinations: []\n"), env(nil))
	require.Equal(t, "sources[0].destinations", fieldError(t, err).Path, "%v", err)
	require.ErrorContains(t, err, "empty list")
}

// alerts: each names its bad field.
func TestAlerts(t *testing.T) {
	t.Parallel()
	base := "database_url: x\nsources:\n  - name: s\n    provider: stripe\n    secrets: [s]\n"
	c, err := config.Parse([]byte(base+"alerts:\n  - {url: \"https://hooks.example/x\", on: [dead, lag], lag_threshold: 2m}\n"), env(nil))
	require.NoError(t, err)
	r := c.Alerts[0].Rule()
	require.Equal(t, 2*time.Minute, r.LagThreshold)
	require.Equal(t, 5*time.Minute, r.MinInterval, "the default")
	_, err = config.Parse([]byte(base+"alerts:\n  - {url: \"https://hooks.example/x\", on: [dead, sometimes]}\n"), env(nil))
	require.Equal(t, "alerts[0].on[1]", fieldError(t, err).Path)
	_, err = config.Parse([]byte(base+"alerts:\n  - {url: \"${SLACK_URL}\"}\n"), env(nil))
	require.Equal(t, "alerts[0].url", fieldError(t, err).Path, "an unset variable in a URL")
}

func TestOrdering(t *testing.T) {
	t.Parallel()
	base := "database_url: x\nsources:\n  - name: s\n    provider: stripe\n    secrets: [s]\n"
	c, err := config.Parse([]byte(base+"    ordering: {key: \"json:data.object.id\", by: \"json:created\"}\n"), env(nil))
	require.NoError(t, err)
	o := c.Sources[0].Ordering
	require.Equal(t, "deliver", o.Stale, "the default")
	key, by := o.Resolvers()
	require.NotNil(t, key)
	require.NotNil(t, by)

	for _, tc := range []struct{ yaml, path string }{
		{"    ordering: {by: \"json:created\"}\n", "sources[0].ordering.key"},
		{"    ordering: {key: \"xml:id\"}\n", "sources[0].ordering.key"},
		{"    ordering: {key: \"json:id\", by: \"nope\"}\n", "sources[0].ordering.by"},
		{"    ordering: {key: \"json:id\", stale: drop}\n", "sources[0].ordering.stale"},
		{"    ordering: {key: \"json:id\", stale: skip}\n", "sources[0].ordering.stale"},
		{"    ordering: {key: \"body:sha256\"}\n", "sources[0].ordering.key"},
		{"    ordering: {key: \"json:id\", by: \"body:sha256\", stale: skip}\n", "sources[0].ordering.by"},
	} {
		_, err := config.Parse([]byte(base+tc.yaml), env(nil))
		require.Equal(t, tc.path, fieldError(t, err).Path, tc.yaml)
	}
}

func TestReconcile(t *testing.T) {
	t.Parallel()
	base := "database_url: x\nsources:\n  - name: s\n    provider: stripe\n    secrets: [s]\n"
	c, err := config.Parse([]byte(base+"    reconcile: {api_key: \"${STRIPE_API_KEY}\", every: 10m}\n"), env(map[string]string{"STRIPE_API_KEY": "rk_test_1"}))
	require.NoError(t, err)
	r := c.Sources[0].Reconcile
	require.Equal(t, 72*time.Hour, r.Lookback.D(), "the default")
	require.Equal(t, "https://api.stripe.com", r.APIURL, "the provider's default")
	require.Equal(t, "rk_test_1", r.APIKey)

	for _, tc := range []struct{ yaml, path string }{
		{"    reconcile: {api_key: \"${STRIPE_API_KEY}\"}\n", "sources[0].reconcile.api_key"},
		{"    reconcile: {every: 10m}\n", "sources[0].reconcile.api_key"},
		{"    reconcile: {api_key: k, every: 1ms}\n", "sources[0].reconcile.every"},
		{"    reconcile: {api_key: k, lookback: -1h}\n", "sources[0].reconcile.lookback"},
		{"    reconcile: {api_key: k, every: -1h}\n", "sources[0].reconcile.every"},
		{"    reconcile: {api_key: k, api_url: \"ftp://x\"}\n", "sources[0].reconcile.api_url"},
		{"    event_id: \"header:X-Id\"\n    reconcile: {api_key: k}\n", "sources[0].reconcile"},
	} {
		_, err := config.Parse([]byte(base+tc.yaml), env(nil))
		require.Equal(t, tc.path, fieldError(t, err).Path, tc.yaml)
	}
	_, err = config.Parse([]byte("database_url: x\nsources:\n  - name: g\n    provider: github\n    secrets: [s]\n    reconcile: {api_key: k}\n"), env(nil))
	fe := fieldError(t, err)
	require.Equal(t, "sources[0].reconcile", fe.Path)
	require.Contains(t, fe.Msg, "stripe", "names the providers that can be reconciled")
}

// An admin_token with white space around it (a secret file's newline) is an
// error naming the field: no Authorization header can carry it, so the admin
// API would answer every request 401.
func TestAdminTokenWhiteSpace(t *testing.T) {
	t.Parallel()
	raw := []byte("database_url: x\nadmin_token: '${TOKEN}'\nsources:\n" + oneSource)
	for _, tok := range []string{"tok\n", " tok", "tok\t", "\r\n", "  "} {
		_, err := config.Parse(raw, env(map[string]string{"TOKEN": tok}))
		require.Equal(t, "admin_token", fieldError(t, err).Path, "%q", tok)
		require.Contains(t, err.Error(), "white space", "%q", tok)
	}
	c, err := config.Parse(raw, env(map[string]string{"TOKEN": "tok en"}))
	require.NoError(t, err, "white space inside is the token's own")
	require.Equal(t, "tok en", c.AdminToken)
}
