// Package config loads hookline's YAML configuration: ${VAR} and
// ${VAR:-default} expansion from the environment (an unset variable without a
// default is an error in a secret, token, key, password or URL field), Go
// durations or days ("30d"), every default in one place (Defaults), unknown
// fields rejected, and validation errors that name the bad field by its YAML
// path ("sources[1].secrets: at least one secret is required").
//
// Internal: no stability promise.
package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/url"
	"os"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/hookline/hookline/internal/alert"
	"github.com/hookline/hookline/internal/defaults"
	"github.com/hookline/hookline/internal/reconcile"
	"github.com/hookline/hookline/internal/route"
	"github.com/hookline/hookline/providers"
	"github.com/hookline/hookline/providers/standardwebhooks"
)

// Defaults, from the one table (internal/defaults); docs/operations.md lists
// them.
const (
	DefaultListen       = defaults.Listen
	DefaultMaxBodyBytes = defaults.MaxBodyBytes
	DefaultWorkers      = defaults.Workers
	// MaxWorkers bounds workers: River runs up to twice as many jobs on a
	// destination's queue, and a queue takes at most 10,000.
	MaxWorkers               = 5000
	DefaultShutdownTimeout   = defaults.ShutdownTimeout
	DefaultOnDuplicate       = defaults.OnDuplicate
	DefaultLease             = defaults.Lease
	DefaultDedupWindow       = defaults.DedupWindow
	DefaultDestTimeout       = defaults.DestTimeout
	DefaultMaxAttempts       = defaults.MaxAttempts
	MaxMaxAttempts           = defaults.MaxMaxAttempts
	DefaultBackoffMin        = defaults.BackoffMin
	DefaultBackoffMax        = defaults.BackoffMax
	DefaultBatchSize         = defaults.BatchSize
	DefaultBatchWait         = defaults.BatchWait
	DefaultQueueTimeout      = defaults.QueueTimeout
	DefaultBodyTimeout       = defaults.BodyTimeout
	DefaultMaxPendingBytes   = defaults.MaxPendingBytes
	DefaultPoolSize          = defaults.PoolSize
	DefaultDeliveryRetention = defaults.DeliveryRetention
	DefaultReconcileLookback = defaults.ReconcileLookback
	DefaultServiceName       = defaults.ServiceName
)

// MinReconcileEvery is the shortest reconcile.every: a run lists the
// provider's events API over the whole lookback.
const MinReconcileEvery = time.Second

// Duration is a time.Duration written as a Go duration ("30s", "5m",
// "720h", "1h30m") or as a decimal number of days ("30d", "1.5d").
type Duration time.Duration

// daysRE is a decimal number of days, signed as Go durations may be.
var daysRE = regexp.MustCompile(`^[-+]?([0-9]+(\.[0-9]*)?|\.[0-9]+)d$`)

// parseDuration accepts exactly what time.ParseDuration accepts, or daysRE;
// nothing else (no surrounding spaces, no trailing garbage).
func parseDuration(s string) (time.Duration, bool) {
	if !daysRE.MatchString(s) {
		v, err := time.ParseDuration(s)
		return v, err == nil
	}
	// The number, read as hours (exact to the nanosecond), times 24.
	h, err := time.ParseDuration(strings.TrimSuffix(s, "d") + "h")
	if err != nil || h > math.MaxInt64/24 || h < math.MinInt64/24 {
		return 0, false
	}
	return 24 * h, true
}

// durationError is a value that is not a duration, at line:column of the
// document being decoded; Parse turns it into a FieldError.
type durationError struct {
	line, column int
	value        string
}

func (e *durationError) Error() string {
	return fmt.Sprintf("line %d: %s", e.line, e.msg())
}

func (e *durationError) msg() string {
	return fmt.Sprintf("%q is not a duration (write e.g. 30s, 5m, 720h or 30d)", e.value)
}

// UnmarshalYAML implements yaml.Unmarshaler. A null ("timeout:") leaves the
// zero value, which means the default, as for other fields.
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null" {
		return nil
	}
	v, ok := parseDuration(n.Value)
	if !ok || n.Kind != yaml.ScalarNode {
		return &durationError{line: n.Line, column: n.Column, value: n.Value}
	}
	*d = Duration(v)
	return nil
}

// D returns the value as a time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }

// Config is the whole file.
type Config struct {
	Listen      string `yaml:"listen"`
	AdminListen string `yaml:"admin_listen"` // empty: admin routes on listen
	// MetricsOnAdmin serves /metrics on admin_listen instead of listen; it
	// requires admin_listen.
	MetricsOnAdmin  bool       `yaml:"metrics_on_admin"`
	DatabaseURL     string     `yaml:"database_url"`
	AdminToken      string     `yaml:"admin_token"` // empty: admin routes answer 404
	MaxBodyBytes    int64      `yaml:"max_body_bytes"`
	Workers         int        `yaml:"workers"`
	ShutdownTimeout Duration   `yaml:"shutdown_timeout"`
	TLSCert         string     `yaml:"tls_cert"`
	TLSKey          string     `yaml:"tls_key"`
	Ingest          Ingest     `yaml:"ingest"`
	Processing      Processing `yaml:"processing"`
	Database        Database   `yaml:"database"`
	Retention       Retention  `yaml:"retention"`
	Log             Log        `yaml:"log"`
	Tracing         Tracing    `yaml:"tracing"`
	Sources         []*Source  `yaml:"sources"`
	Alerts          []*Alert   `yaml:"alerts"`
}

