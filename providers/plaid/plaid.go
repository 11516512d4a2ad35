// Package plaid verifies Plaid webhooks. The Plaid-Verification header is a
// compact JWS (JWT) signed with ES256 by one of Plaid's keys:
//
//   - the protected header must say alg ES256 (anything else, none and HS256
//     included, is refused) and name the key in `kid` (at most 256 bytes);
//   - the key is a JWK fetched by POSTing {client_id, secret, key_id} to
//     `/webhook_verification_key/get`, cached by kid (refreshed hourly, at
//     most 64 kept) and refused once its `expired_at` has passed;
//   - the claim `iat` must be within the tolerance (default 5 minutes, both
//     directions) and `request_body_sha256` must equal the hex SHA-256 of the
//     raw body (constant-time compare).
//
// Settings `plaid: {client_id: …, key_url: …}`: client_id is required;
// key_url defaults to https://production.plaid.com/webhook_verification_key/get
// (sandbox: https://sandbox.plaid.com/…; plain http is accepted only for a
// loopback host, for tests). The source's `secrets` are the Plaid API
// secrets for that client id, sent with the key request; several are tried in
// turn (rotation). They never sign anything: Plaid holds the signing keys.
//
// The delivery is not authenticated until its key is known, so the key
// requests it can cause are bounded (see package keyfetch):
//
//   - an answer that a kid has no usable key (a non-2xx answer but 408, 429
//     and 5xx under every secret, such as INVALID_WEBHOOK_VERIFICATION_KEY_ID;
//     a response without a usable ES256 P-256 key) is remembered for 2
//     minutes (at most 1024 kids): naming that kid again costs no request;
//   - concurrent deliveries naming the same uncached kid share one lookup;
//   - the adapter makes at most 10 key requests a second (bursts of 20; one
//     per secret tried); a request whose turn is more than a second away is
//     not made.
//
// A key request that cannot be made or answered (the rate limit, a
// connection error, a timeout, a 408, 429 or 5xx answer) is
// providers.ErrUnavailable (503): nothing is known about the delivery, and
// Plaid retries. Such failures are not remembered. The answers above and a
// key that is expired are invalid signatures.
//
// Plaid sends no event id: the default id is the hex SHA-256 of the body, the
// type `{webhook_type}.{webhook_code}`.
package plaid

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/hookline/hookline/providers"
	"github.com/hookline/hookline/providers/keyfetch"
)

// Name is the adapter's registered name.
const Name = "plaid"

// Header is the signature header.
const Header = "Plaid-Verification"

// DefaultKeyURL is Plaid's production key endpoint.
const DefaultKeyURL = "https://production.plaid.com/webhook_verification_key/get"

// DefaultTolerance bounds the age of the token's iat, as Plaid recommends.
const DefaultTolerance = 5 * time.Minute

const (
	maxCachedKeys  = 64
	keyRefresh     = time.Hour
	maxTokenBytes  = 8 << 10
	maxKidBytes    = 256 // Plaid's kids are UUIDs; bounds a remembered answer
	maxKeyResponse = 64 << 10
	fetchTimeout   = 10 * time.Second
)

func init() {
	providers.Register(Name, func(cfg providers.Config) (providers.Provider, error) { return New(cfg) })
}

// Settings is the `plaid:` block of a source.
type Settings struct {
	// ClientID is the Plaid client id the key requests are made for. Required.
	ClientID string `yaml:"client_id"`
	// KeyURL is the webhook verification key endpoint. Default DefaultKeyURL.
	KeyURL string `yaml:"key_url"`
}

type cachedKey struct {
	key       *ecdsa.PublicKey
	expiredAt time.Time // zero: not expired
}

// Verifier is the Plaid adapter.
type Verifier struct {
	clientID  string
	secrets   []string
	keyURL    string
	tolerance time.Duration
	now       func() time.Time
	client    *http.Client

	// keys caches keys by kid and coalesces their fetches; limiter bounds the
	// key requests this adapter makes.
	keys    *keyfetch.Cache[cachedKey]
	limiter *keyfetch.Limiter
}

