// Package googleplay verifies Google Play Real-time Developer Notifications
// (RTDN) as a Cloud Pub/Sub push subscription with authentication delivers
// them, and any other authenticated Pub/Sub push: the checks are Pub/Sub's,
// and only the event type and the optional package check read the RTDN
// inside.
//
// Pub/Sub POSTs one message a request, wrapped (the default; payload
// unwrapping must be off):
//
//	{"message": {"data": "<base64>", "attributes": {…},
//	             "messageId": "…", "message_id": "…",
//	             "publishTime": "…", "publish_time": "…"},
//	 "subscription": "projects/P/subscriptions/S"}
//
// and, with authentication enabled on the subscription, the header
// `Authorization: Bearer <JWT>`: an OpenID Connect ID token Google signs
// (RS256) for the subscription's service account. Verify checks it as
// Google's own library does (google-auth-library for Node.js,
// OAuth2Client.verifySignedJwtWithCertsAsync) and as Google's guide to
// authenticated push asks:
//
//   - the header names alg RS256 (anything else, none and HS256 included, is
//     refused: the library does not read alg, hookline does) and a kid of at
//     most 256 bytes, and the signature is by the key of that kid in
//     Google's key set;
//   - iss is accounts.google.com or https://accounts.google.com;
//   - aud is exactly `googleplay.audience` (the audience set on the push
//     subscription; a list is refused);
//   - iat and exp are set, exp is less than 24 hours ahead, and now lies in
//     [iat − 5 min, exp + 5 min] (the library's 300-second clock skew);
//   - email is exactly `googleplay.service_account` and email_verified is
//     true (the checks the library leaves to its caller).
//
// The token authenticates the push, not its body: it carries no digest of
// the body, so a body changed in transit, or a body written by whoever holds
// a token still valid (Google's last an hour), verifies with it. TLS is what
// protects the body. Hookline therefore claims nothing more: the event id
// (message.messageId) and type come from a body that is not signed, and the
// adapter has no content key (there is no signed content to key a replay
// on). Pub/Sub redelivers a message with its messageId, so deduplication
// works for genuine redeliveries.
//
// With `googleplay.package_name` set, a push whose data is not a Developer
// Notification of that package (its packageName differs, or it carries
// none) is refused as the token's would be (401), before any key is fetched.
//
// Google's keys are a JWKS (DefaultKeysURL, Google's OpenID Connect
// jwks_uri; the Node library, in Node, reads the same keys as PEM
// certificates from …/oauth2/v1/certs), fetched through package keyfetch's
// bounds:
//
//   - the set is cached for its Cache-Control max-age (clamped to [1 min,
//     24 h]), an hour without one; concurrent fetches share one request;
//   - a kid missing from the cached set triggers one refetch (Google adds a
//     key before signing with it); a kid that the refetched set lacks too is
//     remembered for 2 minutes (at most 1024 kids), so naming it again costs
//     nothing; at most 10 fetches a second (bursts of 20), none waiting more
//     than a second for its turn;
//   - a set that cannot be fetched (the rate limit, a connection error, a
//     timeout, any non-2xx answer, a body over 64 KiB or without a usable
//     RS256 key) is providers.ErrUnavailable (503): the keys URL is the
//     source's own setting, so its failure says nothing about the push, and
//     Pub/Sub retries. Such failures are not remembered.
//
// Settings `googleplay: {audience, service_account, package_name, keys_url}`:
// audience and service_account are required; keys_url defaults to
// DefaultKeysURL (https; plain http only for a loopback host, for tests).
// The source's `secrets` are not used: Google holds the signing keys, and the
// adapter cannot sign (`hookline send` refuses; tests sign with SignToken and
// a key of their own).
//
// The event id is message.messageId (message.message_id, when present, must
// be equal); the type is the key the Developer Notification carries
// (subscriptionNotification, oneTimeProductNotification,
// voidedPurchaseNotification, pendingRefundReviewNotification or
// testNotification), "" when the data is not one; the time is its
// eventTimeMillis, else the message's publishTime.
package googleplay

import (
	"crypto/rsa"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"golang.org/x/sync/singleflight"

	"github.com/hookline/hookline/providers"
	"github.com/hookline/hookline/providers/keyfetch"
)

// Name is the adapter's registered name.
const Name = "googleplay"

// Header carries the push's ID token: "Bearer <JWT>".
const Header = "Authorization"

// DefaultKeysURL is Google's OpenID Connect key set (JWKS), the jwks_uri of
// https://accounts.google.com/.well-known/openid-configuration.
const DefaultKeysURL = "https://www.googleapis.com/oauth2/v3/certs"

// Issuers are the iss values of Google's ID tokens.
var Issuers = []string{"accounts.google.com", "https://accounts.google.com"}