// Ingest tunes the ingest path.
type Ingest struct {
	// Batch: group commit (default true). false is the naive mode, one
	// transaction per request, kept for comparison.
	Batch *bool `yaml:"batch"`
	// BatchSize caps the deliveries committed together (default 32).
	BatchSize int `yaml:"batch_size"`
	// BatchWait is how long a forming batch may wait for company while
	// another batch is being committed (default 2ms). A request that finds
	// nothing being committed is written at once, never held.
	BatchWait Duration `yaml:"batch_wait"`
	// QueueTimeout bounds how long a request waits for the database before
	// it is answered 503 (default 3s).
	QueueTimeout Duration `yaml:"queue_timeout"`
	// MaxPendingBytes bounds the request bodies held in memory at once (read,
	// not yet answered); beyond it a request waits up to QueueTimeout for
	// room, then gets 503 (default 256 MiB, or 4 x max_body_bytes if more).
	MaxPendingBytes int64 `yaml:"max_pending_bytes"`
	// BodyTimeout bounds how long a request body may take to arrive; beyond
	// it the request is answered 408 (default 10s; positive).
	BodyTimeout Duration `yaml:"body_timeout"`
	// Pace: admission control under --role all (default true). While the
	// process's workers' oldest ready event has waited more than PaceLag
	// (default 250ms), each delivery waits up to PaceMaxDelay (default
	// 20ms) before it is read, so that senders who wait for their answers
	// send at the rate the workers process. Never with --role ingest.
	Pace         *bool    `yaml:"pace"`
	PaceLag      Duration `yaml:"pace_lag"`
	PaceMaxDelay Duration `yaml:"pace_max_delay"`
}

// Processing tunes the workers.
type Processing struct {
	// Batch: group commit on the worker side (default true): the claims of
	// concurrent jobs are taken in one statement, and their completions
	// recorded in one, each job answered after that statement's COMMIT.
	// false is the per-event path, one statement per claim and per
	// completion, kept for comparison.
	Batch *bool `yaml:"batch"`
}

// Database tunes the connection pool.
type Database struct {
	MaxConns int `yaml:"max_conns"` // default 20
}

// Retention prunes old data.
type Retention struct {
	// Deliveries: stored bodies of completed events older than this are
	// deleted (default 168h). Dead items are kept until deleted.
	Deliveries Duration `yaml:"deliveries"`
}

// Log configures logging.
type Log struct {
	Format string `yaml:"format"` // json | text (default json; `hookline dev` uses text)
	Level  string `yaml:"level"`  // debug | info | warn | error (default info)
}

// Tracing configures OpenTelemetry traces (docs/operations.md, Tracing).
// Trace ids are kept and forwarded with or without an exporter.
type Tracing struct {
	// OTLPEndpoint is an OTLP/HTTP collector's base URL (e.g.
	// http://otel-collector:4318); spans go to its /v1/traces. Empty: no
	// spans are exported.
	OTLPEndpoint string `yaml:"otlp_endpoint"`
	// SampleRatio is the share of new traces recorded (0..1, default 1); a
	// trace continued from a sender follows the sender's decision.
	SampleRatio *float64 `yaml:"sample_ratio"`
	// ServiceName is the service.name of the spans (default hookline).
	ServiceName string `yaml:"service_name"`
}

// Source is one webhook sender.
type Source struct {
	Name           string   `yaml:"name"`
	Provider       string   `yaml:"provider"`
	Secrets        []string `yaml:"secrets"`
	Tolerance      Duration `yaml:"tolerance"`
	OnDuplicate    string   `yaml:"on_duplicate"`
	Lease          Duration `yaml:"lease"`
	DedupWindow    Duration `yaml:"dedup_window"`
	EventID        string   `yaml:"event_id"`
	EventType      string   `yaml:"event_type"`
	MaxConcurrency int      `yaml:"max_concurrency"` // concurrent ingest requests; 0 = unlimited
	// Destination is the single destination of the one-destination form;
	// Destinations the list (not both). After Validate, Destinations holds
	// every destination, a single one named "default".
	Destination  *Destination   `yaml:"destination"`
	Destinations []*Destination `yaml:"destinations"`
	// Ordering serialises, per destination, the events that share a key.
	Ordering *Ordering `yaml:"ordering"`
	// Reconcile lists the provider's events and stores those never
	// delivered.
	Reconcile *Reconcile `yaml:"reconcile"`
	// Settings holds the provider-specific block (`paypal: {...}`).
	Settings map[string]yaml.Node `yaml:",inline"`

	provider providers.Provider
	eventID  providers.KeyResolver
	evType   providers.KeyResolver
}