// New returns a Plaid adapter for cfg.
func New(cfg providers.Config) (*Verifier, error) {
	if len(cfg.Secrets) == 0 {
		return nil, fmt.Errorf("secrets: at least one Plaid API secret is required (to fetch verification keys)")
	}
	var s Settings
	if err := cfg.Decode(&s); err != nil {
		return nil, fmt.Errorf("plaid: %w", err)
	}
	if strings.TrimSpace(s.ClientID) == "" {
		return nil, fmt.Errorf("plaid.client_id: required (keys are fetched with the client id and secret)")
	}
	if s.KeyURL == "" {
		s.KeyURL = DefaultKeyURL
	}
	u, err := url.Parse(s.KeyURL)
	if err != nil || u.Host == "" || (u.Scheme != "https" && !(u.Scheme == "http" && keyfetch.IsLoopback(u.Hostname()))) {
		return nil, fmt.Errorf("plaid.key_url: want an absolute https URL (http only on loopback)")
	}
	v := &Verifier{
		clientID:  strings.TrimSpace(s.ClientID),
		secrets:   cfg.Secrets,
		keyURL:    s.KeyURL,
		tolerance: cfg.Tolerance,
		now:       cfg.NowFunc(),
		limiter:   keyfetch.NewDefaultLimiter(),
	}
	v.keys = keyfetch.NewCache[cachedKey](keyfetch.Options{MaxEntries: maxCachedKeys, Now: v.now})
	if v.tolerance == 0 {
		v.tolerance = DefaultTolerance
	}
	v.client = keyfetch.NoRedirects(cfg.HTTPClient)
	return v, nil
}

// Token is a parsed, not yet verified, Plaid-Verification JWT.
type Token struct {
	Alg, Kid     string
	IssuedAt     int64
	BodySHA256   string
	SigningInput string // header.payload, as received
	Signature    []byte // r||s, 64 bytes for ES256
}

// ParseToken parses a compact JWS and its claims without verifying it. It
// requires alg ES256, a kid of at most 256 bytes, a numeric iat and a
// request_body_sha256 claim.
func ParseToken(s string) (*Token, error) {
	bad := func(what string) (*Token, error) {
		return nil, fmt.Errorf("%w: %s: %s", providers.ErrInvalidSignature, Header, what)
	}
	if len(s) > maxTokenBytes {
		return bad("too long")
	}
	h64, rest, ok1 := strings.Cut(s, ".")
	p64, s64, ok2 := strings.Cut(rest, ".")
	if !ok1 || !ok2 || strings.Contains(s64, ".") {
		return bad("not a compact JWS")
	}
	hdrJSON, err := base64.RawURLEncoding.DecodeString(h64)
	if err != nil {
		return bad("header is not base64url")
	}
	var hdr struct {
		Alg string `json:"alg"`
		Kid string `json:"kid"`
	}
	if err := strictJSON(hdrJSON, &hdr); err != nil {
		return bad("header is not a JSON object")
	}
	if hdr.Alg != "ES256" {
		return bad("alg must be ES256")
	}
	if hdr.Kid == "" {
		return bad("no kid")
	}
	if len(hdr.Kid) > maxKidBytes {
		return bad("kid too long")
	}
	payload, err := base64.RawURLEncoding.DecodeString(p64)
	if err != nil {
		return bad("payload is not base64url")
	}
	var claims struct {
		Iat        *json.Number `json:"iat"`
		BodySHA256 *string      `json:"request_body_sha256"`
	}
	if err := strictJSON(payload, &claims); err != nil {
		return bad("payload is not a JSON object")
	}
	if claims.Iat == nil || claims.BodySHA256 == nil {
		return bad("iat and request_body_sha256 claims are required")
	}
	iat, err := claims.Iat.Int64()
	if err != nil {
		return bad("iat is not an integer")
	}
	sig, err := base64.RawURLEncoding.DecodeString(s64)
	if err != nil || len(sig) != 64 {
		return bad("signature is not a base64url ES256 signature")
	}
	return &Token{Alg: hdr.Alg, Kid: hdr.Kid, IssuedAt: iat, BodySHA256: *claims.BodySHA256, SigningInput: h64 + "." + p64, Signature: sig}, nil
}

// strictJSON decodes one JSON object (numbers kept exact), nothing after it.
func strictJSON(b []byte, v any) error {
	b = bytes.TrimSpace(b)
	if len(b) == 0 || b[0] != '{' {
		return errors.New("not an object")
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return errors.New("trailing data")
	}
	return nil
}

