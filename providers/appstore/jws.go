package appstore

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/hookline/hookline/providers"
)

// Bounds on what is read before any signature is checked.
const (
	// MaxJWSBytes bounds signedPayload. Apple's are about 10 to 30 KB: the
	// header carries three certificates, and the payload signedTransactionInfo
	// and signedRenewalInfo, each a JWS with three certificates of its own.
	MaxJWSBytes = 128 << 10
	// MaxCertBytes bounds each certificate of x5c, in DER (Apple's leaf is
	// about 1.1 KB, its intermediate 0.8 KB).
	MaxCertBytes = 4 << 10
	// ChainLength is the number of certificates x5c must hold: the leaf, the
	// intermediate and the root, as Apple's library requires
	// (INVALID_CHAIN_LENGTH otherwise).
	ChainLength = 3
	// maxCertBase64 is the longest base64 text of a MaxCertBytes certificate.
	maxCertBase64 = (MaxCertBytes + 2) / 3 * 4
	// maxHeaderBytes bounds the decoded JWS header: three certificates and
	// a few short members.
	maxHeaderBytes = ChainLength*(maxCertBase64+8) + 1024
)

// Alg is the only JWS algorithm accepted: ECDSA P-256 with SHA-256, what
// Apple signs with.
const Alg = "ES256"

// JWS is a parsed, not yet verified, compact JWS of App Store signed data.
type JWS struct {
	// X5C is the header's certificate chain as sent: ChainLength base64 DER
	// certificates, leaf first. Only the first two are used: the chain must
	// end at a trusted root of the adapter's, whatever the third is.
	X5C []string
	// SigningInput is "<header>.<payload>" as received.
	SigningInput string
	// Payload is the decoded payload (JSON).
	Payload []byte
	// Signature is the ES256 signature, r||s (64 bytes).
	Signature []byte
}

// errParse marks what the parsers refuse; callers wrap it in the sentinel
// their caller expects (ErrInvalidSignature in Verify, ErrMalformed in
// Resolve). Its messages never quote the input.
var errParse = errors.New("appstore")

func parseErr(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{errParse}, args...)...)
}

// segments splits a compact JWS into its three base64url parts, checking
// its length and alphabet: header and payload non-empty, no padding, no
// other character (the JWS regular expression of Apple's library's jws).
func segments(s string) (h64, p64, s64 string, err error) {
	if len(s) > MaxJWSBytes {
		return "", "", "", parseErr("signedPayload is over %d bytes", MaxJWSBytes)
	}
	parts := strings.Split(s, ".")
	if len(parts) != 3 {
		return "", "", "", parseErr("signedPayload is not a compact JWS (three dot-separated parts)")
	}
	for _, p := range parts {
		for i := 0; i < len(p); i++ {
			c := p[i]
			if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_') {
				return "", "", "", parseErr("signedPayload is not base64url")
			}
		}
	}
	if parts[0] == "" || parts[1] == "" {
		return "", "", "", parseErr("signedPayload has an empty header or payload")
	}
	return parts[0], parts[1], parts[2], nil
}

// decodeSegment decodes one base64url part of at most max decoded bytes.
func decodeSegment(seg, what string, max int) ([]byte, error) {
	if base64.RawURLEncoding.DecodedLen(len(seg)) > max {
		return nil, parseErr("the JWS %s is over %d bytes", what, max)
	}
	b, err := base64.RawURLEncoding.DecodeString(seg)
	if err != nil {
		return nil, parseErr("the JWS %s is not base64url", what)
	}
	return b, nil
}

// PayloadOf decodes the payload of the compact JWS s without verifying
// anything: what Resolve reads. It checks the JWS's shape and size first.
func PayloadOf(s string) ([]byte, error) {
	_, p64, _, err := segments(s)
	if err != nil {
		return nil, err
	}
	return decodeSegment(p64, "payload", MaxJWSBytes)
}

// ParseJWS parses the compact JWS s: at most MaxJWSBytes; a header that is
// one JSON object with alg ES256 and an x5c of exactly ChainLength base64
// strings, each at most the base64 of MaxCertBytes; a payload of at most
// MaxJWSBytes nesting at most providers.MaxJSONDepth; a 64-byte signature.
// Nothing is verified. Errors are returned as they are for a header or
// payload nesting too deep (providers.ErrTooDeep); the others never quote
// s.
func ParseJWS(s string) (*JWS, error) {
	h64, p64, s64, err := segments(s)
	if err != nil {
		return nil, err
	}
	hdrJSON, err := decodeSegment(h64, "header", maxHeaderBytes)
	if err != nil {
		return nil, err
	}
	if err := providers.CheckJSONDepth(hdrJSON); err != nil {
		return nil, err
	}
	hdr, err := parseObject(hdrJSON)
	if err != nil {
		return nil, parseErr("the JWS header is not a JSON object (%v)", err)
	}
	x5c, err := checkHeader(hdr)
	if err != nil {
		return nil, err
	}
	payload, err := decodeSegment(p64, "payload", MaxJWSBytes)
	if err != nil {
		return nil, err
	}
	if err := providers.CheckJSONDepth(payload); err != nil {
		return nil, err
	}
	sig, err := decodeSegment(s64, "signature", 64)
	if err != nil || len(sig) != 64 {
		return nil, parseErr("the JWS signature is not an ES256 signature (64 bytes)")
	}
	return &JWS{X5C: x5c, SigningInput: h64 + "." + p64, Payload: payload, Signature: sig}, nil
}