// Destination is where a source's events are forwarded: an HTTP URL, or a
// Go handler registered under Handler (transactional mode).
type Destination struct {
	Name    string `yaml:"name"`    // [a-z0-9_-]{1,64}, unique within the source; "default" for a single destination
	URL     string `yaml:"url"`     // an HTTP destination, or
	Handler string `yaml:"handler"` // a Go handler registered under this name
	// Types are globs on the event type ("invoice.*"); Where maps JSON
	// paths into the raw body to the values they must equal. Absent: all.
	Types       []string       `yaml:"types"`
	Where       map[string]any `yaml:"where"`
	Timeout     Duration       `yaml:"timeout"`
	MaxAttempts int            `yaml:"max_attempts"`
	Backoff     Backoff        `yaml:"backoff"`
	Secret      string         `yaml:"secret"`
	// RateLimit is "N/s" or "N/m", across all instances; MaxInFlight the
	// concurrent requests across all instances (0: workers). Circuit opens
	// after Failures consecutive failed attempts, for CoolDown.
	RateLimit   string   `yaml:"rate_limit"`
	MaxInFlight int      `yaml:"max_in_flight"`
	Circuit     *Circuit `yaml:"circuit"`

	ratePerSecond float64
	matcher       *route.Matcher
	path          string // its YAML path, for errors found later (Path)
}

// Ordering is a source's per-key ordering.
type Ordering struct {
	// Key resolves the ordering key (a key resolver); events whose key
	// resolves to nothing are unordered.
	Key string `yaml:"key"`
	// By resolves the provider's time or sequence (a number or an RFC 3339
	// time); optional. With it, an event older than one already forwarded
	// for its key is stale.
	By string `yaml:"by"`
	// Stale is what happens to a stale event: deliver (with
	// Hookline-Stale: true; the default) or skip.
	Stale string `yaml:"stale"`

	key, by providers.KeyResolver
}

// Resolvers returns the parsed key and by resolvers (by is nil when unset).
func (o *Ordering) Resolvers() (key, by providers.KeyResolver) { return o.key, o.by }

// Reconcile is a source's reconciliation against its provider's events API.
type Reconcile struct {
	Every    Duration `yaml:"every"`    // how often; 0: only on demand
	Lookback Duration `yaml:"lookback"` // how far back a run looks (default 72h)
	APIKey   string   `yaml:"api_key"`  // read-only access to the provider's events
	APIURL   string   `yaml:"api_url"`  // default: the provider's production API
}

// Alert sends operator alerts to a Slack-compatible incoming webhook.
type Alert struct {
	URL string `yaml:"url"`
	// On lists the kinds: dead, circuit_open, lag (absent: all three).
	On           []string `yaml:"on"`
	LagThreshold Duration `yaml:"lag_threshold"` // lag: oldest queued event older than this (default 5m)
	MinInterval  Duration `yaml:"min_interval"`  // at most one alert per (kind, source, destination) per interval (default 5m)
}

// Rule is the alert as package alert takes it, its defaults filled.
func (a *Alert) Rule() alert.Rule {
	return alert.Rule{URL: a.URL, On: a.On, LagThreshold: a.LagThreshold.D(), MinInterval: a.MinInterval.D()}.WithDefaults()
}

// Circuit configures a destination's circuit breaker.
type Circuit struct {
	Failures int      `yaml:"failures"`
	CoolDown Duration `yaml:"cool_down"`
}

// DefaultDestination is the name of a source's single destination.
const DefaultDestination = "default"

// Rate is the destination's rate limit in requests per second (0: none).
func (d *Destination) Rate() float64 { return d.ratePerSecond }

// Matcher is the destination's filter (types and where), built by Validate.
func (d *Destination) Matcher() *route.Matcher { return d.matcher }

// Path is the destination's YAML path ("sources[0].destination",
// "sources[1].destinations[2]"), for naming its fields in errors found
// after validation.
func (d *Destination) Path() string { return d.path }

// Backoff bounds the exponential, jittered delay between attempts.
type Backoff struct {
	Min Duration `yaml:"min"`
	Max Duration `yaml:"max"`
}

// Adapter returns the source's adapter, built by Validate.
func (s *Source) Adapter() providers.Provider { return s.provider }

// KeyResolvers returns the source's event_id and event_type overrides (nil when unset).
func (s *Source) KeyResolvers() (id, typ providers.KeyResolver) { return s.eventID, s.evType }

// BatchEnabled reports whether group commit is on.
func (c *Config) BatchEnabled() bool { return c.Ingest.Batch == nil || *c.Ingest.Batch }

// PaceEnabled reports whether ingest paces itself to the workers under
// --role all (ingest.pace, default true).
func (c *Config) PaceEnabled() bool { return c.Ingest.Pace == nil || *c.Ingest.Pace }

// ProcessingBatchEnabled reports whether the workers group-commit their
// claims and completions.
func (c *Config) ProcessingBatchEnabled() bool {
	return c.Processing.Batch == nil || *c.Processing.Batch
}

// FieldError is a validation error naming a field by its YAML path.
type FieldError struct {
	Path string
	Msg  string
}

func (e *FieldError) Error() string { return e.Path + ": " + e.Msg }

