// Package appstore verifies Apple App Store Server Notifications V2. Apple
// POSTs a JSON body
//
//	{"signedPayload": "<compact JWS>"}
//
// whose JWS is signed with ES256 by an Apple key. Its header carries `x5c`,
// the certificate chain of that key (leaf, intermediate, root, base64 DER).
// The adapter verifies it offline, as Apple's own App Store Server Library
// does (@apple/app-store-server-library, SignedDataVerifier with online
// checks off; see VerifyChain):
//
//   - x5c holds exactly three certificates; the intermediate (x5c[1]) is
//     issued by a trusted root, the leaf (x5c[0]) by the intermediate; the
//     third entry is not used (trust comes from the adapter's roots, never
//     from the request);
//   - the trusted roots are Apple Root CA - G3 (AppleRootCAG3PEM, embedded)
//     and those of `appstore.root_certs`;
//   - the leaf carries Apple's marker extension 1.2.840.113635.100.6.11.1,
//     the intermediate 1.2.840.113635.100.6.2.1;
//   - the three certificates are valid at the notification's signedDate
//     (within 60 s), the date Apple's library uses when online checks are
//     off (now, when the payload has none);
//   - the JWS signature (alg ES256 only) verifies with the leaf's key;
//   - the notification is for the source's app: its bundleId equals
//     `appstore.bundle_id`, its environment equals `appstore.environment`
//     and, in Production, its appAppleId equals `appstore.app_apple_id`.
//
// Revocation (OCSP) is not checked: hookline makes no network call to verify
// a delivery. Apple's library makes OCSP optional (enableOnlineChecks).
//
// Whom a notification is for is read from its `data`, `summary`,
// `externalPurchaseToken` or `appData` object, the first present, as in
// Apple's library (an externalPurchaseToken's environment is Sandbox when
// its externalPurchaseId starts with "SANDBOX"). The signedTransactionInfo,
// signedRenewalInfo and signedAppTransactionInfo inside are JWSs too; the
// adapter does not verify them separately, but they are strings inside the
// signed payload, so the outer signature covers them byte for byte.
//
// Everything is bounded before any signature is checked: the body's JSON
// depth, the JWS (MaxJWSBytes), its header and x5c (ChainLength entries of
// at most MaxCertBytes each), the payload's JSON depth. Objects with a key
// twice are refused.
//
// The event id is notificationUUID (signed; Apple keeps it on every retry),
// the type notificationType, or notificationType.subtype when the
// notification has a subtype (SUBSCRIBED.INITIAL_BUY), the time signedDate.
// No tolerance applies by default (Apple retries for days); a source that
// sets `tolerance` has signedDate checked against it (both directions).
//
// The source's `secrets` are not used (Apple signs with its own key): a
// source listing any is refused. The adapter cannot sign; package
// appstoretest signs notifications with a test chain.
package appstore

import (
	"crypto/ecdsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"os"
	"strings"
	"time"

	"github.com/hookline/hookline/providers"
)

// Name is the adapter's registered name.
const Name = "appstore"

// Environments a source can accept, as the notification's environment
// spells them.
const (
	EnvironmentProduction = "Production"
	EnvironmentSandbox    = "Sandbox"
)

// DefaultEventID describes the default event id (see
// providers.Description.DefaultEventID): notificationUUID, read from the
// JWS payload, which no key resolver reaches.
const DefaultEventID = "{notificationUUID} (the JWS payload in json:signedPayload)"

const (
	// maxRootFileBytes bounds a root_certs file.
	maxRootFileBytes = 1 << 20
	// maxAppAppleID is the largest app Apple ID accepted: 2^53-1, beyond
	// which JavaScript (Apple's library) cannot compare it exactly.
	maxAppAppleID = 1<<53 - 1
)

func init() {
	providers.Register(Name, func(cfg providers.Config) (providers.Provider, error) { return New(cfg) })
}

// Settings is the `appstore:` block of a source.
type Settings struct {
	// BundleID is the app's bundle identifier. Required.
	BundleID string `yaml:"bundle_id"`
	// Environment is the one environment the source accepts: Production
	// (the default) or Sandbox.
	Environment string `yaml:"environment"`
	// AppAppleID is the app's Apple ID (App Store Connect, App
	// Information). Required in Production; not checked in Sandbox, where
	// Apple omits it.
	AppAppleID int64 `yaml:"app_apple_id"`
	// RootCerts are roots trusted besides Apple Root CA - G3: each a path
	// to a PEM or DER file, or inline PEM.
	RootCerts []string `yaml:"root_certs"`
}

// Verifier is the App Store adapter.
type Verifier struct {
	bundleID    string
	environment string
	appAppleID  int64 // Production only
	roots       []*x509.Certificate
	tolerance   time.Duration // zero: signedDate is not checked against the clock
	now         func() time.Time
}

