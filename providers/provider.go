package providers

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"sync"
	"time"
)

// Request is one webhook delivery as the adapter sees it: the exact raw body
// bytes, the request headers, and the URL it was received on (schemes such as
// Square and Twilio sign the URL).
type Request struct {
	// Body is the raw request body, byte for byte. Adapters must never modify it.
	Body []byte
	// Header holds the request headers (canonicalised by net/http).
	Header http.Header
	// URL is the full URL the request was received on, as the sender saw it.
	// Sources behind a proxy configure it (for example square.notification_url).
	URL *url.URL
}

// ContentType is the media type of the request without parameters, lowercased.
func (r *Request) ContentType() string {
	ct := r.Header.Get("Content-Type")
	ct, _, _ = strings.Cut(ct, ";")
	return strings.ToLower(strings.TrimSpace(ct))
}

// Event is what an adapter resolves from a verified delivery (or batch item).
type Event struct {
	// ID identifies the event at its sender; with the source name it is the
	// dedup key. Never empty.
	ID string
	// Type is the sender's event type ("payment_intent.succeeded"); may be empty.
	Type string
	// Time is when the sender says the event happened; zero when unknown.
	Time time.Time
}

// Verifier checks that a delivery was sent by the provider, against every
// secret configured for the source (rotation). It must compare in constant time,
// accept if any configured secret matches any signature in the request, and
// return one of the exported sentinel errors (wrapped with detail that never
// says which secret or which byte failed).
type Verifier interface {
	Verify(r *Request) error
}

// Resolver extracts the event id, type and time from a verified delivery.
// An empty id is an error wrapping ErrNoEventID.
type Resolver interface {
	Resolve(r *Request) (Event, error)
}

// Provider is what every adapter implements: verification and resolution.
type Provider interface {
	Verifier
	Resolver
}

// Signer is the optional ability to sign a body the way the provider does, so
// that `hookline send` and tests can produce deliveries. It sets the headers
// (and, for form-encoded schemes, may return a different body) on the request.
// now is the signing time for schemes that carry a timestamp.
type Signer interface {
	Sign(r *Request, now time.Time) error
}

// Item is one event of a batch delivery.
type Item struct {
	// Body is the item's exact bytes as they stand in the original body (a
	// sub-slice of Request.Body), never re-serialised.
	Body []byte
	// Offset is the position of Body within Request.Body.
	Offset int
	// Event is the item's resolved event.
	Event Event
}

// Splitter is the optional ability to split a batch delivery (Adyen
// notificationItems, GoCardless events) into items, each its own event. When a
// provider implements Splitter, Resolve is not used for its deliveries.
// Verify has already checked the whole delivery (including per-item signatures)
// before Split is called.
type Splitter interface {
	Split(r *Request) ([]Item, error)
}

// Responder is the optional ability to answer a provider-mandated handshake
// (Slack url_verification) without storing or forwarding the delivery. It is
// called after Verify succeeds. handled=false means "process normally".
// The answer's Content-Type is ResponseContentType's.
type Responder interface {
	Respond(r *Request) (status int, body []byte, handled bool)
}

// ResponseContentTyper is the optional ability of a Responder to answer
// with a media type other than JSON: Twitch expects its challenge back as
// text/plain.
type ResponseContentTyper interface {
	// ResponseContentType is the Content-Type of every Respond answer;
	// "" means application/json.
	ResponseContentType() string
}

// ResponseContentType is the Content-Type ingest writes a Respond answer
// of r with: r's own when it is a ResponseContentTyper naming one, else
// application/json. Never empty.
func ResponseContentType(r Responder) string {
	if t, ok := r.(ResponseContentTyper); ok {
		if ct := t.ResponseContentType(); ct != "" {
			return ct
		}
	}
	return "application/json"
}

// GetResponder is the optional ability to answer a provider's GET
// handshake on the webhook URL (Meta's hub.challenge, eBay's
// challenge_code): ingest calls it for GET /webhooks/{source} and answers
// 405 when handled is false or the provider has no GetResponder. A GET is
// never stored or forwarded. It must check whatever the handshake carries
// to prove the caller (a verify token, a hash over a configured secret).
type GetResponder interface {
	RespondGet(r *Request) (status int, contentType string, body []byte, handled bool)
}

// SignatureStatuser is the optional ability to choose the HTTP status for a
// failed verification (GoCardless expects 498 instead of 401).
type SignatureStatuser interface {
	InvalidSignatureStatus() int
}