// ClockSkew is how far outside [iat, exp] a token is still accepted, and
// MaxLifetime how far ahead exp may be: google-auth-library's
// OAuth2Client.CLOCK_SKEW_SECS_ (300) and DEFAULT_MAX_TOKEN_LIFETIME_SECS_
// (86400).
const (
	ClockSkew   = 300 * time.Second
	MaxLifetime = 86400 * time.Second
)

const (
	maxTokenBytes   = 8 << 10
	maxKidBytes     = 256
	maxKeysResponse = 64 << 10
	maxKeys         = 64
	keysRefresh     = time.Hour
	minKeysTTL      = time.Minute
	maxKeysTTL      = 24 * time.Hour
	fetchTimeout    = 10 * time.Second
)

func init() {
	providers.Register(Name, func(cfg providers.Config) (providers.Provider, error) { return New(cfg) })
}

// Settings is the `googleplay:` block of a source.
type Settings struct {
	// Audience is the audience set on the push subscription (Pub/Sub's
	// default when none is set: the push endpoint URL). Required.
	Audience string `yaml:"audience"`
	// ServiceAccount is the email of the service account the push
	// subscription authenticates as. Required.
	ServiceAccount string `yaml:"service_account"`
	// PackageName, when set, is the only packageName accepted in the data.
	PackageName string `yaml:"package_name"`
	// KeysURL is Google's key set. Default DefaultKeysURL.
	KeysURL string `yaml:"keys_url"`
}

// Verifier is the Google Play (Pub/Sub push) adapter.
type Verifier struct {
	audience       string
	serviceAccount string
	packageName    string
	keysURL        string
	now            func() time.Time
	client         *http.Client

	// sets caches the key set (under one key); kids coalesces the refetch
	// for a kid missing from it and remembers a kid no set has; fetches
	// shares one request among concurrent fetches; limiter bounds them.
	sets    *keyfetch.Cache[*keySet]
	kids    *keyfetch.Cache[*rsa.PublicKey]
	fetches singleflight.Group
	limiter *keyfetch.Limiter
}

// New returns a Google Play adapter for cfg.
func New(cfg providers.Config) (*Verifier, error) {
	if len(cfg.Secrets) > 0 {
		return nil, fmt.Errorf("secrets: googleplay takes none (Google signs each push with its own key; set googleplay.audience and googleplay.service_account)")
	}
	var s Settings
	if err := cfg.Decode(&s); err != nil {
		return nil, fmt.Errorf("googleplay: %w", err)
	}
	if err := s.validate(); err != nil {
		return nil, err
	}
	v := &Verifier{
		audience:       s.Audience,
		serviceAccount: s.ServiceAccount,
		packageName:    s.PackageName,
		keysURL:        s.KeysURL,
		now:            cfg.NowFunc(),
		limiter:        keyfetch.NewDefaultLimiter(),
	}
	v.sets = keyfetch.NewCache[*keySet](keyfetch.Options{MaxEntries: 1, Now: v.now})
	v.kids = keyfetch.NewCache[*rsa.PublicKey](keyfetch.Options{MaxEntries: maxKeys, Now: v.now})
	v.client = keyfetch.NoRedirects(cfg.HTTPClient)
	return v, nil
}

// validate checks s and fills in the default keys URL.
func (s *Settings) validate() error {
	switch {
	case s.Audience == "":
		return errors.New("googleplay.audience: required (the audience set on the push subscription; Pub/Sub's default is the push endpoint URL)")
	case strings.TrimSpace(s.Audience) != s.Audience:
		return errors.New("googleplay.audience: must not start or end with spaces (it is compared exactly)")
	case s.ServiceAccount == "":
		return errors.New("googleplay.service_account: required (the service account the push subscription authenticates as)")
	case strings.ContainsAny(s.ServiceAccount, " \t\r\n") || !strings.Contains(s.ServiceAccount, "@"):
		return errors.New("googleplay.service_account: want the service account's email, NAME@PROJECT.iam.gserviceaccount.com")
	case strings.TrimSpace(s.PackageName) != s.PackageName:
		return errors.New("googleplay.package_name: must not start or end with spaces (it is compared exactly)")
	}
	if s.KeysURL == "" {
		s.KeysURL = DefaultKeysURL
	}
	u, err := url.Parse(s.KeysURL)
	if err != nil || u.Host == "" || u.User != nil || (u.Scheme != "https" && !(u.Scheme == "http" && keyfetch.IsLoopback(u.Hostname()))) {
		return errors.New("googleplay.keys_url: want an absolute https URL (http only on loopback)")
	}
	return nil
}

// bearer returns the token of the request's Authorization header.
func bearer(r *providers.Request) (string, error) {
	vals := r.Header.Values(Header)
	if len(vals) == 0 || (len(vals) == 1 && strings.TrimSpace(vals[0]) == "") {
		return "", fmt.Errorf("%w: %s header is required (enable authentication on the push subscription)", providers.ErrNoSignature, Header)
	}
	if len(vals) > 1 {
		return "", fmt.Errorf("%w: several %s headers", providers.ErrInvalidSignature, Header)
	}
	scheme, tok, ok := strings.Cut(strings.TrimSpace(vals[0]), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", fmt.Errorf("%w: %s is not a Bearer token", providers.ErrInvalidSignature, Header)
	}
	return strings.TrimSpace(tok), nil
}

