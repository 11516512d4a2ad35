// Package twilio verifies Twilio webhooks: X-Twilio-Signature is the base64
// HMAC-SHA1, keyed with the account's Auth Token, of the full URL Twilio
// requested followed by every POST parameter sorted by name, each as
// name+value with no separator. Requests with a JSON (or any non-form) body
// carry `bodySHA256=<hex SHA-256 of the body>` in the URL's query instead: the
// HMAC covers the URL alone and the body must hash to that value. As
// twilio-go does, the URL is tried with and without an explicit port.
//
// The URL is the one the request was received on. Behind a proxy, set
// `twilio: {url: "https://…"}` to the public URL configured at Twilio: its
// scheme, host and path replace the received ones while the received query
// string is kept (Twilio adds bodySHA256 there). There is no signed
// timestamp, so the tolerance is ignored.
//
// Twilio sends no event id. The id is the I-Twilio-Idempotency-Token header
// (the same on every retry of one webhook request); without it, the form's
// MessageSid, CallSid or SmsSid, followed by `:{status}` when MessageStatus
// or CallStatus is present (a message's status callbacks share its SID). The
// type is MessageStatus or CallStatus. The idempotency token is not signed,
// so the adapter is a providers.ContentKeyer: a captured request replayed
// under a fresh token has the same content key, the digest of what the
// signature covers, and is a duplicate of the original.
package twilio

import (
	"crypto/hmac"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/hookline/hookline/providers"
)

// Name is the adapter's registered name.
const Name = "twilio"

// Header is the signature header.
const Header = "X-Twilio-Signature"

// IdempotencyHeader identifies one webhook request across retries.
const IdempotencyHeader = "I-Twilio-Idempotency-Token"

// BodyHashParam is the query parameter carrying the body hash of non-form bodies.
const BodyHashParam = "bodySHA256"

func init() {
	providers.Register(Name, func(cfg providers.Config) (providers.Provider, error) { return New(cfg) })
}

// Settings is the `twilio:` block of a source.
type Settings struct {
	// URL is the public URL configured at Twilio, when it differs from the
	// URL hookline receives the request on (a proxy). Its scheme, host and
	// path are used; the query always comes from the request. Optional.
	URL string `yaml:"url"`
}

// Verifier is the Twilio adapter.
type Verifier struct {
	tokens [][]byte
	base   *url.URL // nil: the request's URL
}

// New returns a Twilio adapter for cfg. Each secret is an Auth Token.
func New(cfg providers.Config) (*Verifier, error) {
	if len(cfg.Secrets) == 0 {
		return nil, fmt.Errorf("secrets: at least one secret is required")
	}
	var s Settings
	if err := cfg.Decode(&s); err != nil {
		return nil, fmt.Errorf("twilio: %w", err)
	}
	v := &Verifier{}
	if s.URL != "" {
		u, err := url.Parse(s.URL)
		if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
			return nil, fmt.Errorf("twilio.url: want an absolute http(s) URL, as configured at Twilio")
		}
		if u.RawQuery != "" || u.Fragment != "" {
			return nil, fmt.Errorf("twilio.url: leave out the query and fragment (the request's query is used)")
		}
		v.base = u
	}
	for _, t := range cfg.Secrets {
		v.tokens = append(v.tokens, []byte(t))
	}
	return v, nil
}

// ParseHeader decodes an X-Twilio-Signature value: one base64 HMAC-SHA1 in
// canonical (padded, standard-alphabet) form.
func ParseHeader(value string) ([]byte, error) {
	sig, err := base64.StdEncoding.DecodeString(value)
	if err != nil || len(sig) != sha1.Size || base64.StdEncoding.EncodeToString(sig) != value {
		return nil, fmt.Errorf("%w: %s is not a base64 HMAC-SHA1", providers.ErrInvalidSignature, Header)
	}
	return sig, nil
}

// requestURL is the URL Twilio signed: the configured base with the received
// query, or the received URL.
func (v *Verifier) requestURL(r *providers.Request) (*url.URL, error) {
	if v.base == nil {
		if r.URL == nil || r.URL.Host == "" || r.URL.Scheme == "" {
			return nil, fmt.Errorf("%w: the request URL is unknown (set twilio.url)", providers.ErrInvalidSignature)
		}
		u := *r.URL
		u.Fragment, u.RawFragment = "", ""
		return &u, nil
	}
	u := *v.base
	if r.URL != nil {
		u.RawQuery = r.URL.RawQuery
	}
	return &u, nil
}