// checkHeader checks the header's alg and x5c and returns x5c.
func checkHeader(hdr map[string]json.RawMessage) ([]string, error) {
	var alg string
	if raw, ok := hdr["alg"]; !ok || json.Unmarshal(raw, &alg) != nil || alg != Alg {
		return nil, parseErr("the JWS header's alg must be %s", Alg)
	}
	raw, ok := hdr["x5c"]
	if !ok {
		return nil, parseErr("the JWS header has no x5c certificate chain")
	}
	var items []json.RawMessage
	if err := json.Unmarshal(raw, &items); err != nil {
		return nil, parseErr("the JWS header's x5c is not an array")
	}
	if len(items) != ChainLength {
		return nil, parseErr("the JWS header's x5c holds %d certificates, not %d (leaf, intermediate, root)", len(items), ChainLength)
	}
	x5c := make([]string, len(items))
	for i, it := range items {
		if len(it) > maxCertBase64+2 || json.Unmarshal(it, &x5c[i]) != nil || len(x5c[i]) > maxCertBase64 {
			return nil, parseErr("x5c[%d] is not the base64 of a certificate of at most %d bytes", i, MaxCertBytes)
		}
	}
	return x5c, nil
}

// parseObject reads one JSON object: valid UTF-8, no key twice (two readers
// could see two values), nothing after it. It returns its members, undecoded.
// The caller bounds the nesting first (providers.CheckJSONDepth).
func parseObject(b []byte) (map[string]json.RawMessage, error) {
	if !utf8.Valid(b) {
		return nil, errors.New("not valid UTF-8")
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, errors.New("not a JSON object")
	}
	m := map[string]json.RawMessage{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, errors.New("not a JSON object")
		}
		key, _ := tok.(string)
		if _, dup := m[key]; dup {
			return nil, fmt.Errorf("key %q appears twice", truncate(key))
		}
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, errors.New("not a JSON object")
		}
		m[key] = raw
	}
	if tok, err := dec.Token(); err != nil || tok != json.Delim('}') {
		return nil, errors.New("not a JSON object")
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, errors.New("data after the JSON object")
	}
	return m, nil
}

// truncate keeps an error's quote of a key short.
func truncate(s string) string {
	if len(s) > 64 {
		return s[:64] + "…"
	}
	return s
}

// Notification is what the adapter reads of a decoded App Store Server
// Notification V2 (responseBodyV2DecodedPayload).
type Notification struct {
	NotificationType string
	Subtype          string
	NotificationUUID string
	Version          string
	// SignedDate is when Apple signed the notification, in Unix
	// milliseconds; HasSignedDate reports whether the payload carries it.
	SignedDate    int64
	HasSignedDate bool
	// App is whom the notification is for.
	App App

	// exp and nbf are JWT claims (Unix seconds), nil when absent; Apple
	// sets neither, but its library's JWT verifier checks them.
	exp, nbf *float64
}

// App is whom a notification is for: read from its data, summary,
// externalPurchaseToken or appData object, the first present, as Apple's
// library reads it.
type App struct {
	// From names the object read ("data", …); "" when the payload has none.
	From        string
	BundleID    string
	HasBundleID bool
	// AppAppleID is the app's Apple ID (a JSON number); HasAppAppleID
	// reports whether it is present (Apple omits it in the sandbox).
	AppAppleID    float64
	HasAppAppleID bool
	// Environment is "Production" or "Sandbox" (an externalPurchaseToken's
	// is Sandbox when its externalPurchaseId starts with "SANDBOX", else
	// Production, as in Apple's library).
	Environment string
}

// Member kinds of the payload's objects, as Apple's library's validators
// type them; a member of another type (null included) makes the
// notification invalid.
const (
	kString = 's'
	kNumber = 'n'
	kObject = 'o'
)

// payloadKinds types the decoded payload's members; appObjects the members
// of the objects that say whom a notification is for, in the order they
// are read.
var (
	payloadKinds = map[string]byte{
		"notificationType": kString, "subtype": kString, "notificationUUID": kString, "version": kString,
		"signedDate": kNumber, "data": kObject, "summary": kObject, "externalPurchaseToken": kObject, "appData": kObject,
	}
	appObjects = []struct {
		name  string
		kinds map[string]byte
	}{
		{"data", map[string]byte{"environment": kString, "appAppleId": kNumber, "bundleId": kString, "bundleVersion": kString,
			"signedTransactionInfo": kString, "signedRenewalInfo": kString, "status": kNumber, "consumptionRequestReason": kString}},
		{"summary", map[string]byte{"environment": kString, "appAppleId": kNumber, "bundleId": kString, "productId": kString,
			"requestIdentifier": kString, "succeededCount": kNumber, "failedCount": kNumber}},
		{"externalPurchaseToken", map[string]byte{"externalPurchaseId": kString, "tokenCreationDate": kNumber,
			"appAppleId": kNumber, "bundleId": kString}},
		{"appData", map[string]byte{"appAppleId": kNumber, "bundleId": kString, "environment": kString,
			"signedAppTransactionInfo": kString}},
	}
)