// Verify implements providers.Verifier: the token's form and claims, then
// the package (when package_name is set), then its signature, so that
// nothing is fetched for a token or push that would be refused anyway.
func (v *Verifier) Verify(r *providers.Request) error {
	raw, err := bearer(r)
	if err != nil {
		return err
	}
	tok, err := ParseToken(raw)
	if err != nil {
		return err
	}
	if err := v.checkClaims(tok); err != nil {
		return err
	}
	if v.packageName != "" {
		if err := v.checkPackage(r.Body); err != nil {
			return err
		}
	}
	pub, err := v.publicKey(tok.Kid)
	if errors.Is(err, providers.ErrUnavailable) {
		return err
	}
	if err != nil {
		return fmt.Errorf("%w: %w", providers.ErrInvalidSignature, err)
	}
	if !tok.verify(pub) {
		return fmt.Errorf("%w: the token's signature does not match", providers.ErrInvalidSignature)
	}
	return nil
}

// checkClaims checks what the token says against the source and the clock,
// as google-auth-library does (iss, aud, iat, exp) and as Google's guide
// asks of its caller (email, email_verified).
func (v *Verifier) checkClaims(t *Token) error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: "+format, append([]any{providers.ErrInvalidSignature}, args...)...)
	}
	if !validIssuer(t.Issuer) {
		return bad("iss is not accounts.google.com")
	}
	if t.Audience != v.audience {
		return bad("aud is not googleplay.audience")
	}
	if err := checkTimes(t, v.now()); err != nil {
		return err
	}
	if t.Email != v.serviceAccount {
		return bad("email is not googleplay.service_account")
	}
	if !t.EmailVerified {
		return bad("email_verified is not true")
	}
	return nil
}

func validIssuer(iss string) bool {
	for _, i := range Issuers {
		if iss == i {
			return true
		}
	}
	return false
}

// checkTimes applies google-auth-library's rules, in seconds with the
// library's millisecond clock: exp < now + MaxLifetime, and iat − ClockSkew
// <= now <= exp + ClockSkew.
func checkTimes(t *Token, at time.Time) error {
	now := float64(at.UnixMilli()) / 1000
	switch {
	case t.Expiry >= now+MaxLifetime.Seconds():
		return fmt.Errorf("%w: exp is more than %s ahead", providers.ErrTimestampTooNew, MaxLifetime)
	case now < t.IssuedAt-ClockSkew.Seconds():
		return fmt.Errorf("%w: the token is used before its iat (allowing %s)", providers.ErrTimestampTooNew, ClockSkew)
	case now > t.Expiry+ClockSkew.Seconds():
		return fmt.Errorf("%w: the token expired (exp, allowing %s)", providers.ErrTimestampTooOld, ClockSkew)
	}
	return nil
}

// checkPackage refuses a push whose data is not a Developer Notification of
// googleplay.package_name.
func (v *Verifier) checkPackage(body []byte) error {
	p, err := ParsePush(body)
	if err != nil {
		return err
	}
	n := p.Notification()
	switch {
	case n == nil || n.PackageName == nil:
		return fmt.Errorf("%w: the data is not a Developer Notification with a packageName (googleplay.package_name is set)", providers.ErrInvalidSignature)
	case *n.PackageName != v.packageName:
		return fmt.Errorf("%w: packageName is not googleplay.package_name", providers.ErrInvalidSignature)
	}
	return nil
}

// Resolve implements providers.Resolver: message.messageId, the Developer
// Notification's type, and its eventTimeMillis (else publishTime).
func (v *Verifier) Resolve(r *providers.Request) (providers.Event, error) {
	p, err := ParsePush(r.Body)
	if err != nil {
		return providers.Event{}, err
	}
	if strings.TrimSpace(p.MessageID) == "" {
		return providers.Event{}, fmt.Errorf("%w: the push has no message.messageId", providers.ErrNoEventID)
	}
	ev := providers.Event{ID: p.MessageID, Time: p.PublishTime}
	if n := p.Notification(); n != nil {
		ev.Type = n.Type
		if !n.EventTime.IsZero() {
			ev.Time = n.EventTime
		}
	}
	return ev, nil
}

// SecretHeaders implements providers.SecretHeaderer: the Authorization
// header carries a bearer token (ingest never stores it anyway).
func (v *Verifier) SecretHeaders() []string { return []string{Header} }

// Describe implements providers.Describer. The token does not cover the
// body, so the id is not signed; there is no signed content to key a
// replay on. The adapter cannot sign: only Google holds the keys.
func (v *Verifier) Describe() providers.Description {
	return providers.Description{Headers: []string{Header}, DefaultEventID: "json:message.messageId", IDSigned: false}
}