// URLVariants returns the URL as given, with its default port made explicit
// and with any port removed, without repeats: Twilio's own signatures are not
// consistent about ports (twilio-go tries both).
func URLVariants(u *url.URL) []string {
	out := []string{u.String()}
	host, port := u.Hostname(), u.Port()
	c := *u
	if port == "" {
		switch u.Scheme {
		case "https":
			c.Host = net.JoinHostPort(host, "443")
		case "http":
			c.Host = net.JoinHostPort(host, "80")
		}
	} else if strings.Contains(host, ":") {
		c.Host = "[" + host + "]"
	} else {
		c.Host = host
	}
	if s := c.String(); s != out[0] {
		out = append(out, s)
	}
	return out
}

// ParamStrings returns the name+value concatenation Twilio appends to the
// URL: names sorted bytewise, and for a repeated name every value, sorted
// (as twilio-node does). A signature over only the first value of a repeated
// name (twilio-go's shortcut) is not accepted: it would leave the other
// values unauthenticated. It returns one candidate.
func ParamStrings(params url.Values) []string {
	names := make([]string, 0, len(params))
	for n := range params {
		names = append(names, n)
	}
	sort.Strings(names)
	var all strings.Builder
	for _, n := range names {
		vs := slices.Clone(params[n])
		sort.Strings(vs)
		for _, val := range vs {
			all.WriteString(n + val)
		}
	}
	return []string{all.String()}
}

func mac(token []byte, s ...string) []byte {
	m := hmac.New(sha1.New, token)
	for _, p := range s {
		m.Write([]byte(p))
	}
	return m.Sum(nil)
}

func bodyHash(body []byte) string {
	sum := sha256.Sum256(body)
	return hex.EncodeToString(sum[:])
}

func isForm(r *providers.Request) bool {
	ct := r.ContentType()
	return ct == "" || ct == "application/x-www-form-urlencoded"
}

// signedSuffixes returns what the signature covers after the URL u: the
// sorted form parameters (ParamStrings), or "" when u carries bodySHA256, the
// body then having to hash to it. Errors wrap providers.ErrInvalidSignature.
func signedSuffixes(r *providers.Request, u *url.URL) ([]string, error) {
	query, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		return nil, fmt.Errorf("%w: unreadable request query", providers.ErrInvalidSignature)
	}
	wantHash, hasHash := query[BodyHashParam]
	switch {
	case hasHash:
		if len(wantHash) != 1 || !hmac.Equal([]byte(strings.ToLower(wantHash[0])), []byte(bodyHash(r.Body))) {
			return nil, fmt.Errorf("%w: the body does not match %s", providers.ErrInvalidSignature, BodyHashParam)
		}
		return []string{""}, nil
	case isForm(r):
		params, perr := url.ParseQuery(string(r.Body))
		if perr != nil {
			return nil, fmt.Errorf("%w: unreadable form body", providers.ErrInvalidSignature)
		}
		return ParamStrings(params), nil
	}
	// A non-form body is only covered through bodySHA256.
	return nil, fmt.Errorf("%w: a %s body needs %s in the URL", providers.ErrInvalidSignature, r.ContentType(), BodyHashParam)
}

// Verify implements providers.Verifier.
func (v *Verifier) Verify(r *providers.Request) error {
	value := r.Header.Get(Header)
	if value == "" {
		return fmt.Errorf("%w: %s header is required", providers.ErrNoSignature, Header)
	}
	sig, err := ParseHeader(value)
	if err != nil {
		return err
	}
	u, err := v.requestURL(r)
	if err != nil {
		return err
	}
	suffixes, err := signedSuffixes(r, u)
	if err != nil {
		return err
	}
	for _, tok := range v.tokens {
		for _, us := range URLVariants(u) {
			for _, suf := range suffixes {
				if hmac.Equal(mac(tok, us, suf), sig) {
					return nil
				}
			}
		}
	}
	return fmt.Errorf("%w: %s does not match (is the URL the one configured at Twilio? see twilio.url)", providers.ErrInvalidSignature, Header)
}

