package googleplay

import (
	"bytes"
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/hookline/hookline/providers"
)

// Token is a parsed, not yet verified, ID token.
type Token struct {
	Kid string
	// Claims. IssuedAt and Expiry are Unix seconds, as the token has them
	// (google-auth-library reads them as numbers, fractions included).
	Issuer, Audience, Email, Subject string
	EmailVerified                    bool
	IssuedAt, Expiry                 float64
	// SigningInput is header.payload as received; Signature the RSA
	// signature over it.
	SigningInput string
	Signature    []byte
}

// b64url reports whether s is unpadded base64url text (RFC 7515 §2): the
// decoder would also skip CR and LF, which a token never holds.
func b64url(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

var rawURL = base64.RawURLEncoding.Strict()

// ParseToken parses a compact JWS and the claims this adapter reads, without
// verifying it. It requires at most 8 KiB, alg RS256, a kid of at most 256
// bytes, no crit header, JSON objects, string iss, aud (a list is refused,
// as google-auth-library refuses it), email, non-zero numeric iat and exp,
// and a signature of 256 to 1024 bytes. Errors wrap
// providers.ErrInvalidSignature and never quote the token.
func ParseToken(s string) (*Token, error) {
	bad := func(what string) (*Token, error) {
		return nil, fmt.Errorf("%w: %s: %s", providers.ErrInvalidSignature, Header, what)
	}
	if len(s) > maxTokenBytes {
		return bad("token over 8 KiB")
	}
	h64, rest, ok1 := strings.Cut(s, ".")
	p64, s64, ok2 := strings.Cut(rest, ".")
	if !ok1 || !ok2 || !b64url(h64) || !b64url(p64) || !b64url(s64) {
		return bad("not a compact JWS (three base64url parts)")
	}
	t := &Token{SigningInput: h64 + "." + p64}
	if err := t.parseHeader(h64); err != nil {
		return bad(err.Error())
	}
	if err := t.parseClaims(p64); err != nil {
		return bad(err.Error())
	}
	sig, err := rawURL.DecodeString(s64)
	if err != nil || len(sig) < 256 || len(sig) > 1024 {
		return bad("the signature is not an RSA signature of 2048 to 8192 bits")
	}
	t.Signature = sig
	return t, nil
}

// parseHeader reads the protected header: alg RS256, a kid, no crit.
func (t *Token) parseHeader(h64 string) error {
	raw, err := rawURL.DecodeString(h64)
	if err != nil {
		return errors.New("the header is not base64url")
	}
	var hdr struct {
		Alg  *string         `json:"alg"`
		Kid  *string         `json:"kid"`
		Crit json.RawMessage `json:"crit"`
	}
	if err := strictObject(raw, &hdr); err != nil {
		return errors.New("the header is not a JSON object")
	}
	switch {
	case hdr.Alg == nil || *hdr.Alg != "RS256":
		return errors.New("alg must be RS256")
	case hdr.Crit != nil:
		return errors.New("crit names extensions this adapter does not know")
	case hdr.Kid == nil || *hdr.Kid == "":
		return errors.New("no kid")
	case len(*hdr.Kid) > maxKidBytes:
		return errors.New("kid over 256 bytes")
	}
	t.Kid = *hdr.Kid
	return nil
}

// parseClaims reads the claims: the strings iss, aud, email, sub; the
// boolean email_verified; the numbers iat and exp.
func (t *Token) parseClaims(p64 string) error {
	raw, err := rawURL.DecodeString(p64)
	if err != nil {
		return errors.New("the payload is not base64url")
	}
	var c struct {
		Iss           *string         `json:"iss"`
		Aud           json.RawMessage `json:"aud"`
		Email         *string         `json:"email"`
		EmailVerified json.RawMessage `json:"email_verified"`
		Sub           *string         `json:"sub"`
		Iat           *json.Number    `json:"iat"`
		Exp           *json.Number    `json:"exp"`
	}
	if err := strictObject(raw, &c); err != nil {
		return errors.New("the payload is not a JSON object of the claims' types")
	}
	if c.Aud != nil && json.Unmarshal(c.Aud, &t.Audience) != nil {
		return errors.New("aud is not one string")
	}
	if t.IssuedAt, err = unixSeconds(c.Iat); err != nil {
		return fmt.Errorf("iat: %w", err)
	}
	if t.Expiry, err = unixSeconds(c.Exp); err != nil {
		return fmt.Errorf("exp: %w", err)
	}
	t.Issuer, t.Email, t.Subject = deref(c.Iss), deref(c.Email), deref(c.Sub)
	t.EmailVerified = bytes.Equal(bytes.TrimSpace(c.EmailVerified), []byte("true"))
	return nil
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// unixSeconds reads a NumericDate that google-auth-library would accept: a
// present, non-zero, finite number.
func unixSeconds(n *json.Number) (float64, error) {
	if n == nil {
		return 0, errors.New("required")
	}
	f, err := strconv.ParseFloat(n.String(), 64)
	if err != nil || f == 0 || math.IsInf(f, 0) || math.IsNaN(f) {
		return 0, errors.New("not a non-zero number")
	}
	return f, nil
}

// strictObject decodes one JSON object (numbers kept exact), nothing after
// it, nesting within providers.MaxJSONDepth.
func strictObject(b []byte, v any) error {
	b = bytes.TrimSpace(b)
	if len(b) == 0 || b[0] != '{' {
		return errors.New("not an object")
	}
	if err := providers.CheckJSONDepth(b); err != nil {
		return err
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

// verify reports whether the signature is pub's RS256 signature of the
// signing input.
func (t *Token) verify(pub *rsa.PublicKey) bool {
	digest := sha256.Sum256([]byte(t.SigningInput))
	return rsa.VerifyPKCS1v15(pub, crypto.SHA256, digest[:], t.Signature) == nil
}

// Claims are what SignToken puts in a token: those of the ID token Pub/Sub
// sends with an authenticated push.
type Claims struct {
	Issuer, Audience string
	// Email is the push subscription's service account; EmailVerified is
	// true in Pub/Sub's tokens.
	Email         string
	EmailVerified bool
	// Subject and AuthorizedParty are the service account's unique id
	// (sub, azp); Pub/Sub sets both.
	Subject, AuthorizedParty string
	IssuedAt, Expiry         time.Time
}

// SignToken signs claims as an RS256 ID token with priv under kid, as
// Google signs a push's token. It is for tests and tools: Google holds the
// real keys, so the adapter itself cannot sign.
func SignToken(priv *rsa.PrivateKey, kid string, c Claims) (string, error) {
	header, err := json.Marshal(map[string]string{"alg": "RS256", "kid": kid, "typ": "JWT"})
	if err != nil {
		return "", err
	}
	payload, err := json.Marshal(map[string]any{
		"aud": c.Audience, "azp": c.AuthorizedParty, "email": c.Email, "email_verified": c.EmailVerified,
		"exp": c.Expiry.Unix(), "iat": c.IssuedAt.Unix(), "iss": c.Issuer, "sub": c.Subject,
	})
	if err != nil {
		return "", err
	}
	input := base64.RawURLEncoding.EncodeToString(header) + "." + base64.RawURLEncoding.EncodeToString(payload)
	digest := sha256.Sum256([]byte(input))
	sig, err := rsa.SignPKCS1v15(rand.Reader, priv, crypto.SHA256, digest[:])
	if err != nil {
		return "", err
	}
	return input + "." + base64.RawURLEncoding.EncodeToString(sig), nil
}