// ErrInvalid is wrapped by every validation and parse error (exit code 2).
var ErrInvalid = errors.New("invalid configuration")

type invalid struct{ err error }

func (e invalid) Error() string   { return e.err.Error() }
func (e invalid) Unwrap() []error { return []error{ErrInvalid, e.err} }
func wrap(err error) error        { return invalid{err} }
func field(path, format string, args ...any) error {
	return wrap(&FieldError{Path: path, Msg: fmt.Sprintf(format, args...)})
}

// Invalid is a validation error (ErrInvalid, exit code 2) naming the field
// at path: for what is checked outside this package, where the
// configuration meets what the program offers (its Go handlers, a database).
func Invalid(path, format string, args ...any) error { return field(path, format, args...) }

// Load reads and validates the file at path.
func Load(path string) (*Config, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, wrap(fmt.Errorf("read config: %w", err))
	}
	return ParseLookup(raw, os.LookupEnv)
}

// Lookup reads an environment variable: its value, and whether it is set
// (os.LookupEnv).
type Lookup func(name string) (string, bool)

// Parse parses and validates raw YAML, expanding ${VAR} and
// ${VAR:-default} with getenv, for which an empty value counts as unset.
func Parse(raw []byte, getenv func(string) string) (*Config, error) {
	return ParseLookup(raw, func(name string) (string, bool) {
		v := getenv(name)
		return v, v != ""
	})
}

// ParseLookup is Parse with a Lookup that tells unset variables from empty
// ones: an empty variable in a secret, token or URL field is a deliberate
// "" (admin_token: "" turns the admin API off), an unset one an error.
func ParseLookup(raw []byte, lookup Lookup) (*Config, error) {
	root, err := document(raw)
	if err != nil {
		return nil, err
	}
	c, err := decode(root, lookup)
	if err != nil {
		return nil, err
	}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return c, nil
}

// document parses raw, one YAML document: a second (after a --- line)
// would be ignored, so it is refused.
func document(raw []byte) (*yaml.Node, error) {
	docs := yaml.NewDecoder(bytes.NewReader(raw))
	var root, second yaml.Node
	if err := docs.Decode(&root); err != nil && !errors.Is(err, io.EOF) {
		return nil, wrap(fmt.Errorf("config: %w", err))
	}
	if docs.Decode(&second) == nil {
		return nil, wrap(fmt.Errorf("config: the file holds more than one YAML document (a --- line), and only the first would be read; keep one"))
	}
	return &root, nil
}

// decode expands root's ${VAR} references with lookup and decodes it into
// a Config, not yet validated; errors name the field.
func decode(root *yaml.Node, lookup Lookup) (*Config, error) {
	unsetAt, err := expand(root, lookup)
	if err != nil {
		return nil, err
	}
	expanded, err := yaml.Marshal(root)
	if err != nil {
		return nil, wrap(err)
	}
	if err := wholeNumbers(root, reflect.TypeFor[Config](), ""); err != nil {
		return nil, err
	}
	dec := yaml.NewDecoder(bytes.NewReader(expanded))
	dec.KnownFields(true)
	var c Config
	if err := dec.Decode(&c); err != nil && !errors.Is(err, io.EOF) {
		// Positions are those of expanded, so look paths up there.
		var doc yaml.Node
		if yaml.Unmarshal(expanded, &doc) == nil {
			var named error
			var de *durationError
			var te *yaml.TypeError
			if errors.As(err, &de) {
				if p := pathAt(&doc, de.line, de.column); p != "" {
					named = field(p, "%s", de.msg())
				}
			}
			if named == nil && errors.As(err, &te) {
				named = nameTypeError(&doc, te)
			}
			var fe *FieldError
			if errors.As(named, &fe) && unsetAt[fe.Path] != "" {
				// The value the field cannot take is an unset variable's "".
				return nil, unsetError(fe.Path, unsetAt[fe.Path])
			}
			if named != nil {
				return nil, named
			}
		}
		return nil, wrap(fmt.Errorf("config: %w", err))
	}
	return &c, nil
}

var nameRE = regexp.MustCompile(`^[a-z0-9_-]{1,64}$`)

// Validate applies defaults, checks every field and builds each source's
// provider. Errors wrap ErrInvalid and name the field.
func (c *Config) Validate() error {
	for _, step := range []func() error{c.validateServer, c.validateIngest, c.validateSources, c.validateAlerts} {
		if err := step(); err != nil {
			return err
		}
	}
	return nil
}

// orDefault sets a zero duration to def; a negative one is an error naming
// path.
func orDefault(d *Duration, def time.Duration, path string) error {
	if *d == 0 {
		*d = Duration(def)
	}
	if *d < 0 {
		return field(path, "must be positive")
	}
	return nil
}

// validateDatabase applies database's default and checks it.
func (c *Config) validateDatabase() error {
	if c.Database.MaxConns == 0 {
		c.Database.MaxConns = DefaultPoolSize
	}
	if c.Database.MaxConns < 0 {
		return field("database.max_conns", "must be positive")
	}
	return nil
}