// New returns an App Store adapter for cfg.
func New(cfg providers.Config) (*Verifier, error) {
	if len(cfg.Secrets) > 0 {
		return nil, fmt.Errorf("secrets: appstore takes none (Apple signs with its own key; set appstore.bundle_id and appstore.app_apple_id)")
	}
	var s Settings
	if err := cfg.Decode(&s); err != nil {
		return nil, fmt.Errorf("appstore: %w", err)
	}
	v := &Verifier{bundleID: s.BundleID, tolerance: cfg.Tolerance, now: cfg.NowFunc(), roots: []*x509.Certificate{AppleRootCAG3()}}
	if strings.TrimSpace(s.BundleID) == "" {
		return nil, fmt.Errorf("appstore.bundle_id: required (the app's bundle identifier, e.g. com.example.app)")
	}
	if strings.TrimSpace(s.BundleID) != s.BundleID {
		return nil, fmt.Errorf("appstore.bundle_id: %q has surrounding spaces", s.BundleID)
	}
	switch {
	case s.Environment == "" || strings.EqualFold(s.Environment, EnvironmentProduction):
		v.environment = EnvironmentProduction
	case strings.EqualFold(s.Environment, EnvironmentSandbox):
		v.environment = EnvironmentSandbox
	default:
		return nil, fmt.Errorf("appstore.environment: %q: want Production or Sandbox (one source per environment)", s.Environment)
	}
	if s.AppAppleID < 0 || s.AppAppleID > maxAppAppleID {
		return nil, fmt.Errorf("appstore.app_apple_id: want the app's Apple ID, a positive number")
	}
	if v.environment == EnvironmentProduction {
		if s.AppAppleID == 0 {
			return nil, fmt.Errorf("appstore.app_apple_id: required in Production (the app's Apple ID, App Store Connect → App Information)")
		}
		v.appAppleID = s.AppAppleID
	}
	for i, entry := range s.RootCerts {
		certs, err := loadRoots(entry)
		if err != nil {
			return nil, fmt.Errorf("appstore.root_certs[%d]: %w", i, err)
		}
		v.roots = append(v.roots, certs...)
	}
	return v, nil
}

// loadRoots reads one root_certs entry: inline PEM, or the path of a PEM
// or DER file. Every certificate must be a CA.
func loadRoots(entry string) ([]*x509.Certificate, error) {
	raw := []byte(entry)
	inline := strings.Contains(entry, "-----BEGIN")
	if !inline {
		info, err := os.Stat(entry)
		if err != nil {
			return nil, fmt.Errorf("want inline PEM or a readable file: %w", err)
		}
		if info.Size() > maxRootFileBytes {
			return nil, fmt.Errorf("%s is over %d bytes", entry, maxRootFileBytes)
		}
		if raw, err = os.ReadFile(entry); err != nil {
			return nil, err
		}
	}
	var certs []*x509.Certificate
	rest := raw
	for {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			break
		}
		if block.Type != "CERTIFICATE" {
			return nil, fmt.Errorf("a %s PEM block: want CERTIFICATE blocks only", block.Type)
		}
		c, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("unparseable certificate: %w", err)
		}
		certs = append(certs, c)
	}
	if len(certs) == 0 && !inline {
		c, err := x509.ParseCertificate(raw) // a DER file, as Apple publishes its roots
		if err != nil {
			return nil, fmt.Errorf("no PEM certificate and not a DER certificate")
		}
		certs = append(certs, c)
	}
	if len(certs) == 0 {
		return nil, fmt.Errorf("no certificate in the PEM text")
	}
	for _, c := range certs {
		if !c.BasicConstraintsValid || !c.IsCA {
			return nil, fmt.Errorf("%q is not a CA certificate", c.Subject.CommonName)
		}
	}
	return certs, nil
}

// Environment is the environment the adapter accepts.
func (v *Verifier) Environment() string { return v.environment }

// SignedPayload reads the body: one JSON object (nesting at most
// providers.MaxJSONDepth, no key twice) whose signedPayload is a string.
// ok is false when the body carries no signedPayload (not such an object,
// or the member absent or null); err is set when it carries one that is
// not a non-empty string, or for a body nesting too deep
// (providers.ErrTooDeep).
func SignedPayload(body []byte) (jws string, ok bool, err error) {
	if err := providers.CheckJSONDepth(body); err != nil {
		return "", false, err
	}
	m, perr := parseObject(body)
	if perr != nil {
		return "", false, nil
	}
	raw, present := m["signedPayload"]
	if !present || string(raw) == "null" {
		return "", false, nil
	}
	if kindOf(raw) != kString || json.Unmarshal(raw, &jws) != nil || jws == "" {
		return "", true, parseErr("signedPayload is not a non-empty string")
	}
	return jws, true, nil
}

// invalid wraps err (from the parsers or VerifyChain) as an invalid
// signature, unless it is providers.ErrTooDeep (a 400).
func invalid(err error) error {
	if errors.Is(err, providers.ErrTooDeep) {
		return err
	}
	return fmt.Errorf("%w: %w", providers.ErrInvalidSignature, err)
}

