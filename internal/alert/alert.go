// Package alert sends operator alerts to Slack-compatible incoming webhooks
// (Slack, Mattermost and others that accept {"text": ...}).
//
// A Rule names a webhook URL and the kinds it wants:
//
//   - dead: events of a (source, destination) went to the dead set with
//     reason "failed" (their attempts ran out, or no running instance
//     configures the destination any more; never "duplicate"). count is the number of such items that died since the
//     previous dead alert of that key, or since alerting started.
//   - circuit_open: a destination's circuit breaker opened. One alert per
//     opening (opened_at newer than the key's previous alert) while the
//     circuit is not closed again; count is always 1, the failure streak is
//     in the text.
//   - lag: the oldest queued event of a (source, destination) is older than
//     lag_threshold. Repeated every min_interval while that holds; count is
//     the number of queued events older than lag_threshold.
//
// Every alert is one POST of a JSON object:
//
//	{"text": "hookline: 3 events of stripe → billing went to the dead set (reason failed)",
//	 "kind": "dead", "source": "stripe", "destination": "billing", "count": 3,
//	 "at": "2024-05-01T12:00:00Z"}
//
// text is one line; &, < and > in it are escaped as Slack requires. at is
// when the alert was claimed (RFC 3339, UTC).
//
// Scan runs one pass; the caller runs it periodically (every 10 s) on one
// instance. State lives in hookline_alerts, so instances agree: at most one
// alert per (url, kind, source, destination) per min_interval, claimed
// atomically in Postgres before the POST (sql.go describes the statements
// and the per-URL watermark). A send that fails releases its claim, so the
// next scan retries it. A failing endpoint never affects event processing:
// every POST is bounded by a timeout, errors are logged, and Scan never
// panics.
//
// Internal: no stability promise.
package alert

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// The kinds of alert, as written in a rule's `on`.
const (
	KindDead        = "dead"
	KindCircuitOpen = "circuit_open"
	KindLag         = "lag"
)

// allKinds is every kind, in the order a rule scans them.
var allKinds = []string{KindDead, KindCircuitOpen, KindLag}

// Defaults.
const (
	DefaultLagThreshold = 5 * time.Minute
	DefaultMinInterval  = 5 * time.Minute
	// DefaultTimeout bounds one POST when New is given no client, or a
	// client without a Timeout.
	DefaultTimeout = 10 * time.Second
)

// Rule is one alert target: the `alerts:` entries of the configuration.
type Rule struct {
	// URL is the incoming webhook. It usually holds a secret token: it is
	// never logged nor put in an error, only its scheme and host.
	URL string
	// On lists the kinds to send; empty means every kind.
	On []string
	// LagThreshold is the age of the oldest queued event that raises a lag
	// alert; zero means DefaultLagThreshold.
	LagThreshold time.Duration
	// MinInterval is the least time between two alerts of one (kind,
	// source, destination); zero means DefaultMinInterval.
	MinInterval time.Duration
}

// FieldError is an invalid Rule; Field is the YAML key ("url", "on[1]",
// "lag_threshold", "min_interval"), for the caller to prefix with the
// rule's path.
type FieldError struct {
	Field, Msg string
}

func (e *FieldError) Error() string { return e.Field + ": " + e.Msg }

// Validate reports the first invalid field of r, or nil. Zero durations and
// an empty On are valid (they mean the defaults); a negative duration, an
// unknown or repeated kind, and a URL that is not absolute http(s) are not.
func (r Rule) Validate() error {
	if msg := checkURL(r.URL); msg != "" {
		return &FieldError{"url", msg}
	}
	for i, k := range r.On {
		if !slices.Contains(allKinds, k) {
			return &FieldError{fmt.Sprintf("on[%d]", i),
				fmt.Sprintf("unknown kind %q (want %s, %s or %s)", k, KindDead, KindCircuitOpen, KindLag)}
		}
		if slices.Index(r.On, k) < i {
			return &FieldError{fmt.Sprintf("on[%d]", i), fmt.Sprintf("%q is listed twice", k)}
		}
	}
	if r.LagThreshold < 0 {
		return &FieldError{"lag_threshold", "must be positive"}
	}
	if r.MinInterval < 0 {
		return &FieldError{"min_interval", "must be positive"}
	}
	return nil
}

