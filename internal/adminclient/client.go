// Package adminclient is a small HTTP client of hookline's admin API (package
// admin); `hookline dead list|show|retry|delete` and `hookline destinations
// list|pause|resume` are built on it.
//
// Internal: no stability promise.
package adminclient

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Sentinels an *APIError matches with errors.Is, by status.
var (
	ErrUnauthorized = errors.New("unauthorized")
	ErrNotFound     = errors.New("not found")
)

// APIError is an answer of the admin API other than success.
type APIError struct {
	Status  int
	Message string // the server's {"error": ...}, or the start of its body
}

func (e *APIError) Error() string {
	if e.Message == "" {
		return fmt.Sprintf("%d %s", e.Status, strings.ToLower(http.StatusText(e.Status)))
	}
	return fmt.Sprintf("%d %s", e.Status, e.Message)
}

// Is matches ErrUnauthorized (401) and ErrNotFound (404).
func (e *APIError) Is(target error) bool {
	return (target == ErrUnauthorized && e.Status == http.StatusUnauthorized) ||
		(target == ErrNotFound && e.Status == http.StatusNotFound)
}

// Client calls the admin API.
type Client struct {
	// BaseURL is the server's root, e.g. http://127.0.0.1:8080.
	BaseURL string
	// Token is the server's admin_token.
	Token string
	// HTTP sends the requests; nil means a client with a 5-minute timeout
	// (a bulk retry of a large dead set takes a while).
	HTTP *http.Client
}

// Item is a dead item.
type Item struct {
	ID      string `json:"id"`
	Source  string `json:"source"`
	EventID string `json:"event_id"`
	// Destination is the destination that failed (or whose duplicate was
	// refused); retrying the item re-runs that destination only.
	Destination string    `json:"destination"`
	EventType   string    `json:"event_type"`
	Reason      string    `json:"reason"`
	Attempts    int       `json:"attempts"`
	LastError   string    `json:"last_error"`
	DeadAt      time.Time `json:"dead_at"`
}

// ItemDetail is a dead item with its payload.
type ItemDetail struct {
	Item
	ContentType string              `json:"content_type"`
	Headers     map[string][]string `json:"headers"`
	// Payload is the raw body; base64 when PayloadEncoding is "base64"
	// (a body that is not UTF-8).
	Payload         string  `json:"payload"`
	PayloadEncoding string  `json:"payload_encoding,omitempty"`
	DeliveryID      *string `json:"delivery_id,omitempty"`
}

// ItemList is a page of dead items; NextCursor is empty on the last page.
type ItemList struct {
	Items      []Item `json:"items"`
	NextCursor string `json:"next_cursor,omitempty"`
}

// ListParams selects a page of dead items. Zero fields are left out.
type ListParams struct {
	Source, Destination, Reason, EventType string
	Since, Until                           time.Time
	// Limit is the page size: 0 means the server's default (50); above
	// 500 the server clamps it; a negative one is sent as it is (the
	// server answers 400 naming limit).
	Limit  int
	Cursor string
}

// Retried answers a retry of one item.
type Retried struct {
	Status   string `json:"status"`
	Source   string `json:"source"`
	EventID  string `json:"event_id"`
	JobID    int64  `json:"job_id"`
	Joined   bool   `json:"joined"`
	Override bool   `json:"override"`
}

// Filter selects dead items for a bulk retry or delete; the zero Filter is
// the whole dead set.
type Filter struct {
	Source      string `json:"source,omitempty"`
	Destination string `json:"destination,omitempty"`
	Reason      string `json:"reason,omitempty"`
	EventType   string `json:"event_type,omitempty"`
	Since       string `json:"since,omitempty"` // RFC 3339
	Until       string `json:"until,omitempty"` // RFC 3339
	DryRun      bool   `json:"dry_run,omitempty"`
}

// Empty reports whether f selects the whole dead set.
func (f Filter) Empty() bool {
	return f.Source == "" && f.Destination == "" && f.Reason == "" && f.EventType == "" && f.Since == "" && f.Until == ""
}

// Bulk answers a bulk retry or delete.
type Bulk struct {
	Matched int  `json:"matched"`
	Retried *int `json:"retried,omitempty"`
	Deleted *int `json:"deleted,omitempty"`
	Skipped int  `json:"skipped,omitempty"`
	DryRun  bool `json:"dry_run,omitempty"`
}

