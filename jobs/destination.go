package jobs

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/hookline/hookline/internal/tracing"
	"github.com/hookline/hookline/providers/standardwebhooks"
)

// errorExcerpt bounds how much of a failed response body is kept as the
// event's last error.
const errorExcerpt = 512

// drainLimit is how much of a response body is read so the connection can be
// reused; larger bodies are cut and the connection dropped.
const drainLimit = 64 << 10

// Forwarder posts events to HTTP destinations, reusing connections.
type Forwarder struct {
	client *http.Client
	now    func() time.Time
}

// NewForwarder returns a Forwarder with a pooled transport.
func NewForwarder() *Forwarder {
	tr := &http.Transport{
		Proxy:               http.ProxyFromEnvironment,
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:        512,
		MaxIdleConnsPerHost: 256,
		IdleConnTimeout:     90 * time.Second,
	}
	return &Forwarder{client: &http.Client{Transport: tr, CheckRedirect: noRedirects}, now: time.Now}
}

// noRedirects makes the client hand back a redirect as the answer: an event
// is delivered where its destination is configured, or not at all (a 3xx is
// a failed attempt naming Location).
func noRedirects(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }

// DestinationError is a failed attempt: a non-2xx status or a transport error.
type DestinationError struct {
	Status int // 0 for transport errors and timeouts
	// Excerpt is the start of the response body: at most errorExcerpt
	// bytes, valid UTF-8 (invalid bytes and NUL replaced by U+FFFD).
	Excerpt string
	// Location is a redirect's target (3xx), which is not followed.
	Location string
	// RetryAfter is how long a 429 or 503 asked to wait (its Retry-After,
	// in seconds or as an HTTP date); 0 when it did not say.
	RetryAfter time.Duration
	Err        error
}

func (e *DestinationError) Error() string {
	if e.Status == 0 {
		return fmt.Sprintf("destination: %v", e.Err)
	}
	if e.Status >= 300 && e.Status < 400 {
		if e.Location == "" {
			return fmt.Sprintf("destination answered %d, a redirect without a Location header; redirects are not followed: configure the final URL", e.Status)
		}
		return fmt.Sprintf("destination answered %d, a redirect to %q; redirects are not followed: configure the final URL", e.Status, e.Location)
	}
	if e.Excerpt == "" {
		return fmt.Sprintf("destination answered %d", e.Status)
	}
	return fmt.Sprintf("destination answered %d: %s", e.Status, e.Excerpt)
}

func (e *DestinationError) Unwrap() error { return e.Err }

// Forward posts ev's exact raw body to d with hookline's headers
// (docs/operations.md, forwarding) and returns the answer's status. Any 2xx
// is success; anything else is a *DestinationError.
func (f *Forwarder) Forward(ctx context.Context, d *Destination, ev *Event) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, forwardTimeout(d))
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, d.URL, bytes.NewReader(ev.Body))
	if err != nil {
		return 0, &DestinationError{Err: err}
	}
	if err := f.setHeaders(req.Header, d, ev); err != nil {
		return 0, err
	}
	tracing.Inject(ctx, req.Header) // traceparent: the forward's span in the event's trace
	resp, err := f.client.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) { // the error is kept and shown: no credentials
			ue.URL = RedactURL(d.URL)
		}
		return 0, &DestinationError{Err: err}
	}
	defer resp.Body.Close()
	// The attempt's deadline also bounds reading the answer: the client
	// stops watching ctx once it hands back a 101, whose body is the raw
	// connection, so a read could otherwise wait for as long as the
	// destination keeps it open.
	defer context.AfterFunc(ctx, func() { _ = resp.Body.Close() })()
	if resp.StatusCode < 200 {
		// A final 1xx (101 Switching Protocols: interim answers never get
		// here) leaves HTTP: not a delivery, and nothing to read.
		return resp.StatusCode, &DestinationError{Status: resp.StatusCode}
	}
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, drainLimit))
		return resp.StatusCode, nil
	}
	excerpt, _ := io.ReadAll(io.LimitReader(resp.Body, errorExcerpt))
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, drainLimit))
	de := &DestinationError{Status: resp.StatusCode, Excerpt: cleanExcerpt(excerpt), Location: CleanText(resp.Header.Get("Location"), errorExcerpt)}
	if resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode == http.StatusServiceUnavailable {
		de.RetryAfter = retryAfter(resp.Header.Get("Retry-After"), f.now())
	}
	return resp.StatusCode, de
}

