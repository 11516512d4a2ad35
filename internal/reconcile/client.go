package reconcile

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// maxAnswer bounds one page's answer: a full page of large events is a few
// MiB.
const maxAnswer = 64 << 20

// ProviderError is a failure of the provider's events API: a run ends
// with it after the retries (429, 5xx, network errors) or at once (any
// other answer, or an answer that is not a page of events). Its text
// carries the provider's own message, never the API key.
type ProviderError struct {
	Source   string // the hookline source
	Provider string // "stripe", "gocardless", "paddle"
	Page     int    // the page of the listing that failed, from 1
	Status   int    // the last answer's HTTP status; 0: no answer (Err says why)
	Tries    int    // the requests made for the page
	Message  string // the provider's error message, if its answer had one
	Err      error  // the network error (Status 0) or why a 2xx answer was unreadable

	periodic bool // the source has periodic runs
}

// Auth reports whether the API refused the API key (401, 403).
func (e *ProviderError) Auth() bool {
	return e.Status == http.StatusUnauthorized || e.Status == http.StatusForbidden
}

func (e *ProviderError) Error() string {
	var b strings.Builder
	if e.Source != "" {
		fmt.Fprintf(&b, "reconcile %s: ", e.Source)
	}
	fmt.Fprintf(&b, "%s events API ", e.Provider)
	switch {
	case e.Status == 0:
		fmt.Fprintf(&b, "unreachable for page %d after %d tries: %v", e.Page, e.Tries, e.Err)
	case e.Status/100 == 2:
		fmt.Fprintf(&b, "answer to page %d is not a page of events: %v", e.Page, e.Err)
	case e.Tries > 1:
		fmt.Fprintf(&b, "answered %d on all %d tries for page %d", e.Status, e.Tries, e.Page)
	default:
		fmt.Fprintf(&b, "answered %d for page %d", e.Status, e.Page)
	}
	if e.Message != "" {
		fmt.Fprintf(&b, " (%q)", e.Message)
	}
	switch {
	case e.Auth():
		b.WriteString("; the API key needs read access to events: check reconcile.api_key")
	case e.Status/100 == 4 && e.Status != http.StatusTooManyRequests:
		b.WriteString("; check reconcile.api_url")
	case e.periodic:
		b.WriteString("; will retry at the next run")
	default:
		b.WriteString("; run the reconciliation again later")
	}
	return b.String()
}

func (e *ProviderError) Unwrap() error { return e.Err }

// client GETs pages of one provider's events API, retrying 429, 5xx and
// network errors.
type client struct {
	http     *http.Client
	provider string
	apiKey   string
	header   http.Header // sent with every request, besides Authorization
	maxTries int
	backoff  time.Duration
	// errMessage extracts the provider's message from an error answer ("":
	// none).
	errMessage func(body []byte) string
	logger     *slog.Logger
}

// get GETs u, page page of a listing, and returns the body of its 2xx
// answer, or a *ProviderError, or the context's error.
func (c *client) get(ctx context.Context, u string, page int) ([]byte, error) {
	for try := 1; ; try++ {
		body, resp, err := c.do(ctx, u)
		if ctx.Err() != nil {
			return nil, fmt.Errorf("%s events API, page %d: %w", c.provider, page, ctx.Err())
		}
		if err == nil && resp.StatusCode/100 == 2 {
			return body, nil
		}
		pe := &ProviderError{Provider: c.provider, Page: page, Tries: try, Err: err}
		if resp != nil {
			pe.Status = resp.StatusCode
			pe.Message = c.redact(c.errMessage(body))
		}
		if pe.Err != nil {
			pe.Err = errors.New(c.redact(pe.Err.Error()))
		}
		retry := resp == nil || resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode >= 500
		if !retry || try >= c.maxTries {
			return nil, pe
		}
		wait := c.wait(try, resp)
		c.logger.Warn("reconcile: events API failed; retrying", "page", page, "status", pe.Status,
			"try", try, "of", c.maxTries, "wait", wait, "message", pe.Message, "err", pe.Err)
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, fmt.Errorf("%s events API, page %d: %w", c.provider, page, ctx.Err())
		case <-t.C:
		}
	}
}

// do sends one GET; resp is nil when there was no answer, and its body is
// already read (into body) and closed.
func (c *client) do(ctx context.Context, u string) ([]byte, *http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, nil, err
	}
	for k, v := range c.header {
		req.Header[k] = v
	}
	req.Header.Set("Authorization", "Bearer "+c.apiKey)
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", "hookline-reconcile")
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer+1))
	switch {
	case err != nil:
		return nil, nil, fmt.Errorf("read the answer: %w", err)
	case len(body) > maxAnswer:
		return nil, resp, fmt.Errorf("answer larger than %d MiB", maxAnswer>>20)
	}
	return body, resp, nil
}

// wait is how long to wait before try+1: the answer's Retry-After (or
// RateLimit-Reset) when it has one, else an exponential back-off with
// jitter; at most MaxWait.
func (c *client) wait(try int, resp *http.Response) time.Duration {
	if resp != nil {
		for _, h := range []string{"Retry-After", "RateLimit-Reset"} {
			if d, ok := parseRetryAfter(resp.Header.Get(h), time.Now()); ok {
				return min(d, MaxWait)
			}
		}
	}
	d := min(c.backoff, MaxWait)
	for i := 1; i < try && d < MaxWait; i++ {
		d = min(2*d, MaxWait)
	}
	return d/2 + rand.N(d/2+1) //nolint:gosec // jitter, not a secret
}

// parseRetryAfter reads a Retry-After value: delay seconds or an HTTP
// date.
func parseRetryAfter(v string, now time.Time) (time.Duration, bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	if s, err := strconv.ParseInt(v, 10, 64); err == nil {
		if s < 0 {
			return 0, false
		}
		return time.Duration(min(s, int64(MaxWait/time.Second))) * time.Second, true
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(t.Sub(now), 0), true
	}
	return 0, false
}

// redact removes the API key from s.
func (c *client) redact(s string) string {
	if c.apiKey == "" {
		return s
	}
	return strings.ReplaceAll(s, c.apiKey, "[api key]")
}
