// Package paypal verifies PayPal REST webhooks offline. PayPal signs with its
// own RSA key, not a shared secret: the headers are
//
//	PAYPAL-TRANSMISSION-ID    transmission id
//	PAYPAL-TRANSMISSION-TIME  RFC 3339 time of the transmission
//	PAYPAL-TRANSMISSION-SIG   base64 RSA PKCS#1 v1.5 SHA-256 signature
//	PAYPAL-CERT-URL           where PayPal's X.509 signing certificate is
//	PAYPAL-AUTH-ALGO          SHA256withRSA (the only algorithm accepted)
//
// and the signed string is `<transmission id>|<transmission time>|<webhook
// id>|<CRC-32 (IEEE) of the raw body, unsigned decimal>`. The webhook id is
// the id of the webhook in PayPal's developer dashboard, so a signature made
// for another webhook does not verify here: `paypal: {webhook_id: …}` is
// required. PayPal has no shared secret: the source's `secrets` are not used.
//
// The certificate is fetched from PAYPAL-CERT-URL only when the URL is https
// and its host is one of `paypal.cert_hosts` (default api.paypal.com,
// api.sandbox.paypal.com, api-m.paypal.com, api-m.sandbox.paypal.com; an
// entry with a port must match host:port exactly, one without a port allows
// the default https port). Plain http is allowed only for a loopback host
// listed in cert_hosts, for tests. Trust rests on that https fetch from a
// PayPal host; the certificate chain itself is not validated, but the
// certificate must be current and hold an RSA key. Redirects are not
// followed, and a PAYPAL-CERT-URL over 2048 bytes is not allowed.
//
// The delivery is not authenticated until the certificate is known, so the
// fetches it can cause are bounded (see package keyfetch):
//
//   - certificates are cached by URL (at most 64) until their NotAfter; one
//     not yet valid is cached too and refused until its NotBefore; one past
//     its NotAfter is refused and not kept, so a renewed certificate at the
//     same URL is picked up by the next delivery (within the rate limit);
//   - an answer that a URL holds no usable certificate (a 404 or any other
//     non-2xx answer but 408, 429 and 5xx, a redirect, a body over 64 KiB, no
//     readable certificate, a key that is not RSA) is remembered for 2
//     minutes (at most 1024 URLs): naming that URL again costs no fetch;
//   - concurrent deliveries naming the same uncached URL share one fetch;
//   - the adapter makes at most 10 fetches a second (bursts of 20); a fetch
//     whose turn is more than a second away is not made.
//
// A fetch that cannot be made or answered (the rate limit, a connection
// error, a timeout, a 408, 429 or 5xx answer) is providers.ErrUnavailable
// (503): nothing is known about the delivery, and PayPal retries. Such
// failures are not remembered. A URL that is not allowed, the answers above
// and a certificate that is not current are invalid signatures.
//
// PAYPAL-TRANSMISSION-TIME must be within the tolerance (default 5 minutes,
// both directions). PayPal's docs set no limit; every delivery attempt is its
// own transmission (new id and time, listed separately in the webhook event's
// transmissions), so retries stay fresh. Note that CRC-32 is not a
// cryptographic hash: the body is bound to the signature only as strongly as
// PayPal's scheme allows, and the tolerance limits how long a captured
// signature can be reused.
//
// The event id is the body's `id` (WH-…), the type `event_type`, the time
// `create_time`.
package paypal

import (
	"crypto"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"hash/crc32"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/hookline/hookline/providers"
	"github.com/hookline/hookline/providers/keyfetch"
)

// Name is the adapter's registered name.
const Name = "paypal"

// Headers of a delivery.
const (
	HeaderTransmissionID   = "Paypal-Transmission-Id"
	HeaderTransmissionTime = "Paypal-Transmission-Time"
	HeaderTransmissionSig  = "Paypal-Transmission-Sig"
	HeaderCertURL          = "Paypal-Cert-Url"
	HeaderAuthAlgo         = "Paypal-Auth-Algo"
)

// AuthAlgo is the only PAYPAL-AUTH-ALGO accepted.
const AuthAlgo = "SHA256withRSA"

// DefaultTolerance bounds the age of PAYPAL-TRANSMISSION-TIME.
const DefaultTolerance = 5 * time.Minute