// RedactURL is raw as errors, logs and the check command show it: a
// password in it and every query parameter's value replaced by ***
// (destination URLs often carry a token in their query).
func RedactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(an unparsable URL)"
	}
	if _, has := u.User.Password(); has {
		u.User = url.UserPassword(u.User.Username(), "***")
	}
	if u.RawQuery != "" {
		q := u.Query()
		for k := range q {
			q[k] = []string{"***"}
		}
		u.RawQuery = q.Encode()
	}
	return strings.ReplaceAll(u.String(), "%2A%2A%2A", "***")
}

// setHeaders sets hookline's headers on a forward.
func (f *Forwarder) setHeaders(h http.Header, d *Destination, ev *Event) error {
	if ev.ContentType != "" {
		h.Set("Content-Type", ev.ContentType)
	}
	key := ev.IdempotencyKey()
	h.Set("Idempotency-Key", key)
	h.Set("Hookline-Source", ev.Source)
	h.Set("Hookline-Event-Id", ev.ID)
	h.Set("Hookline-Event-Type", ev.Type)
	h.Set("Hookline-Attempt", strconv.Itoa(ev.Attempt))
	h.Set("Hookline-Delivery-Id", strconv.FormatInt(ev.DeliveryID, 10))
	if ev.Destination != "" {
		h.Set("Hookline-Destination", ev.Destination)
	}
	if ev.OrderKey != "" {
		h.Set("Hookline-Order-Key", OrderKeyHeader(ev.OrderKey))
	}
	if ev.Stale {
		h.Set("Hookline-Stale", "true")
	}
	if ev.Origin != "" && ev.Origin != "webhook" {
		h.Set("Hookline-Origin", ev.Origin)
	}
	h.Set("User-Agent", "hookline")
	if d.Secret != "" {
		secret, err := standardwebhooks.DecodeSecret(d.Secret)
		if err != nil {
			return &DestinationError{Err: fmt.Errorf("destination.secret: %w", err)}
		}
		standardwebhooks.SetHeaders(h, secret, key, f.now(), ev.Body)
	}
	return nil
}

// retryAfter reads a Retry-After header: whole seconds, or an HTTP date
// (relative to now). 0 when absent, unreadable or in the past.
func retryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	n, err := strconv.ParseInt(v, 10, 64)
	switch {
	case err == nil && n <= 0:
		return 0
	case err == nil && n >= int64(maxRetryAfter/time.Second): // also before n seconds overflow a Duration
		return maxRetryAfter
	case err == nil:
		return time.Duration(n) * time.Second
	case errors.Is(err, strconv.ErrRange) && v[0] != '-':
		// Whole seconds past int64: a very long wait, capped like any.
		return maxRetryAfter
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return min(t.Sub(now), maxRetryAfter)
	}
	return 0
}

// cleanExcerpt is the start of an error answer as the event's last error
// keeps it: a multibyte character cut at the end is dropped, invalid bytes
// and NUL are replaced, and the result is at most errorExcerpt bytes.
func cleanExcerpt(b []byte) string {
	if len(b) >= errorExcerpt {
		// The read stopped at the limit: drop a rune it cut in two.
		for i := len(b) - 1; i >= 0 && i >= len(b)-utf8.UTFMax; i-- {
			if utf8.RuneStart(b[i]) {
				if !utf8.FullRune(b[i:]) {
					b = b[:i]
				}
				break
			}
		}
	}
	return CleanText(string(b), errorExcerpt)
}