// JWK is the key object of /webhook_verification_key/get.
type JWK struct {
	Alg       string `json:"alg"`
	Crv       string `json:"crv"`
	Kid       string `json:"kid"`
	Kty       string `json:"kty"`
	Use       string `json:"use"`
	X         string `json:"x"`
	Y         string `json:"y"`
	CreatedAt int64  `json:"created_at"`
	ExpiredAt *int64 `json:"expired_at"`
}

// PublicKey returns the P-256 public key of an EC JWK.
func (k *JWK) PublicKey() (*ecdsa.PublicKey, error) {
	if k.Kty != "EC" || k.Crv != "P-256" || (k.Alg != "" && k.Alg != "ES256") {
		return nil, errors.New("not an ES256 P-256 key")
	}
	x, err1 := base64.RawURLEncoding.DecodeString(k.X)
	y, err2 := base64.RawURLEncoding.DecodeString(k.Y)
	if err1 != nil || err2 != nil || len(x) != 32 || len(y) != 32 {
		return nil, errors.New("bad key coordinates")
	}
	pub, err := ecdsa.ParseUncompressedPublicKey(elliptic.P256(), append(append([]byte{4}, x...), y...))
	if err != nil {
		return nil, errors.New("key is not a point on P-256")
	}
	return pub, nil
}

var errFetch = errors.New("cannot get the Plaid verification key")

// unavailable is a key request that could not be made or answered.
func unavailable(format string, args ...any) error {
	return fmt.Errorf("%w: %w: "+format, append([]any{providers.ErrUnavailable, errFetch}, args...)...)
}

// fetch asks the key endpoint for kid, trying each secret in turn. If any
// attempt was unavailable the answer is ErrUnavailable: the key may exist
// under that secret.
func (v *Verifier) fetch(kid string) (cachedKey, error) {
	var last, down error
	for _, secret := range v.secrets {
		k, err := v.fetchWith(kid, secret)
		if err == nil {
			return k, nil
		}
		last = err
		if errors.Is(err, providers.ErrUnavailable) {
			down = err
			if errors.Is(err, keyfetch.ErrRateLimited) {
				break // the next secret's turn would be refused too
			}
		}
	}
	if down != nil {
		return cachedKey{}, down
	}
	return cachedKey{}, last
}

// fetchWith makes one key request with secret. Errors wrap errFetch; those
// that say nothing about the key (no turn within the rate limit, a network
// error, a 408, 429 or 5xx answer) also wrap providers.ErrUnavailable.
func (v *Verifier) fetchWith(kid, secret string) (cachedKey, error) {
	reqBody, err := json.Marshal(map[string]string{"client_id": v.clientID, "secret": secret, "key_id": kid})
	if err != nil {
		return cachedKey{}, fmt.Errorf("%w: %v", errFetch, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), fetchTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, v.keyURL, bytes.NewReader(reqBody))
	if err != nil {
		return cachedKey{}, fmt.Errorf("%w: %v", errFetch, err)
	}
	req.Header.Set("Content-Type", "application/json")
	if err := v.limiter.Wait(ctx); err != nil {
		return cachedKey{}, fmt.Errorf("%w: %w", errFetch, err)
	}
	resp, err := v.client.Do(req)
	if err != nil {
		return cachedKey{}, unavailable("%v", err)
	}
	defer resp.Body.Close()
	if keyfetch.Transient(resp.StatusCode) {
		return cachedKey{}, unavailable("key endpoint answered %d", resp.StatusCode)
	}
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxKeyResponse+1))
	if err != nil {
		return cachedKey{}, unavailable("%v", err)
	}
	if len(raw) > maxKeyResponse {
		return cachedKey{}, fmt.Errorf("%w: response over %d bytes", errFetch, maxKeyResponse)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		var perr struct {
			Code string `json:"error_code"`
		}
		_ = json.Unmarshal(raw, &perr)
		return cachedKey{}, fmt.Errorf("%w: key endpoint answered %d %s", errFetch, resp.StatusCode, perr.Code)
	}
	return parseKeyResponse(raw, kid)
}

