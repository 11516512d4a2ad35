package providers

import (
	"crypto"
	"crypto/hmac"
	_ "crypto/sha1" //nolint:gosec // HMAC-SHA1 is still sound; GitHub's legacy header and the generic adapter offer it
	_ "crypto/sha256"
	_ "crypto/sha512"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"strings"
)

// BodyMAC is the scheme where one header carries the HMAC of the raw body,
// keyed with a secret's bytes:
//
//	X-Signature: <Prefix><encoding of HMAC(secret, body)>
//
// as Checkout.com, Coinbase, GitHub, GoCardless, Lemon Squeezy, Mollie,
// Razorpay and Shopify sign, and the generic hmac adapter does as configured.
// A BodyMAC only describes the scheme: the keys (every configured secret, for
// rotation) are passed to each call, so one value serves every source and
// goroutine. The zero values of Hash, Encoding and Strict are the common
// choices: SHA-256, hex, read leniently.
//
// Verify and Sign cover schemes that sign the body alone. Schemes that sign
// more than the body but write the signature the same way (Square: the URL,
// then the body; Slack: "v0:<timestamp>:", then the body) use the parts:
// Parse the header, Match the signed parts, and Signature to write it.
type BodyMAC struct {
	// Header is the signature header.
	Header string
	// Hash is the HMAC's hash function; zero means crypto.SHA256. SHA-1,
	// SHA-256 and SHA-512 are linked in.
	Hash crypto.Hash
	// Encoding is how the MAC is written; zero means Hex.
	Encoding Encoding
	// Prefix comes before the encoded MAC ("sha256=", "v0="); a signature
	// without it is not read. Empty: none.
	Prefix string
	// Strict accepts only the exact text Sign writes (lowercase hex or
	// canonical base64, nothing around it), as a sender whose reference code
	// compares the text would. Otherwise white space around the value is
	// ignored, hex is read in either case, and base64 as encoding/base64
	// reads it.
	Strict bool
	// Several: the header may carry several signatures, separated by commas,
	// spaces or tabs (rotation). Each is tried, and those that cannot be read
	// are skipped; Verify fails only when none can be read or none matches.
	Several bool
}

// Encoding is how a MAC is written in a header.
type Encoding uint8

const (
	// Hex is hexadecimal, written in lowercase.
	Hex Encoding = iota
	// Base64 is standard, padded base64 (base64.StdEncoding).
	Base64
	// Base64URL is URL-safe base64 without padding (base64.RawURLEncoding),
	// as Sanity writes its signatures.
	Base64URL
)

// String returns "hex", "base64" or "base64url".
func (e Encoding) String() string {
	switch e {
	case Base64:
		return "base64"
	case Base64URL:
		return "base64url"
	}
	return "hex"
}

func (e Encoding) encode(b []byte) string {
	switch e {
	case Base64:
		return base64.StdEncoding.EncodeToString(b)
	case Base64URL:
		return base64.RawURLEncoding.EncodeToString(b)
	}
	return hex.EncodeToString(b)
}

func (e Encoding) decode(s string) ([]byte, error) {
	switch e {
	case Base64:
		return base64.StdEncoding.DecodeString(s)
	case Base64URL:
		return base64.RawURLEncoding.Strict().DecodeString(s)
	}
	return hex.DecodeString(s)
}

// Verify checks that r's Header carries the HMAC of r.Body under one of
// keys. A missing header is an error wrapping ErrNoSignature; a value that
// cannot be read, or matches under no key, wraps ErrInvalidSignature. Errors
// name the header, never a key.
func (m *BodyMAC) Verify(r *Request, keys [][]byte) error {
	value := r.Header.Get(m.Header)
	if value == "" {
		return fmt.Errorf("%w: %s header is required", ErrNoSignature, m.Header)
	}
	sigs, err := m.Parse(value)
	if err != nil {
		return err
	}
	if !m.Match(keys, sigs, r.Body) {
		return fmt.Errorf("%w: %s does not match", ErrInvalidSignature, m.Header)
	}
	return nil
}

// Sign sets Header to the signature of r.Body under key.
func (m *BodyMAC) Sign(r *Request, key []byte) {
	r.Header.Set(m.Header, m.Signature(key, r.Body))
}

// Match reports whether one of sigs is the HMAC of msg's parts under one of
// keys: MatchHMAC with Hash.
func (m *BodyMAC) Match(keys, sigs [][]byte, msg ...[]byte) bool {
	return MatchHMAC(m.hash(), keys, sigs, msg...)
}

// Signature returns the header value for msg signed with key: Prefix, then
// the encoded HMAC of msg's parts written in order.
func (m *BodyMAC) Signature(key []byte, msg ...[]byte) string {
	return m.Prefix + m.Encoding.encode(HMAC(m.hash(), key, msg...))
}

// Parse returns the signatures in a header value: one, or with Several each
// one that can be read. A value without any is an error wrapping
// ErrInvalidSignature (and sigs is nil).
func (m *BodyMAC) Parse(value string) (sigs [][]byte, err error) {
	fields := []string{value}
	switch {
	case m.Several:
		fields = strings.FieldsFunc(value, func(r rune) bool { return r == ',' || r == ' ' || r == '\t' })
	case !m.Strict:
		fields[0] = strings.TrimSpace(value)
	}
	for _, f := range fields {
		if sig := m.decode(f); sig != nil {
			sigs = append(sigs, sig)
		}
	}
	if sigs != nil {
		return sigs, nil
	}
	if m.Several {
		return nil, fmt.Errorf("%w: no usable signature in %s", ErrInvalidSignature, m.Header)
	}
	want := fmt.Sprintf("a %s HMAC-%s", m.Encoding, strings.ReplaceAll(m.hash().String(), "-", ""))
	if m.Prefix != "" {
		want = fmt.Sprintf("%q followed by %s", m.Prefix, want)
	}
	return nil, fmt.Errorf("%w: %s is not %s", ErrInvalidSignature, m.Header, want)
}

// decode reads one signature, Prefix included; nil when it cannot.
func (m *BodyMAC) decode(field string) []byte {
	enc, ok := strings.CutPrefix(field, m.Prefix)
	if !ok {
		return nil
	}
	sig, err := m.Encoding.decode(enc)
	if err != nil || len(sig) != m.hash().Size() || m.Strict && m.Encoding.encode(sig) != enc {
		return nil
	}
	return sig
}

func (m *BodyMAC) hash() crypto.Hash {
	if m.Hash == 0 {
		return crypto.SHA256
	}
	return m.Hash
}

// HMAC returns the HMAC, with hash function h, of msg's parts written in
// order, under key.
func HMAC(h crypto.Hash, key []byte, msg ...[]byte) []byte {
	mac := hmac.New(h.New, key)
	for _, part := range msg {
		mac.Write(part)
	}
	return mac.Sum(nil)
}

// MatchHMAC reports whether one of sigs is the HMAC, with hash function h, of
// msg's parts under one of keys. Every key is tried against every signature
// until one matches, each comparison in constant time (hmac.Equal); the
// answer does not say which key matched.
func MatchHMAC(h crypto.Hash, keys, sigs [][]byte, msg ...[]byte) bool {
	for _, key := range keys {
		want := HMAC(h, key, msg...)
		for _, sig := range sigs {
			if hmac.Equal(want, sig) {
				return true
			}
		}
	}
	return false
}

// SecretKeys returns secrets as HMAC keys: the UTF-8 bytes of each, in order.
func SecretKeys(secrets []string) [][]byte {
	keys := make([][]byte, len(secrets))
	for i, s := range secrets {
		keys[i] = []byte(s)
	}
	return keys
}