func (c *Config) validateServer() error {
	if c.Listen == "" {
		c.Listen = DefaultListen
	}
	if c.MaxBodyBytes == 0 {
		c.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if c.MaxBodyBytes < 0 {
		return field("max_body_bytes", "must be positive")
	}
	if c.Workers == 0 {
		c.Workers = DefaultWorkers
	}
	if c.Workers < 0 {
		return field("workers", "must be positive")
	}
	if c.Workers > MaxWorkers {
		return field("workers", "at most %d (River runs up to twice as many jobs per destination, and at most 10,000 per queue)", MaxWorkers)
	}
	if err := orDefault(&c.ShutdownTimeout, DefaultShutdownTimeout, "shutdown_timeout"); err != nil {
		return err
	}
	if c.AdminToken != "" && strings.TrimSpace(c.AdminToken) != c.AdminToken {
		// An Authorization header cannot carry it (HTTP trims a header
		// value), so no request could ever authenticate.
		return field("admin_token", "has leading or trailing white space (a newline from a secret file?), which no Authorization header can carry; remove it")
	}
	if c.MetricsOnAdmin && c.AdminListen == "" {
		return field("metrics_on_admin", "requires admin_listen (without it, /metrics is served on listen)")
	}
	if err := c.validateDatabase(); err != nil {
		return err
	}
	if c.AdminListen != "" && sharesPort(c.Listen, c.AdminListen) {
		return field("admin_listen", "%q takes the port of listen (%q); give the admin API an address of its own, or leave admin_listen empty to serve it on listen", c.AdminListen, c.Listen)
	}
	if err := orDefault(&c.Retention.Deliveries, DefaultDeliveryRetention, "retention.deliveries"); err != nil {
		return err
	}
	switch c.Log.Format {
	case "", "json", "text":
	default:
		return field("log.format", "%q: want json or text", c.Log.Format)
	}
	switch c.Log.Level {
	case "", "debug", "info", "warn", "error":
	default:
		return field("log.level", "%q: want debug, info, warn or error", c.Log.Level)
	}
	if (c.TLSCert == "") != (c.TLSKey == "") {
		return field("tls_key", "tls_cert and tls_key go together")
	}
	return c.validateTracing()
}

func (c *Config) validateTracing() error {
	t := &c.Tracing
	if t.ServiceName == "" {
		t.ServiceName = DefaultServiceName
	}
	if t.SampleRatio == nil {
		one := 1.0
		t.SampleRatio = &one
	}
	if r := *t.SampleRatio; r < 0 || r > 1 || r != r {
		return field("tracing.sample_ratio", "%v: want a number between 0 and 1", r)
	}
	if t.OTLPEndpoint != "" {
		u, err := url.Parse(t.OTLPEndpoint)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return field("tracing.otlp_endpoint", "%q: want an http or https URL such as http://otel-collector:4318", t.OTLPEndpoint)
		}
	}
	return nil
}

func (c *Config) validateIngest() error {
	in := &c.Ingest
	if in.BatchSize == 0 {
		in.BatchSize = DefaultBatchSize
	}
	if in.BatchSize < 1 || in.BatchSize > 1000 {
		return field("ingest.batch_size", "must be between 1 and 1000")
	}
	for _, d := range []struct {
		d    *Duration
		def  time.Duration
		path string
	}{
		{&in.BatchWait, DefaultBatchWait, "ingest.batch_wait"},
		{&in.QueueTimeout, DefaultQueueTimeout, "ingest.queue_timeout"},
		{&in.BodyTimeout, DefaultBodyTimeout, "ingest.body_timeout"},
		{&in.PaceLag, defaults.PaceLag, "ingest.pace_lag"},
		{&in.PaceMaxDelay, defaults.PaceMaxDelay, "ingest.pace_max_delay"},
	} {
		if err := orDefault(d.d, d.def, d.path); err != nil {
			return err
		}
	}
	if in.PaceMaxDelay >= in.QueueTimeout {
		return field("ingest.pace_max_delay", "must be shorter than ingest.queue_timeout (%s)", in.QueueTimeout.D())
	}
	if in.MaxPendingBytes == 0 {
		in.MaxPendingBytes = max(DefaultMaxPendingBytes, 4*c.MaxBodyBytes)
	}
	if in.MaxPendingBytes < c.MaxBodyBytes {
		return field("ingest.max_pending_bytes", "must be at least max_body_bytes (%d)", c.MaxBodyBytes)
	}
	return nil
}

func (c *Config) validateSources() error {
	if len(c.Sources) == 0 {
		return field("sources", "at least one source is required")
	}
	seen := map[string]int{}
	for i, s := range c.Sources {
		p := fmt.Sprintf("sources[%d]", i)
		if s == nil {
			return field(p, "empty source")
		}
		if err := s.validate(p); err != nil {
			return err
		}
		if j, dup := seen[s.Name]; dup {
			return field(p+".name", "%q is already used by sources[%d]", s.Name, j)
		}
		seen[s.Name] = i
	}
	return nil
}