// DefaultCertHosts are the hosts certificates may be fetched from.
var DefaultCertHosts = []string{"api.paypal.com", "api.sandbox.paypal.com", "api-m.paypal.com", "api-m.sandbox.paypal.com"}

const (
	// maxCertURLBytes bounds PAYPAL-CERT-URL (PayPal's are about 100 bytes),
	// and so the memory a remembered answer about a URL takes.
	maxCertURLBytes = 2048
)

func init() {
	providers.Register(Name, func(cfg providers.Config) (providers.Provider, error) { return New(cfg) })
}

// Settings is the `paypal:` block of a source.
type Settings struct {
	// WebhookID is the webhook's id in PayPal's developer dashboard. Required.
	WebhookID string `yaml:"webhook_id"`
	// CertHosts are the hosts (host or host:port) PAYPAL-CERT-URL may point
	// to. Default DefaultCertHosts.
	CertHosts []string `yaml:"cert_hosts"`
}

// Verifier is the PayPal adapter.
type Verifier struct {
	webhookID string
	hosts     map[string]bool // lowercased host or host:port
	tolerance time.Duration
	now       func() time.Time
	certs     *keyfetch.Certs // the certificates deliveries name, fetched within bounds
}

// New returns a PayPal adapter for cfg.
func New(cfg providers.Config) (*Verifier, error) {
	if len(cfg.Secrets) > 0 {
		return nil, fmt.Errorf("secrets: paypal takes none (PayPal signs with its own certificate; set paypal.webhook_id)")
	}
	var s Settings
	if err := cfg.Decode(&s); err != nil {
		return nil, fmt.Errorf("paypal: %w", err)
	}
	if strings.TrimSpace(s.WebhookID) == "" {
		return nil, fmt.Errorf("paypal.webhook_id: required (the webhook's id in PayPal's developer dashboard)")
	}
	if strings.Contains(s.WebhookID, "|") {
		return nil, fmt.Errorf("paypal.webhook_id: must not contain '|'")
	}
	hosts := s.CertHosts
	if hosts == nil {
		hosts = DefaultCertHosts
	}
	if len(hosts) == 0 {
		return nil, fmt.Errorf("paypal.cert_hosts: at least one host is required")
	}
	v := &Verifier{
		webhookID: strings.TrimSpace(s.WebhookID),
		tolerance: cfg.Tolerance,
		now:       cfg.NowFunc(),
	}
	hostSet, err := keyfetch.HostSet("paypal.cert_hosts", hosts)
	if err != nil {
		return nil, err
	}
	v.hosts = hostSet
	if v.tolerance == 0 {
		v.tolerance = DefaultTolerance
	}
	v.certs = keyfetch.NewCerts(keyfetch.CertsOptions{Name: "PayPal's", Client: cfg.HTTPClient, Now: v.now})
	return v, nil
}

// CertURLAllowed reports whether PAYPAL-CERT-URL value raw may be fetched.
func (v *Verifier) CertURLAllowed(raw string) (*url.URL, bool) {
	if len(raw) > maxCertURLBytes {
		return nil, false
	}
	u, err := url.Parse(raw)
	if err != nil || u.User != nil || u.Host == "" || u.Opaque != "" {
		return nil, false
	}
	host, port := strings.ToLower(u.Hostname()), u.Port()
	switch u.Scheme {
	case "https":
	case "http":
		if !keyfetch.IsLoopback(host) {
			return nil, false
		}
	default:
		return nil, false
	}
	if port != "" && v.hosts[net.JoinHostPort(host, port)] {
		return u, true
	}
	if v.hosts[host] && (port == "" || (port == "443" && u.Scheme == "https")) {
		return u, true
	}
	return nil, false
}

// SignedString is the string PayPal signs for a delivery.
func SignedString(transmissionID, transmissionTime, webhookID string, body []byte) string {
	return transmissionID + "|" + transmissionTime + "|" + webhookID + "|" + strconv.FormatUint(uint64(crc32.ChecksumIEEE(body)), 10)
}