// ContentKey implements providers.ContentKeyer: the digest of the string the
// signature covers, the URL followed by the sorted form parameters (or the
// URL alone, bodySHA256 included, for other bodies), so that a replay under a
// fresh I-Twilio-Idempotency-Token, or with its form re-encoded or
// reordered, keys the same. The URL is taken without its port: every URL
// under which one signature verifies (see URLVariants) is then the same. nil
// when r does not verify that far (no URL, an unreadable form). When the id
// is a form SID, which is signed, the key is returned all the same.
func (v *Verifier) ContentKey(r *providers.Request) []byte {
	u, err := v.requestURL(r)
	if err != nil {
		return nil
	}
	suffixes, err := signedSuffixes(r, u)
	if err != nil {
		return nil
	}
	c := *u
	if host := u.Hostname(); strings.Contains(host, ":") {
		c.Host = "[" + host + "]"
	} else {
		c.Host = host
	}
	return providers.ContentDigest(Name, []byte(c.String()), []byte(suffixes[0]))
}

// Resolve implements providers.Resolver; see the package documentation.
func (v *Verifier) Resolve(r *providers.Request) (providers.Event, error) {
	token := strings.TrimSpace(r.Header.Get(IdempotencyHeader))
	var form url.Values
	if isForm(r) {
		vals, err := providers.ParseForm(r)
		if err != nil && token == "" {
			return providers.Event{}, err
		}
		form = vals
	}
	var ev providers.Event
	status := form.Get("MessageStatus")
	if status == "" {
		status = form.Get("CallStatus")
	}
	ev.Type = status
	switch {
	case token != "":
		ev.ID = token
	case form.Get("MessageSid") != "":
		ev.ID = form.Get("MessageSid")
	case form.Get("CallSid") != "":
		ev.ID = form.Get("CallSid")
	case form.Get("SmsSid") != "":
		ev.ID = form.Get("SmsSid")
	default:
		return ev, fmt.Errorf("%w: no %s header and no MessageSid, CallSid or SmsSid", providers.ErrNoEventID, IdempotencyHeader)
	}
	if token == "" && status != "" {
		ev.ID += ":" + status
	}
	return ev, nil
}

// Sign implements providers.Signer with the first Auth Token. A form body is
// signed with its parameters; any other body gets bodySHA256 added to r.URL's
// query (r.URL is created from twilio.url when nil). now is unused: the
// scheme has no timestamp.
func (v *Verifier) Sign(r *providers.Request, _ time.Time) error {
	if r.Header == nil {
		r.Header = http.Header{}
	}
	if r.URL != nil {
		if _, err := url.ParseQuery(r.URL.RawQuery); err != nil {
			return fmt.Errorf("twilio: unreadable request query: %w", err)
		}
	}
	if !isForm(r) {
		if r.URL == nil {
			if v.base == nil {
				return fmt.Errorf("twilio: cannot sign without a request URL (set twilio.url)")
			}
			u := *v.base
			r.URL = &u
		}
		q, err := url.ParseQuery(r.URL.RawQuery)
		if err != nil {
			return fmt.Errorf("twilio: unreadable request query: %w", err)
		}
		switch {
		case q.Has(BodyHashParam):
			q.Set(BodyHashParam, bodyHash(r.Body))
			r.URL.RawQuery = q.Encode()
		case r.URL.RawQuery == "":
			r.URL.RawQuery = BodyHashParam + "=" + bodyHash(r.Body)
		default: // keep the configured query as it is
			r.URL.RawQuery += "&" + BodyHashParam + "=" + bodyHash(r.Body)
		}
	}
	u, err := v.requestURL(r)
	if err != nil {
		return fmt.Errorf("twilio: %w", err)
	}
	suffix := ""
	if isForm(r) {
		params, err := url.ParseQuery(string(r.Body))
		if err != nil {
			return fmt.Errorf("twilio: form body: %w", err)
		}
		suffix = ParamStrings(params)[0]
	}
	r.Header.Set(Header, base64.StdEncoding.EncodeToString(mac(v.tokens[0], u.String(), suffix)))
	return nil
}

// Describe implements providers.Describer.
func (v *Verifier) Describe() providers.Description {
	return providers.Description{
		Headers:        []string{Header},
		DefaultEventID: "header:" + IdempotencyHeader + ", else {form:MessageSid|CallSid|SmsSid}[:{form:MessageStatus|CallStatus}]",
		// The idempotency token is not signed (see ContentKey).
		IDSigned: false,
	}
}