// Verify implements providers.Verifier.
func (v *Verifier) Verify(r *providers.Request) error {
	s, ok, err := SignedPayload(r.Body)
	if err != nil {
		return invalid(err)
	}
	if !ok {
		return fmt.Errorf("%w: the body is not an App Store Server Notification V2 ({\"signedPayload\": …})", providers.ErrNoSignature)
	}
	n, err := v.verifyJWS(s)
	if err != nil {
		return err
	}
	if err := v.checkApp(n.App); err != nil {
		return err
	}
	if v.tolerance > 0 {
		if !n.HasSignedDate {
			return fmt.Errorf("%w: the notification has no signedDate (tolerance %s)", providers.ErrInvalidSignature, v.tolerance)
		}
		if err := providers.CheckTimestamp(time.UnixMilli(n.SignedDate), v.now(), v.tolerance); err != nil {
			return fmt.Errorf("%w: signedDate (tolerance %s)", err, v.tolerance)
		}
	}
	return nil
}

// verifyJWS verifies the compact JWS s (chain, signature, JWT time claims)
// and returns its notification.
func (v *Verifier) verifyJWS(s string) (*Notification, error) {
	jws, err := ParseJWS(s)
	if err != nil {
		return nil, invalid(err)
	}
	n, err := ParseNotification(jws.Payload)
	if err != nil {
		return nil, invalid(err)
	}
	leaf, err := ParseCert(jws.X5C[0], 0)
	if err != nil {
		return nil, invalid(err)
	}
	intermediate, err := ParseCert(jws.X5C[1], 1)
	if err != nil {
		return nil, invalid(err)
	}
	at := v.now()
	if n.HasSignedDate {
		at = time.UnixMilli(n.SignedDate)
	}
	pub, err := VerifyChain(v.roots, leaf, intermediate, at)
	if err != nil {
		return nil, invalid(err)
	}
	digest := sha256.Sum256([]byte(jws.SigningInput))
	rr, ss := new(big.Int).SetBytes(jws.Signature[:32]), new(big.Int).SetBytes(jws.Signature[32:])
	if !ecdsa.Verify(pub, digest[:], rr, ss) {
		return nil, fmt.Errorf("%w: the JWS signature does not match the leaf's key", providers.ErrInvalidSignature)
	}
	// The JWT time claims, as the library's JWT verifier (jsonwebtoken)
	// checks them against the clock; Apple sets neither.
	now := float64(v.now().Unix())
	if n.nbf != nil && *n.nbf > now {
		return nil, fmt.Errorf("%w: the JWS is not valid yet (nbf)", providers.ErrInvalidSignature)
	}
	if n.exp != nil && now >= *n.exp {
		return nil, fmt.Errorf("%w: the JWS has expired (exp)", providers.ErrInvalidSignature)
	}
	return n, nil
}

// checkApp checks that a verified notification is for the source's app and
// environment, as the library's verifyNotification does.
func (v *Verifier) checkApp(app App) error {
	if !app.HasBundleID || app.BundleID != v.bundleID {
		return fmt.Errorf("%w: the notification's bundleId is not appstore.bundle_id (a notification for another app)", providers.ErrInvalidSignature)
	}
	if v.environment == EnvironmentProduction && (!app.HasAppAppleID || app.AppAppleID != float64(v.appAppleID)) {
		return fmt.Errorf("%w: the notification's appAppleId is not appstore.app_apple_id (a notification for another app)", providers.ErrInvalidSignature)
	}
	if app.Environment != v.environment {
		return fmt.Errorf("%w: the notification's environment is not %s (appstore.environment)", providers.ErrInvalidSignature, v.environment)
	}
	return nil
}

// Resolve implements providers.Resolver: notificationUUID,
// notificationType[.subtype] and signedDate, read from the JWS payload.
func (v *Verifier) Resolve(r *providers.Request) (providers.Event, error) {
	malformed := func(err error) (providers.Event, error) {
		if errors.Is(err, providers.ErrTooDeep) {
			return providers.Event{}, err
		}
		return providers.Event{}, fmt.Errorf("%w: %w", providers.ErrMalformed, err)
	}
	s, ok, err := SignedPayload(r.Body)
	if err != nil {
		return malformed(err)
	}
	if !ok {
		return malformed(errors.New("the body has no signedPayload"))
	}
	payload, err := PayloadOf(s)
	if err != nil {
		return malformed(err)
	}
	n, err := ParseNotification(payload)
	if err != nil {
		return malformed(err)
	}
	if strings.TrimSpace(n.NotificationUUID) == "" {
		return providers.Event{}, fmt.Errorf("%w: the notification has no notificationUUID", providers.ErrNoEventID)
	}
	ev := providers.Event{ID: n.NotificationUUID, Type: n.Type()}
	if n.HasSignedDate {
		ev.Time = time.UnixMilli(n.SignedDate).UTC()
	}
	return ev, nil
}

// Describe implements providers.Describer. The signature lives in the body;
// notificationUUID is part of the signed payload. The adapter cannot sign:
// only Apple holds the key.
func (v *Verifier) Describe() providers.Description {
	return providers.Description{DefaultEventID: DefaultEventID, IDSigned: true}
}