// Event is an event lookup.
type Event struct {
	Source      string     `json:"source"`
	EventID     string     `json:"event_id"`
	EventType   string     `json:"event_type"`
	State       string     `json:"state"`
	Deliveries  int        `json:"deliveries"`
	Attempts    int        `json:"attempts"`
	ReceivedAt  time.Time  `json:"received_at"`
	CompletedAt *time.Time `json:"completed_at"`
	LastError   *string    `json:"last_error"`
	DeadItemID  *string    `json:"dead_item_id"`
}

// Destination is one configured destination's state, shared by every
// instance.
type Destination struct {
	Source string `json:"source"`
	Name   string `json:"name"`
	// State is "paused" (the operator's pause wins), else the circuit:
	// "active", "open" or "half_open".
	State string `json:"state"`
	// Queued counts the events waiting for the destination.
	Queued int64 `json:"queued"`
	// InFlight counts the attempts running now.
	InFlight      int64   `json:"in_flight"`
	FailureStreak int     `json:"failure_streak"`
	LastError     *string `json:"last_error"` // nil when unset
	// PausedAt is when the pause began; nil when not paused.
	PausedAt *time.Time `json:"paused_at"`
}

// DestinationList is every configured destination, in configuration order.
type DestinationList struct {
	Items []Destination `json:"items"`
}

// List returns a page of dead items, newest first. raw is the answer as
// received (for --json).
func (c *Client) List(ctx context.Context, p ListParams) (list *ItemList, raw []byte, err error) {
	q := url.Values{}
	set := func(k, v string) {
		if v != "" {
			q.Set(k, v)
		}
	}
	set("source", p.Source)
	set("destination", p.Destination)
	set("reason", p.Reason)
	set("event_type", p.EventType)
	if !p.Since.IsZero() {
		set("since", p.Since.Format(time.RFC3339Nano))
	}
	if !p.Until.IsZero() {
		set("until", p.Until.Format(time.RFC3339Nano))
	}
	if p.Limit != 0 {
		set("limit", strconv.Itoa(p.Limit))
	}
	set("cursor", p.Cursor)
	path := "/admin/dead"
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	list = &ItemList{}
	raw, err = c.do(ctx, http.MethodGet, path, nil, list)
	return list, raw, err
}

// Show returns one item with its payload and headers.
func (c *Client) Show(ctx context.Context, id string) (*ItemDetail, []byte, error) {
	it := &ItemDetail{}
	raw, err := c.do(ctx, http.MethodGet, "/admin/dead/"+url.PathEscape(id), nil, it)
	return it, raw, err
}

// Retry re-queues one item's event.
func (c *Client) Retry(ctx context.Context, id string) (*Retried, []byte, error) {
	r := &Retried{}
	raw, err := c.do(ctx, http.MethodPost, "/admin/dead/"+url.PathEscape(id)+"/retry", nil, r)
	return r, raw, err
}

// Delete removes one item.
func (c *Client) Delete(ctx context.Context, id string) error {
	_, err := c.do(ctx, http.MethodDelete, "/admin/dead/"+url.PathEscape(id), nil, nil)
	return err
}

// RetryAll retries every item matching f (server-side, in batches).
func (c *Client) RetryAll(ctx context.Context, f Filter) (*Bulk, []byte, error) {
	b := &Bulk{}
	raw, err := c.do(ctx, http.MethodPost, "/admin/dead/retry", f, b)
	return b, raw, err
}

// DeleteAll deletes every item matching f (server-side, in batches).
func (c *Client) DeleteAll(ctx context.Context, f Filter) (*Bulk, []byte, error) {
	b := &Bulk{}
	raw, err := c.do(ctx, http.MethodPost, "/admin/dead/delete", f, b)
	return b, raw, err
}

// Event looks up an event by source and id.
func (c *Client) Event(ctx context.Context, source, eventID string) (*Event, []byte, error) {
	ev := &Event{}
	raw, err := c.do(ctx, http.MethodGet, "/admin/events/"+url.PathEscape(source)+"/"+url.PathEscape(eventID), nil, ev)
	return ev, raw, err
}