// parseKeyResponse reads a 2xx answer of the key endpoint for kid: a JSON
// object whose "key" is a usable ES256 JWK named kid (or unnamed). Errors
// wrap errFetch.
func parseKeyResponse(raw []byte, kid string) (cachedKey, error) {
	var out struct {
		Key *JWK `json:"key"`
	}
	if err := json.Unmarshal(raw, &out); err != nil || out.Key == nil {
		return cachedKey{}, fmt.Errorf("%w: no key in the response", errFetch)
	}
	if out.Key.Kid != "" && out.Key.Kid != kid {
		return cachedKey{}, fmt.Errorf("%w: the endpoint returned another key", errFetch)
	}
	pub, err := out.Key.PublicKey()
	if err != nil {
		return cachedKey{}, fmt.Errorf("%w: %v", errFetch, err)
	}
	k := cachedKey{key: pub}
	if out.Key.ExpiredAt != nil {
		k.expiredAt = time.Unix(*out.Key.ExpiredAt, 0)
	}
	return k, nil
}

// publicKey returns the key named kid if it has not expired: from the cache,
// or fetched (within the rate limit, one fetch at a time per kid). A key is
// refetched after keyRefresh so that a later expired_at is learned; an
// expired key stays cached and refused.
func (v *Verifier) publicKey(kid string) (*ecdsa.PublicKey, error) {
	c, err := v.keys.Get(kid, func(now time.Time) (cachedKey, time.Time, error) {
		k, err := v.fetch(kid)
		return k, now.Add(keyRefresh), err
	})
	if err != nil {
		return nil, err
	}
	if !c.expiredAt.IsZero() && !v.now().Before(c.expiredAt) {
		return nil, errors.New("the verification key has expired")
	}
	return c.key, nil
}

// Verify implements providers.Verifier.
func (v *Verifier) Verify(r *providers.Request) error {
	value := strings.TrimSpace(r.Header.Get(Header))
	if value == "" {
		return fmt.Errorf("%w: %s header is required", providers.ErrNoSignature, Header)
	}
	tok, err := ParseToken(value)
	if err != nil {
		return err
	}
	pub, err := v.publicKey(tok.Kid)
	if errors.Is(err, providers.ErrUnavailable) {
		return err
	}
	if err != nil {
		return fmt.Errorf("%w: %w", providers.ErrInvalidSignature, err)
	}
	digest := sha256.Sum256([]byte(tok.SigningInput))
	rr, ss := new(big.Int).SetBytes(tok.Signature[:32]), new(big.Int).SetBytes(tok.Signature[32:])
	if !ecdsa.Verify(pub, digest[:], rr, ss) {
		return fmt.Errorf("%w: %s signature does not match", providers.ErrInvalidSignature, Header)
	}
	if err := providers.CheckTimestamp(time.Unix(tok.IssuedAt, 0), v.now(), v.tolerance); err != nil {
		return fmt.Errorf("%w (tolerance %s)", err, v.tolerance)
	}
	sum := sha256.Sum256(r.Body)
	if subtle.ConstantTimeCompare([]byte(hex.EncodeToString(sum[:])), []byte(strings.ToLower(tok.BodySHA256))) != 1 {
		return fmt.Errorf("%w: the body does not match request_body_sha256", providers.ErrInvalidSignature)
	}
	return nil
}

// Resolve implements providers.Resolver: the body's SHA-256 as id, type
// `{webhook_type}.{webhook_code}`.
func (v *Verifier) Resolve(r *providers.Request) (providers.Event, error) {
	f, err := providers.JSONFields(r.Body, "webhook_type", "webhook_code")
	if err != nil {
		return providers.Event{}, err
	}
	sum := sha256.Sum256(r.Body)
	ev := providers.Event{ID: hex.EncodeToString(sum[:])}
	if f[0] != "" || f[1] != "" {
		ev.Type = f[0] + "." + f[1]
	}
	return ev, nil
}

// Describe implements providers.Describer. The adapter cannot sign: only
// Plaid holds the keys.
func (v *Verifier) Describe() providers.Description {
	return providers.Description{Headers: []string{Header}, DefaultEventID: "body:sha256", DefaultTolerance: DefaultTolerance, IDSigned: true}
}