func (c *Config) validateAlerts() error {
	for i, a := range c.Alerts {
		p := fmt.Sprintf("alerts[%d]", i)
		if a == nil {
			return field(p, "empty alert")
		}
		if err := (alert.Rule{URL: a.URL, On: a.On, LagThreshold: a.LagThreshold.D(), MinInterval: a.MinInterval.D()}).Validate(); err != nil {
			var fe *alert.FieldError
			if errors.As(err, &fe) {
				return field(p+"."+fe.Field, "%s", fe.Msg)
			}
			return field(p, "%v", err)
		}
	}
	return nil
}

// validate checks one source (at YAML path p) and builds its provider.
func (s *Source) validate(p string) error {
	factory, err := s.validateIdentity(p)
	if err != nil {
		return err
	}
	for _, step := range []func(string) error{s.validateTiming, s.validateResolvers, s.validateDestinations, s.validateOrdering, s.validateReconcile} {
		if err := step(p); err != nil {
			return err
		}
	}
	return s.buildProvider(p, factory)
}

// validateIdentity checks the name, the provider, the secrets and the
// provider settings block.
func (s *Source) validateIdentity(p string) (providers.Factory, error) {
	if !nameRE.MatchString(s.Name) {
		return nil, field(p+".name", "%q: want 1-64 characters of a-z, 0-9, _ and -", s.Name)
	}
	if s.Provider == "" {
		return nil, field(p+".provider", "required (one of: %s)", strings.Join(providers.Names(), ", "))
	}
	factory, ok := providers.Lookup(s.Provider)
	if !ok {
		return nil, field(p+".provider", "unknown provider %q (known: %s)", s.Provider, strings.Join(providers.Names(), ", "))
	}
	for i, sec := range s.Secrets {
		if strings.TrimSpace(sec) == "" {
			return nil, field(fmt.Sprintf("%s.secrets[%d]", p, i), "empty (is the environment variable set?)")
		}
	}
	for k := range s.Settings {
		if k != s.Provider && !(k == "svix" && s.Provider == "standardwebhooks") {
			return nil, field(p+"."+k, "unknown field (provider-specific settings go in a block named %q)", s.Provider)
		}
	}
	return factory, nil
}

// validateTiming checks on_duplicate, tolerance, lease, dedup_window and
// max_concurrency.
func (s *Source) validateTiming(p string) error {
	switch s.OnDuplicate {
	case "":
		s.OnDuplicate = DefaultOnDuplicate
	case "skip", "reject":
	default:
		return field(p+".on_duplicate", "%q: want skip or reject", s.OnDuplicate)
	}
	if s.Tolerance < 0 {
		return field(p+".tolerance", "must not be negative")
	}
	if s.Lease == 0 {
		s.Lease = Duration(DefaultLease)
	}
	if s.Lease < Duration(time.Second/10) {
		return field(p+".lease", "must be at least 100ms")
	}
	if s.DedupWindow == 0 {
		s.DedupWindow = Duration(DefaultDedupWindow)
	}
	if s.DedupWindow < 0 {
		return field(p+".dedup_window", "must not be negative")
	}
	if s.MaxConcurrency < 0 {
		return field(p+".max_concurrency", "must not be negative")
	}
	return nil
}

// validateResolvers parses event_id and event_type.
func (s *Source) validateResolvers(p string) error {
	var err error
	if s.EventID != "" {
		if s.eventID, err = providers.ParseKeyResolver(s.EventID); err != nil {
			return field(p+".event_id", "%v", err)
		}
	} else if s.Provider == "hmac" {
		return field(p+".event_id", "provider hmac requires an event_id resolver (header:NAME, json:path, form:FIELD or body:sha256)")
	}
	if s.EventType != "" {
		if s.evType, err = providers.ParseKeyResolver(s.EventType); err != nil {
			return field(p+".event_type", "%v", err)
		}
	}
	return nil
}

// validateOrdering checks ordering: a key resolver, an optional by
// resolver, stale deliver or skip.
func (s *Source) validateOrdering(p string) error {
	o := s.Ordering
	if o == nil {
		return nil
	}
	p += ".ordering"
	var err error
	if o.Key == "" {
		return field(p+".key", "required: a key resolver (json:path, header:NAME or form:FIELD) naming what orders events, e.g. json:data.object.id")
	}
	if o.key, err = providers.ParseKeyResolver(o.Key); err != nil {
		return field(p+".key", "%v", err)
	}
	// body:sha256 names no field: as a key it gives every event a line of
	// its own (nothing is ordered), as by a digest that is never a number
	// or a time (nothing is ever stale).
	if strings.HasPrefix(o.Key, "body:") {
		return field(p+".key", "%q: the body's digest differs for every event, so nothing would be ordered; want json:path, header:NAME or form:FIELD naming what orders events, e.g. json:data.object.id", o.Key)
	}
	if o.By != "" {
		if o.by, err = providers.ParseKeyResolver(o.By); err != nil {
			return field(p+".by", "%v", err)
		}
		if strings.HasPrefix(o.By, "body:") {
			return field(p+".by", "%q: a digest is neither a number nor a time, so no event would ever be stale; want json:path, header:NAME or form:FIELD naming the provider's time or sequence, e.g. json:created", o.By)
		}
	}
	switch o.Stale {
	case "":
		o.Stale = "deliver"
	case "deliver", "skip":
		if o.Stale == "skip" && o.By == "" {
			return field(p+".stale", "skip needs ordering.by: without it no event is ever stale")
		}
	default:
		return field(p+".stale", "%q: want deliver or skip", o.Stale)
	}
	return nil
}