// Destinations returns every configured destination's state. raw is the
// answer as received (for --json).
func (c *Client) Destinations(ctx context.Context) (*DestinationList, json.RawMessage, error) {
	l := &DestinationList{}
	raw, err := c.do(ctx, http.MethodGet, "/admin/destinations", nil, l)
	return l, raw, err
}

// PauseDestination stops every instance starting attempts at the
// destination; its events keep being accepted and wait. A destination the
// server does not have configured is ErrNotFound.
func (c *Client) PauseDestination(ctx context.Context, source, name string) error {
	_, err := c.do(ctx, http.MethodPost, destinationPath(source, name)+"/pause", nil, nil)
	return err
}

// ResumeDestination lets the destination's waiting events be delivered
// again. A destination the server does not have configured is ErrNotFound.
func (c *Client) ResumeDestination(ctx context.Context, source, name string) error {
	_, err := c.do(ctx, http.MethodPost, destinationPath(source, name)+"/resume", nil, nil)
	return err
}

// ReconcileResult is a reconciliation run's outcome.
type ReconcileResult struct {
	Checked int `json:"checked"` // events the provider listed within the lookback
	Missing int `json:"missing"` // events the run stored (hookline had never accepted them)
}

// reconcileTimeout bounds waiting for one on-demand run (the server bounds
// the run itself to 15 minutes).
const reconcileTimeout = 20 * time.Minute

// Reconcile runs one reconciliation of source now and returns once its
// missing events are stored. raw is the answer as received (for --json);
// a failing provider is an *APIError of status 502.
func (c *Client) Reconcile(ctx context.Context, source string) (*ReconcileResult, []byte, error) {
	cc := *c
	if cc.HTTP == nil {
		cc.HTTP = &http.Client{Timeout: reconcileTimeout}
	}
	r := &ReconcileResult{}
	raw, err := cc.do(ctx, http.MethodPost, "/admin/sources/"+url.PathEscape(source)+"/reconcile", nil, r)
	return r, raw, err
}

// destinationPath is the path of one destination, each segment escaped.
func destinationPath(source, name string) string {
	return "/admin/destinations/" + url.PathEscape(source) + "/" + url.PathEscape(name)
}

// CheckBaseURL reports why base cannot be a Client's BaseURL, or nil: it
// must be an absolute http:// or https:// URL with a host, and no query or
// fragment (the routes' paths are appended to it). A Client with another
// BaseURL sends nothing and answers this error.
func CheckBaseURL(base string) error {
	u, err := url.Parse(base)
	switch {
	case err != nil:
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // the URL is quoted by the caller
		}
		return fmt.Errorf("not a URL: %w", err)
	case u.Scheme != "http" && u.Scheme != "https":
		return errors.New("want an http:// or https:// URL")
	case u.Host == "":
		return errors.New("no host")
	case u.RawQuery != "" || u.ForceQuery || u.Fragment != "":
		return errors.New("want the server's root, without a query or fragment")
	}
	return nil
}

// maxAnswer caps how much of an answer is read (a page of 500 items with
// long errors is well below it).
const maxAnswer = 64 << 20

func (c *Client) do(ctx context.Context, method, path string, body, out any) ([]byte, error) {
	if err := CheckBaseURL(c.BaseURL); err != nil {
		return nil, fmt.Errorf("base URL %q: %w", c.BaseURL, err)
	}
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimRight(c.BaseURL, "/")+path, rd)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+c.Token)
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	hc := c.HTTP
	if hc == nil {
		hc = &http.Client{Timeout: 5 * time.Minute}
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		ae := &APIError{Status: resp.StatusCode}
		var eb struct {
			Error string `json:"error"`
		}
		if json.Unmarshal(raw, &eb) == nil && eb.Error != "" {
			ae.Message = eb.Error
		} else if s := strings.TrimSpace(string(raw)); s != "" && len(s) < 200 {
			ae.Message = s
		}
		return raw, ae
	}
	if out != nil && len(raw) > 0 {
		if err := json.Unmarshal(raw, out); err != nil {
			return raw, fmt.Errorf("unexpected answer from %s %s (is --url the hookline server?): %w", method, path, err)
		}
	}
	return raw, nil
}