// kindOf reports the kind of a JSON value from its first byte.
func kindOf(raw json.RawMessage) byte {
	if len(raw) == 0 {
		return 0
	}
	switch c := raw[0]; {
	case c == '"':
		return kString
	case c == '{':
		return kObject
	case c == '-' || '0' <= c && c <= '9':
		return kNumber
	}
	return 0
}

// checkKinds checks that each member of m named in kinds has its kind.
func checkKinds(m map[string]json.RawMessage, kinds map[string]byte, where string) error {
	for k, want := range kinds {
		if raw, ok := m[k]; ok && kindOf(raw) != want {
			return fmt.Errorf("%s%s has the wrong type", where, k)
		}
	}
	return nil
}

func str(raw json.RawMessage) string {
	var s string
	_ = json.Unmarshal(raw, &s)
	return s
}

// finite parses a JSON number as a float64, as JavaScript reads it; ok is
// false when it overflows.
func finite(raw json.RawMessage) (float64, bool) {
	f, err := strconv.ParseFloat(string(raw), 64)
	return f, err == nil && !math.IsInf(f, 0)
}

// maxDateMillis is the range of a JavaScript Date, in milliseconds.
const maxDateMillis = 8.64e15

// ParseNotification reads a decoded notification payload: one JSON object,
// valid UTF-8, no key twice (at any level read), nesting at most
// providers.MaxJSONDepth; its members typed as Apple's library's validators
// type them (strings, numbers, objects; null is none of them); signedDate,
// when present, a whole number of milliseconds within a JavaScript Date's
// range; exp and nbf, when present, numbers. Errors never quote the
// payload, and wrap providers.ErrTooDeep for one nesting too deep.
func ParseNotification(payload []byte) (*Notification, error) {
	if err := providers.CheckJSONDepth(payload); err != nil {
		return nil, err
	}
	m, err := parseObject(payload)
	if err != nil {
		return nil, parseErr("the JWS payload is not a JSON object (%v)", err)
	}
	if err := checkKinds(m, payloadKinds, ""); err != nil {
		return nil, parseErr("the notification's %v", err)
	}
	n := &Notification{
		NotificationType: str(m["notificationType"]), Subtype: str(m["subtype"]),
		NotificationUUID: str(m["notificationUUID"]), Version: str(m["version"]),
	}
	if raw, ok := m["signedDate"]; ok {
		f, ok := finite(raw)
		if !ok || f != math.Trunc(f) || math.Abs(f) > maxDateMillis {
			return nil, parseErr("the notification's signedDate is not a date in milliseconds")
		}
		n.SignedDate, n.HasSignedDate = int64(f), true
	}
	for _, claim := range []struct {
		name string
		dst  **float64
	}{{"exp", &n.exp}, {"nbf", &n.nbf}} {
		if raw, ok := m[claim.name]; ok {
			f, ok := finite(raw)
			if kindOf(raw) != kNumber || !ok {
				return nil, parseErr("the notification's %s is not a number", claim.name)
			}
			*claim.dst = &f
		}
	}
	if n.App, err = readApp(m); err != nil {
		return nil, err
	}
	return n, nil
}

// readApp reads whom the notification is for from the first of its app
// objects present, and checks the types of every one present.
func readApp(m map[string]json.RawMessage) (App, error) {
	var app App
	for _, o := range appObjects {
		raw, ok := m[o.name]
		if !ok {
			continue
		}
		obj, err := parseObject(raw)
		if err != nil {
			return App{}, parseErr("the notification's %s is not a JSON object (%v)", o.name, err)
		}
		if err := checkKinds(obj, o.kinds, o.name+"."); err != nil {
			return App{}, parseErr("the notification's %v", err)
		}
		if app.From != "" {
			continue
		}
		app.From = o.name
		if b, ok := obj["bundleId"]; ok {
			app.BundleID, app.HasBundleID = str(b), true
		}
		if id, ok := obj["appAppleId"]; ok {
			if app.AppAppleID, app.HasAppAppleID = finite(id); !app.HasAppAppleID {
				return App{}, parseErr("the notification's %s.appAppleId is not a number", o.name)
			}
		}
		app.Environment = str(obj["environment"])
		if o.name == "externalPurchaseToken" {
			app.Environment = EnvironmentProduction
			if strings.HasPrefix(str(obj["externalPurchaseId"]), "SANDBOX") {
				app.Environment = EnvironmentSandbox
			}
		}
	}
	return app, nil
}

// Type is the notification's event type: notificationType, or
// "notificationType.subtype" when it has a subtype (DID_CHANGE_RENEWAL_STATUS.AUTO_RENEW_DISABLED).
func (n *Notification) Type() string {
	if n.Subtype == "" {
		return n.NotificationType
	}
	return n.NotificationType + "." + n.Subtype
}