// validateReconcile checks reconcile: a provider with an events API, an API
// key, positive durations and an http(s) api_url.
func (s *Source) validateReconcile(p string) error {
	r := s.Reconcile
	if r == nil {
		return nil
	}
	p += ".reconcile"
	def, ok := reconcile.DefaultAPIURL(s.Provider)
	if !ok {
		return field(p, "provider %s has no events API hookline can list (reconcile supports: %s)", s.Provider, strings.Join(reconcile.Providers(), ", "))
	}
	if strings.TrimSpace(r.APIKey) == "" {
		return field(p+".api_key", "required: an API key with read access to the provider's events (is the environment variable set?)")
	}
	if r.Every < 0 {
		return field(p+".every", "must not be negative (absent: only on demand)")
	}
	if r.Every > 0 && r.Every < Duration(MinReconcileEvery) {
		return field(p+".every", "%s: at least %s (each run lists the provider's events over lookback; absent or 0: only on demand)", r.Every.D(), MinReconcileEvery)
	}
	if r.Lookback == 0 {
		r.Lookback = Duration(DefaultReconcileLookback)
	}
	if r.Lookback < 0 {
		return field(p+".lookback", "must be positive")
	}
	if r.APIURL == "" {
		r.APIURL = def
	}
	if u, err := url.Parse(r.APIURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return field(p+".api_url", "%q: want an http(s) URL", r.APIURL)
	}
	if s.EventID != "" && !strings.HasPrefix(s.EventID, "json:") {
		return field(p, "event_id %q cannot be read from an event the API lists (no headers); use a json: resolver or the provider's default", s.EventID)
	}
	return nil
}

// validateDestinations checks destination or destinations (not both) and
// leaves every destination in Destinations.
func (s *Source) validateDestinations(p string) error {
	switch {
	case s.Destination != nil && len(s.Destinations) > 0:
		return field(p+".destinations", "give destination or destinations, not both")
	case s.Destination != nil:
		if s.Destination.Name != "" && s.Destination.Name != DefaultDestination {
			return field(p+".destination.name", "a single destination is named %q; use destinations: for named ones", DefaultDestination)
		}
		s.Destination.Name = DefaultDestination
		s.Destinations = []*Destination{s.Destination}
		return s.validateDestination(p, p+".destination", s.Destination, false)
	case s.Destinations != nil && len(s.Destinations) == 0:
		return field(p+".destinations", "empty list: list at least one destination, or write destination: for a single one")
	case len(s.Destinations) == 0:
		// No destination: an ingest-only source, or one whose Go handler is
		// registered under the source's name.
		s.Destination = &Destination{Name: DefaultDestination}
		s.Destinations = []*Destination{s.Destination}
		return s.validateDestination(p, p+".destination", s.Destination, false)
	}
	seen := map[string]int{}
	for i, d := range s.Destinations {
		dp := fmt.Sprintf("%s.destinations[%d]", p, i)
		if d == nil {
			return field(dp, "empty destination")
		}
		if !nameRE.MatchString(d.Name) {
			return field(dp+".name", "%q: want 1-64 characters of a-z, 0-9, _ and -", d.Name)
		}
		if j, dup := seen[d.Name]; dup {
			return field(dp+".name", "%q is already used by destinations[%d]", d.Name, j)
		}
		seen[d.Name] = i
		if err := s.validateDestination(p, dp, d, true); err != nil {
			return err
		}
	}
	return nil
}

// validateDestination checks one destination at path p of the source at
// path sp: what it is (URL or handler; listed ones need one), its filters,
// its timeout against the lease (an attempt runs under its lease), attempts,
// backoff, signing secret and flow control.
func (s *Source) validateDestination(sp, p string, d *Destination, listed bool) error {
	d.path = p
	if err := d.validateTarget(p, listed); err != nil {
		return err
	}
	m, err := route.Compile(d.Types, d.Where)
	if err != nil {
		return field(p+"."+err.Field, "%s", err.Msg)
	}
	d.matcher = m
	// The error names the field the user wrote: timeout, unless defaulted.
	timeoutSet := d.Timeout != 0
	if err := orDefault(&d.Timeout, DefaultDestTimeout, p+".timeout"); err != nil {
		return err
	}
	if (d.URL != "" || d.Handler != "") && d.Timeout >= s.Lease {
		if !timeoutSet {
			return field(sp+".lease", "must be longer than destination.timeout (%s, the default): an attempt must finish within its lease", d.Timeout.D())
		}
		return field(p+".timeout", "must be shorter than lease (%s): an attempt must finish within its lease", s.Lease.D())
	}
	if err := d.validateRetries(p); err != nil {
		return err
	}
	return d.validateFlow(p)
}