// checkURL returns what is wrong with u, without quoting it (it may hold a
// secret), or "".
func checkURL(u string) string {
	if strings.TrimSpace(u) == "" {
		return "required (an incoming webhook URL)"
	}
	p, err := url.Parse(u)
	if err != nil {
		return "not a valid URL"
	}
	if p.Scheme != "http" && p.Scheme != "https" {
		return "must be an http:// or https:// URL"
	}
	if p.Host == "" {
		return "has no host"
	}
	return ""
}

// WithDefaults returns r with its zero fields set to the defaults.
func (r Rule) WithDefaults() Rule {
	if len(r.On) == 0 {
		r.On = slices.Clone(allKinds)
	}
	if r.LagThreshold == 0 {
		r.LagThreshold = DefaultLagThreshold
	}
	if r.MinInterval == 0 {
		r.MinInterval = DefaultMinInterval
	}
	return r
}

// redact is what logs say of a webhook URL: its scheme and host only.
func redact(u string) string {
	p, err := url.Parse(u)
	if err != nil || p.Host == "" {
		return "(invalid URL)"
	}
	return p.Scheme + "://" + p.Host + "/…"
}

// Alerter scans the database and sends the alerts that are due. It is safe
// for concurrent use, also from several instances on one database.
type Alerter struct {
	pool    *pgxpool.Pool
	rules   []Rule // valid, with defaults applied
	client  *http.Client
	timeout time.Duration // bound of one POST
	logger  *slog.Logger
}

// New returns an Alerter for rules. Rules are expected to have passed
// Validate when the configuration was loaded; one that does not is logged
// and ignored. A nil client means one with DefaultTimeout; a client without
// a Timeout gets each POST bounded by DefaultTimeout. A nil logger means
// slog.Default().
func New(pool *pgxpool.Pool, rules []Rule, client *http.Client, logger *slog.Logger) *Alerter {
	if logger == nil {
		logger = slog.Default()
	}
	if client == nil {
		client = &http.Client{Timeout: DefaultTimeout}
	}
	a := &Alerter{pool: pool, client: client, timeout: client.Timeout, logger: logger}
	if a.timeout <= 0 {
		a.timeout = DefaultTimeout
	}
	for i, r := range rules {
		if err := r.Validate(); err != nil {
			logger.Error("alert rule ignored", "rule", i, "url", redact(r.URL), "err", err)
			continue
		}
		a.rules = append(a.rules, r.WithDefaults())
	}
	return a
}

// Scan makes one pass over every rule and kind and sends what is due.
// Rules are scanned concurrently; within a rule, once a POST fails the
// rule's other alerts wait for the next scan, so a scan takes at most about
// one POST timeout per rule plus its queries. A failed POST is logged (and
// retried by the next scan), not returned; the error is the database's or
// ctx's.
func (a *Alerter) Scan(ctx context.Context) error {
	errs := make([]error, len(a.rules))
	var wg sync.WaitGroup
	for i, r := range a.rules {
		wg.Go(func() { errs[i] = a.scanRule(ctx, r) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// ruleScan is one rule during one Scan.
type ruleScan struct {
	Rule
	key    string // the URL's key in hookline_alerts (urlKey)
	broken bool   // a POST failed: send nothing more to this URL in this scan
}

// urlKey is how a rule's URL is stored: its SHA-256, never the URL itself,
// which holds the webhook's secret token.
func urlKey(url string) string {
	sum := sha256.Sum256([]byte(url))
	return "sha256:" + hex.EncodeToString(sum[:])
}

func (a *Alerter) scanRule(ctx context.Context, r Rule) (err error) {
	defer func() {
		if p := recover(); p != nil {
			a.logger.Error("alert scan panicked", "url", redact(r.URL), "panic", p)
			err = fmt.Errorf("alert %s: panic: %v", redact(r.URL), p)
		}
	}()
	rs := &ruleScan{Rule: r, key: urlKey(r.URL)}
	var errs []error
	for _, kind := range r.On {
		if ctx.Err() != nil {
			errs = append(errs, ctx.Err())
			break
		}
		var err error
		switch kind {
		case KindDead:
			err = a.scanDead(ctx, rs)
		case KindCircuitOpen:
			err = a.scanCircuits(ctx, rs)
		case KindLag:
			err = a.scanLag(ctx, rs)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("alert %s %s: %w", redact(r.URL), kind, err))
		}
	}
	return errors.Join(errs...)
}