// Verify implements providers.Verifier.
func (v *Verifier) Verify(r *providers.Request) error {
	h := map[string]string{}
	for _, name := range []string{HeaderTransmissionID, HeaderTransmissionTime, HeaderTransmissionSig, HeaderCertURL, HeaderAuthAlgo} {
		val := strings.TrimSpace(r.Header.Get(name))
		if val == "" {
			return fmt.Errorf("%w: %s header is required", providers.ErrNoSignature, name)
		}
		h[name] = val
	}
	if h[HeaderAuthAlgo] != AuthAlgo {
		return fmt.Errorf("%w: %s must be %s", providers.ErrInvalidSignature, HeaderAuthAlgo, AuthAlgo)
	}
	if strings.Contains(h[HeaderTransmissionID], "|") {
		return fmt.Errorf("%w: bad %s", providers.ErrInvalidSignature, HeaderTransmissionID)
	}
	ts, err := time.Parse(time.RFC3339Nano, h[HeaderTransmissionTime])
	if err != nil {
		return fmt.Errorf("%w: %s is not an RFC 3339 time", providers.ErrInvalidSignature, HeaderTransmissionTime)
	}
	if err := providers.CheckTimestamp(ts, v.now(), v.tolerance); err != nil {
		return fmt.Errorf("%w (tolerance %s)", err, v.tolerance)
	}
	u, ok := v.CertURLAllowed(h[HeaderCertURL])
	if !ok {
		return fmt.Errorf("%w: %s is not an https URL on an allowed host (paypal.cert_hosts)", providers.ErrInvalidSignature, HeaderCertURL)
	}
	sig, err := base64.StdEncoding.DecodeString(h[HeaderTransmissionSig])
	if err != nil || len(sig) == 0 {
		return fmt.Errorf("%w: %s is not base64", providers.ErrInvalidSignature, HeaderTransmissionSig)
	}
	pub, err := v.certs.PublicKey(u)
	if errors.Is(err, providers.ErrUnavailable) {
		return err
	}
	if err != nil {
		return fmt.Errorf("%w: %w", providers.ErrInvalidSignature, err)
	}
	digest := sha256.Sum256([]byte(SignedString(h[HeaderTransmissionID], h[HeaderTransmissionTime], v.webhookID, r.Body)))
	if err := rsa.VerifyPKCS1v15(pub, crypto.SHA256, digest[:], sig); err != nil {
		return fmt.Errorf("%w: %s does not match (is paypal.webhook_id right?)", providers.ErrInvalidSignature, HeaderTransmissionSig)
	}
	return nil
}

// Resolve implements providers.Resolver: id, event_type and create_time.
func (v *Verifier) Resolve(r *providers.Request) (providers.Event, error) {
	f, err := providers.JSONFields(r.Body, "id", "event_type", "create_time")
	if err != nil {
		return providers.Event{}, err
	}
	if f[0] == "" {
		return providers.Event{}, fmt.Errorf("%w: body has no \"id\"", providers.ErrNoEventID)
	}
	ev := providers.Event{ID: f[0], Type: f[1]}
	if t, err := time.Parse(time.RFC3339Nano, f[2]); err == nil {
		ev.Time = t
	}
	return ev, nil
}

// Describe implements providers.Describer. The adapter cannot sign: only
// PayPal holds the key. The id (json:id) is not signed in a strong sense:
// PayPal signs the body only through its CRC-32, which anyone can match with
// other bytes, so the adapter is a ContentKeyer over what is signed.
func (v *Verifier) Describe() providers.Description {
	return providers.Description{
		Headers:          []string{HeaderTransmissionID, HeaderTransmissionTime, HeaderTransmissionSig, HeaderCertURL, HeaderAuthAlgo},
		DefaultEventID:   "json:id",
		DefaultTolerance: DefaultTolerance,
	}
}

// ContentKey implements providers.ContentKeyer: the digest of the signed
// string (transmission id, time, webhook id, the body's CRC-32). A captured
// transmission whose body was rewritten to another id with the same CRC-32
// still verifies within the tolerance; its content key is the original's,
// so it is a duplicate of it.
func (v *Verifier) ContentKey(r *providers.Request) []byte {
	id := strings.TrimSpace(r.Header.Get(HeaderTransmissionID))
	ts := strings.TrimSpace(r.Header.Get(HeaderTransmissionTime))
	return providers.ContentDigest("paypal", []byte(SignedString(id, ts, v.webhookID, r.Body)))
}