// SecretHeaderer is the optional ability to name request headers that carry
// credentials (Xendit's X-Callback-Token). ingest never stores them, so they
// are never shown by the admin API, forwarded, nor passed to Go handlers.
// Authorization, Proxy-Authorization and Cookie are dropped for every source.
type SecretHeaderer interface {
	SecretHeaders() []string
}

// ContentKeyer is the optional ability of a scheme whose event id comes from
// a header the signature does not cover (GitHub's X-GitHub-Delivery,
// Shopify's X-Shopify-Event-Id, ...) to name what the signature does cover.
// ContentKey returns a digest of the signed content of a verified request
// (the body; Twilio: the URL and the parameters). ingest treats a delivery
// whose content key equals that of an event of the same source accepted
// within the dedup window as a duplicate of it, so replaying a captured
// delivery under a fresh id does not make a new event. nil means the request
// has no such key (its id is signed).
type ContentKeyer interface {
	ContentKey(r *Request) []byte
}

// Describer is the optional ability to describe the adapter for
// `hookline providers` and the README table.
type Describer interface {
	Describe() Description
}

// Description documents an adapter.
type Description struct {
	// Headers are the signature headers the scheme reads (the primary ones);
	// empty when the signature lives in the body or form fields (Adyen,
	// Braintree).
	Headers []string
	// FallbackHeaders are other signature headers the scheme accepts in
	// place of Headers: GitHub's legacy X-Hub-Signature and Shopify's
	// Shopify-Hmac-Sha256 (read when the primary header is absent), the
	// svix-* trio of Standard Webhooks. A request without the primary
	// headers may still verify through them.
	FallbackHeaders []string
	// DefaultEventID is the default event id in the key-resolver notation of
	// ParseKeyResolver. A simple id is one resolver: "json:id",
	// "header:X-Shopify-Event-Id", "body:sha256". A composite id is written
	// as the configuration writes it, its parts in braces joined by ":", each
	// part a resolver where one names it:
	//
	//	{json:pspReference}:{json:eventCode}:{json:success}
	//	{header:X-GitHub-Hook-ID}:{header:X-GitHub-Delivery}
	//
	// and a plain name, explained in the package doc, where none does
	// (Braintree's "{kind}:{subject id}:{timestamp}" come from the XML in
	// form:bt_payload). "form:A|B" is the first of the fields present, a part
	// in brackets is left out when empty, and a fallback follows ", else ".
	// For a Splitter, json paths are relative to each item. Empty means the
	// adapter has no default: sources must configure event_id (hmac).
	DefaultEventID string
	// DefaultEventType is the default event type, one resolver ("json:type",
	// "header:X-GitHub-Event"), when the scheme gives every event a type:
	// an event whose type resolves empty or blank is then refused (400).
	// Empty: the adapter's type is optional (or it resolves one per batch
	// item).
	DefaultEventType string
	// DefaultTolerance is the default maximum signature age; zero when the
	// scheme has no timestamp.
	DefaultTolerance time.Duration
	// IDSigned reports whether the default event id is covered by the
	// signature. When it is not, the adapter implements ContentKeyer.
	IDSigned bool
}

// Config is what a provider factory receives for one source.
type Config struct {
	// Source is the source name, for error messages.
	Source string
	// Secrets are all accepted secrets (rotation); the first one signs.
	Secrets []string
	// Tolerance is the maximum signature age (both directions) where the scheme
	// has a timestamp; zero means the adapter's default.
	Tolerance time.Duration
	// Settings decodes the provider-specific block of the source's config
	// (`paypal: {...}`) into v; it is a no-op when the block is absent.
	// Unknown fields are errors.
	Settings func(v any) error
	// Now returns the current time; nil means time.Now. Tests set it.
	Now func() time.Time
	// HTTPClient is used by adapters that fetch keys or certificates; nil
	// means a client with a short timeout.
	HTTPClient *http.Client
}

// NowFunc returns c.Now or time.Now.
func (c *Config) NowFunc() func() time.Time {
	if c.Now != nil {
		return c.Now
	}
	return time.Now
}

// Decode calls Settings when set.
func (c *Config) Decode(v any) error {
	if c.Settings == nil {
		return nil
	}
	return c.Settings(v)
}

// Factory builds a provider for one source. It validates cfg and returns an
// error naming the bad setting (relative to the source, e.g.
// "paypal.webhook_id: required").
type Factory func(cfg Config) (Provider, error)

var (
	registryMu sync.RWMutex
	registry   = map[string]Factory{}
)