func (d *Destination) validateTarget(p string, listed bool) error {
	if d.URL != "" && d.Handler != "" {
		return field(p+".handler", "give url or handler, not both")
	}
	if listed && d.URL == "" && d.Handler == "" {
		return field(p+".url", "required (or handler: the name of a registered Go handler)")
	}
	if d.URL != "" {
		u, err := url.Parse(d.URL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return field(p+".url", "%q: want an absolute http(s) URL", d.URL)
		}
	}
	return nil
}

func (d *Destination) validateRetries(p string) error {
	if d.MaxAttempts == 0 {
		d.MaxAttempts = DefaultMaxAttempts
	}
	if d.MaxAttempts < 1 {
		return field(p+".max_attempts", "must be at least 1")
	}
	if d.MaxAttempts > MaxMaxAttempts {
		return field(p+".max_attempts", "must be at most %d (River stores a job's attempt cap, 4 × max_attempts, as a smallint)", MaxMaxAttempts)
	}
	if err := orDefault(&d.Backoff.Min, DefaultBackoffMin, p+".backoff.min"); err != nil {
		return err
	}
	if d.Backoff.Max == 0 {
		d.Backoff.Max = Duration(DefaultBackoffMax)
	}
	if d.Backoff.Max < d.Backoff.Min {
		return field(p+".backoff.max", "must not be less than backoff.min")
	}
	// Decoded here as forwarding will decode it: a secret that does not
	// decode would dead-letter every event.
	if d.Secret != "" {
		if !strings.HasPrefix(d.Secret, standardwebhooks.SecretPrefix) {
			return field(p+".secret", "want a Standard Webhooks secret: whsec_ followed by base64")
		}
		if _, err := standardwebhooks.DecodeSecret(d.Secret); err != nil {
			return field(p+".secret", "want a Standard Webhooks secret: whsec_ followed by base64 (standard alphabet, padded) of at least one byte")
		}
	}
	return nil
}

// validateFlow checks rate_limit, max_in_flight and circuit.
func (d *Destination) validateFlow(p string) error {
	if d.RateLimit != "" {
		n, unit, ok := strings.Cut(strings.TrimSpace(d.RateLimit), "/")
		v, err := strconv.ParseFloat(strings.TrimSpace(n), 64)
		per := map[string]float64{"s": 1, "m": 60}[strings.TrimSpace(unit)]
		if !ok || err != nil || per == 0 || v <= 0 || math.IsInf(v, 0) || math.IsNaN(v) {
			return field(p+".rate_limit", "%q: want N/s or N/m with N > 0 (e.g. 50/s)", d.RateLimit)
		}
		d.ratePerSecond = v / per
	}
	if d.MaxInFlight < 0 {
		return field(p+".max_in_flight", "must not be negative")
	}
	if d.MaxInFlight > 1000 {
		return field(p+".max_in_flight", "must be at most 1000")
	}
	if c := d.Circuit; c != nil {
		if c.Failures < 1 {
			return field(p+".circuit.failures", "must be at least 1")
		}
		if c.CoolDown <= 0 {
			return field(p+".circuit.cool_down", "must be positive (e.g. 1m)")
		}
	}
	return nil
}

// buildProvider builds the source's adapter from its settings block.
func (s *Source) buildProvider(p string, factory providers.Factory) error {
	settings := s.Settings[s.Provider]
	pc := providers.Config{
		Source:    s.Name,
		Secrets:   s.Secrets,
		Tolerance: s.Tolerance.D(),
		Settings: func(v any) error {
			if settings.Kind == 0 {
				return nil
			}
			raw, err := yaml.Marshal(&settings)
			if err != nil {
				return err
			}
			dec := yaml.NewDecoder(bytes.NewReader(raw))
			dec.KnownFields(true)
			return dec.Decode(v)
		},
	}
	prov, err := factory(pc)
	if err != nil {
		// Adapters name their own fields ("secrets: ...", "paypal.webhook_id: ..."); prefix the source.
		return wrap(fmt.Errorf("%s.%s", p, err.Error()))
	}
	if _, batch := prov.(providers.Splitter); batch {
		// A batch adapter resolves each item's id and type itself; a
		// resolver here would be silently ignored.
		if s.EventID != "" {
			return field(p+".event_id", "provider %s splits each delivery into items and resolves each item's id itself; event_id does not apply (remove it)", s.Provider)
		}
		if s.EventType != "" {
			return field(p+".event_type", "provider %s splits each delivery into items and resolves each item's type itself; event_type does not apply (remove it)", s.Provider)
		}
	}
	s.provider = prov
	return nil
}

// sharesPort reports whether listening on a and on b (host:port) would take
// the same port of some interface, so that the second listener could not
// start: equal ports other than 0 (0 is a free port each) on equal hosts, or
// with either host a wildcard ("", 0.0.0.0, ::), which Go listens on for
// every interface and address family.
func sharesPort(a, b string) bool {
	hostA, portA, errA := net.SplitHostPort(a)
	hostB, portB, errB := net.SplitHostPort(b)
	if errA != nil || errB != nil {
		return a == b
	}
	if portA != portB || portA == "0" {
		return false
	}
	wildcard := func(h string) bool { return h == "" || h == "0.0.0.0" || h == "::" }
	return hostA == hostB || wildcard(hostA) || wildcard(hostB)
}