// Register makes a provider available under name. It panics if the name is
// taken, like database/sql.Register. Adapters call it from init.
func Register(name string, f Factory) {
	registryMu.Lock()
	defer registryMu.Unlock()
	if _, dup := registry[name]; dup {
		panic("providers: Register called twice for " + name)
	}
	registry[name] = f
}

// Lookup returns the factory registered under name.
func Lookup(name string) (Factory, bool) {
	registryMu.RLock()
	defer registryMu.RUnlock()
	f, ok := registry[name]
	return f, ok
}

// Names lists the registered provider names, sorted.
func Names() []string {
	registryMu.RLock()
	defer registryMu.RUnlock()
	names := make([]string, 0, len(registry))
	for n := range registry {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// New builds the provider registered under name.
func New(name string, cfg Config) (Provider, error) {
	f, ok := Lookup(name)
	if !ok {
		return nil, fmt.Errorf("unknown provider %q (known: %s)", name, strings.Join(Names(), ", "))
	}
	return f(cfg)
}

// Errors returned by verifiers and resolvers. ingest maps them to HTTP
// statuses in one place: the signature errors to 401 (or the adapter's
// InvalidSignatureStatus), ErrMalformed and ErrNoEventID to 400, and
// ErrUnavailable to 503 so that the sender retries.
var (
	// ErrNoSignature: the signature header (or field) is missing.
	ErrNoSignature = errors.New("missing signature")
	// ErrInvalidSignature: no configured secret produced a matching signature,
	// or the signature header could not be parsed.
	ErrInvalidSignature = errors.New("invalid signature")
	// ErrTimestampTooOld: the signed timestamp is older than the tolerance.
	ErrTimestampTooOld = errors.New("timestamp too old")
	// ErrTimestampTooNew: the signed timestamp is further in the future than the tolerance.
	ErrTimestampTooNew = errors.New("timestamp too far in the future")
	// ErrMalformed: the signature is fine but the body cannot be parsed.
	ErrMalformed = errors.New("malformed body")
	// ErrNoEventID: no event id could be resolved from the delivery.
	ErrNoEventID = errors.New("no event id")
	// ErrTooDeep: a JSON body that must be parsed before its signature can
	// be checked nests deeper than MaxJSONDepth. It wraps ErrMalformed and is
	// answered 400, even when Verify returns it.
	ErrTooDeep = fmt.Errorf("%w: JSON nests deeper than %d levels", ErrMalformed, MaxJSONDepth)
	// ErrUnavailable: verification could not complete because a key or
	// certificate could not be fetched (network error, timeout, a 5xx from
	// the provider). It says nothing about the delivery's authenticity, so it
	// is not a signature error. A key URL that is not allowed, or a key or
	// certificate that is unknown, invalid or expired, stays a signature error.
	ErrUnavailable = errors.New("verification could not complete: a key or certificate could not be fetched")
)

// IsSignatureError reports whether err means "not authentic" (401).
func IsSignatureError(err error) bool {
	return errors.Is(err, ErrNoSignature) || errors.Is(err, ErrInvalidSignature) ||
		errors.Is(err, ErrTimestampTooOld) || errors.Is(err, ErrTimestampTooNew)
}

// CheckTimestamp returns ErrTimestampTooOld or ErrTimestampTooNew when ts is
// more than tolerance away from now, in either direction.
func CheckTimestamp(ts, now time.Time, tolerance time.Duration) error {
	if tolerance <= 0 {
		return nil
	}
	d := now.Sub(ts)
	switch {
	case d > tolerance:
		return ErrTimestampTooOld
	case d < -tolerance:
		return ErrTimestampTooNew
	}
	return nil
}

// MaxJSONDepth is the deepest nesting of arrays and objects accepted in a
// JSON body that is parsed before its signature is checked.
const MaxJSONDepth = 64

// CheckJSONDepth returns ErrTooDeep when body nests arrays or objects deeper
// than MaxJSONDepth. It does not validate the JSON otherwise; brackets inside
// strings are skipped. One pass, no allocation.
func CheckJSONDepth(body []byte) error {
	depth := 0
	inString := false
	for i := 0; i < len(body); i++ {
		c := body[i]
		if inString {
			switch c {
			case '\\':
				i++
			case '"':
				inString = false
			}
			continue
		}
		switch c {
		case '"':
			inString = true
		case '[', '{':
			depth++
			if depth > MaxJSONDepth {
				return ErrTooDeep
			}
		case ']', '}':
			depth--
		}
	}
	return nil
}
