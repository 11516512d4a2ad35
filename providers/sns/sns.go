// Package sns verifies Amazon SNS messages delivered to an HTTP/HTTPS
// subscription. SNS POSTs a JSON body (Content-Type text/plain) holding the
// message and its signature:
//
//	Type              Notification, SubscriptionConfirmation or UnsubscribeConfirmation
//	MessageId         the message's id (the same on every retry)
//	TopicArn          the topic it was published to
//	Subject           optional, Notification only
//	Message           the message
//	Timestamp         when it was published (RFC 3339)
//	SubscribeURL      confirmations: where the subscription is confirmed
//	Token             confirmations: the token of ConfirmSubscription
//	UnsubscribeURL    Notification: where the subscription is cancelled
//	SignatureVersion  1 (SHA1withRSA) or 2 (SHA256withRSA)
//	Signature         base64 RSA PKCS#1 v1.5 signature
//	SigningCertURL    where SNS's X.509 signing certificate is
//
// The string to sign is "<key>\n<value>\n" for each of Message, MessageId,
// Subject, SubscribeURL, Timestamp, Token, TopicArn and Type that the message
// carries, in that order (see SignedKeys), as AWS's PHP validator builds it;
// AWS's Node validator (sns-validator 0.3.5) differs only on
// UnsubscribeConfirmation, which it checks without Token. A Notification
// signs Message, MessageId, Subject when present, Timestamp, TopicArn and
// Type; a confirmation signs Message, MessageId, SubscribeURL, Timestamp,
// Token, TopicArn and Type, and must carry SubscribeURL and Token.
// UnsubscribeURL, SigningCertURL and SignatureVersion are not signed. The
// body must be one JSON object with no key twice, the values of the keys
// read strings (or null: absent); the x-amz-sns-message-type, -message-id
// and -topic-arn headers, which are not signed, must equal the signed fields
// when present.
//
// A valid signature only proves that SNS sent the message, not that it is
// the source's: anyone can subscribe the source's URL to a topic of their
// own. The source's `secrets` are therefore the ARNs of the topics it
// accepts (arn:PARTITION:sns:REGION:ACCOUNT:TOPIC, at least one): a message
// from any other topic is an invalid signature, refused before any
// certificate is fetched. They are not secret, and they sign nothing.
//
// The certificate is fetched from SigningCertURL only when the URL is https,
// its host matches AWS's pattern ^sns\.[a-zA-Z0-9\-]{3,}\.amazonaws\.com(\.cn)?$
// (that of AWS's validators) with no port, and its path ends in .pem, with
// no query or fragment; or when its host is one of `sns.cert_hosts` (none by
// default: for SNS-compatible services such as LocalStack, and tests; an
// entry with a port must match host:port exactly; plain http only for a
// loopback host listed there). Trust rests on that https fetch from an SNS
// host, as in AWS's validators: the chain is not validated, but the
// certificate must be current and hold an RSA key. Redirects are not
// followed, and a SigningCertURL over 2048 bytes is not allowed.
//
// The delivery is not authenticated until the certificate is known, so the
// fetches it can cause are bounded (see package keyfetch), as for PayPal:
// certificates are cached by URL (at most 64) until their NotAfter; an answer
// that a URL holds no usable certificate (a non-2xx answer but 408, 429 and
// 5xx, a redirect, a body over 64 KiB, no readable RSA certificate) is
// remembered for 2 minutes; concurrent deliveries naming one uncached URL
// share one fetch; at most 10 fetches a second (bursts of 20), none waiting
// more than a second. A fetch that cannot be made or answered (that limit, a
// connection error, a timeout, a 408, 429 or 5xx answer) is
// providers.ErrUnavailable (503): SNS retries.
//
// SNS retries a message under its original Timestamp (for at most an hour),
// so no tolerance applies by default; a source that sets `tolerance` has
// Timestamp checked against it (both directions).
//
// The event id is MessageId (signed), the type Type, the time Timestamp.
// hookline never fetches SubscribeURL: a SubscriptionConfirmation is stored
// and forwarded like any message, and the destination (or an operator)
// confirms the subscription. The adapter cannot sign: only AWS holds the key.
package sns

import (
	"crypto"
	"crypto/rsa"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"net/url"
	"regexp"
	"strings"
	"time"

	"github.com/hookline/hookline/providers"
	"github.com/hookline/hookline/providers/keyfetch"
)

// Name is the adapter's registered name.
const Name = "sns"

// Headers SNS sends with every message. They are not signed.
const (
	HeaderMessageType = "X-Amz-Sns-Message-Type"
	HeaderMessageID   = "X-Amz-Sns-Message-Id"
	HeaderTopicArn    = "X-Amz-Sns-Topic-Arn"
)

// CertHostPattern is the pattern of AWS's SNS hosts, the default of AWS's
// message validators (sns-validator, aws-php-sns-message-validator). It is
// matched against the lowercased host of SigningCertURL.
var CertHostPattern = regexp.MustCompile(`^sns\.[a-zA-Z0-9\-]{3,}\.amazonaws\.com(\.cn)?$`)

const (
	// maxCertURLBytes bounds SigningCertURL (SNS's are about 100 bytes),
	// and so the memory a remembered answer about a URL takes.
	maxCertURLBytes = 2048
)

func init() {
	providers.Register(Name, func(cfg providers.Config) (providers.Provider, error) { return New(cfg) })
}

// Settings is the `sns:` block of a source.
type Settings struct {
	// CertHosts are hosts (host or host:port) SigningCertURL may point to
	// besides AWS's (CertHostPattern). None by default.
	CertHosts []string `yaml:"cert_hosts"`
}

// Verifier is the SNS adapter.
type Verifier struct {
	topics    map[string]bool
	hosts     map[string]bool // lowercased host or host:port, from cert_hosts
	tolerance time.Duration   // zero: Timestamp is not checked
	now       func() time.Time
	certs     *keyfetch.Certs // the certificates deliveries name, fetched within bounds
}

// ValidTopicArn reports whether s is a topic ARN:
// arn:PARTITION:sns:REGION:ACCOUNT:TOPIC, no part empty.
func ValidTopicArn(s string) bool {
	parts := strings.Split(s, ":")
	if len(parts) != 6 || parts[0] != "arn" || parts[2] != "sns" {
		return false
	}
	for _, p := range parts {
		if p == "" || strings.TrimSpace(p) != p {
			return false
		}
	}
	return true
}

// New returns an SNS adapter for cfg.
func New(cfg providers.Config) (*Verifier, error) {
	if len(cfg.Secrets) == 0 {
		return nil, fmt.Errorf("secrets: at least one topic ARN is required (the topics whose messages this source accepts)")
	}
	var s Settings
	if err := cfg.Decode(&s); err != nil {
		return nil, fmt.Errorf("sns: %w", err)
	}
	v := &Verifier{
		topics:    map[string]bool{},
		tolerance: cfg.Tolerance,
		now:       cfg.NowFunc(),
	}
	for i, arn := range cfg.Secrets {
		if !ValidTopicArn(arn) {
			hint := ""
			if strings.Count(arn, ":") == 6 {
				hint = " (a subscription ARN? give the topic's)"
			}
			return nil, fmt.Errorf("secrets[%d]: want a topic ARN, arn:aws:sns:REGION:ACCOUNT:TOPIC%s", i, hint)
		}
		v.topics[arn] = true
	}
	hostSet, err := keyfetch.HostSet("sns.cert_hosts", s.CertHosts)
	if err != nil {
		return nil, err
	}
	v.hosts = hostSet
	v.certs = keyfetch.NewCerts(keyfetch.CertsOptions{Name: "SNS's", Client: cfg.HTTPClient, Now: v.now})
	return v, nil
}

// CertURLAllowed reports whether SigningCertURL value raw may be fetched:
// https, no user info, query or fragment, a path ending in .pem, and a host
// matching CertHostPattern without a port, or one of sns.cert_hosts (plain
// http only for a loopback host listed there).
func (v *Verifier) CertURLAllowed(raw string) (*url.URL, bool) {
	if len(raw) > maxCertURLBytes {
		return nil, false
	}
	u, err := url.Parse(raw)
	if err != nil || u.User != nil || u.Host == "" || u.Opaque != "" || strings.HasSuffix(u.Host, ":") ||
		u.RawQuery != "" || u.ForceQuery || u.Fragment != "" || u.RawFragment != "" ||
		!strings.HasSuffix(u.EscapedPath(), ".pem") {
		return nil, false
	}
	host, port := strings.ToLower(u.Hostname()), u.Port()
	switch u.Scheme {
	case "https":
		if port == "" && CertHostPattern.MatchString(host) {
			return u, true
		}
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

// checkFields checks what m must carry besides its signature: the keys
// every message has, a known Type and, for a confirmation, SubscribeURL and
// Token.
func checkFields(m Message) error {
	for _, k := range []string{"Type", "MessageId", "TopicArn", "Message", "Timestamp"} {
		if _, ok := m[k]; !ok {
			return fmt.Errorf("%w: the message has no %s", providers.ErrInvalidSignature, k)
		}
	}
	switch m["Type"] {
	case TypeNotification:
	case TypeSubscriptionConfirmation, TypeUnsubscribeConfirmation:
		for _, k := range []string{"SubscribeURL", "Token"} {
			if _, ok := m[k]; !ok {
				return fmt.Errorf("%w: a %s has no %s", providers.ErrInvalidSignature, m["Type"], k)
			}
		}
	default:
		return fmt.Errorf("%w: Type must be %s, %s or %s", providers.ErrInvalidSignature,
			TypeNotification, TypeSubscriptionConfirmation, TypeUnsubscribeConfirmation)
	}
	return nil
}

// checkHeaders checks that the x-amz-sns-* headers that repeat signed
// fields, when present, repeat them exactly: a destination may route on them.
func checkHeaders(r *providers.Request, m Message) error {
	for _, c := range [...]struct{ header, key string }{
		{HeaderMessageType, "Type"}, {HeaderMessageID, "MessageId"}, {HeaderTopicArn, "TopicArn"},
	} {
		if vals, ok := r.Header[c.header]; ok && (len(vals) != 1 || vals[0] != m[c.key]) {
			return fmt.Errorf("%w: the %s header does not match the signed %s", providers.ErrInvalidSignature, c.header, c.key)
		}
	}
	return nil
}

// Verify implements providers.Verifier.
func (v *Verifier) Verify(r *providers.Request) error {
	m, err := ParseMessage(r.Body)
	if errors.Is(err, providers.ErrTooDeep) {
		return err
	}
	if err != nil {
		return fmt.Errorf("%w: the body is not an SNS message (%v)", providers.ErrNoSignature, err)
	}
	for _, k := range []string{"Signature", "SignatureVersion", "SigningCertURL"} {
		if _, ok := m[k]; !ok {
			return fmt.Errorf("%w: the message has no %s (raw message delivery is unsigned: turn it off)", providers.ErrNoSignature, k)
		}
	}
	if err := checkFields(m); err != nil {
		return err
	}
	var hash crypto.Hash
	switch m["SignatureVersion"] {
	case "1":
		hash = crypto.SHA1
	case "2":
		hash = crypto.SHA256
	default:
		return fmt.Errorf("%w: SignatureVersion must be 1 or 2", providers.ErrInvalidSignature)
	}
	if !v.topics[m["TopicArn"]] {
		return fmt.Errorf("%w: TopicArn is not one of the source's topics (its secrets)", providers.ErrInvalidSignature)
	}
	if err := checkHeaders(r, m); err != nil {
		return err
	}
	if v.tolerance > 0 {
		ts, err := time.Parse(time.RFC3339Nano, m["Timestamp"])
		if err != nil {
			return fmt.Errorf("%w: Timestamp is not an RFC 3339 time", providers.ErrInvalidSignature)
		}
		if err := providers.CheckTimestamp(ts, v.now(), v.tolerance); err != nil {
			return fmt.Errorf("%w (tolerance %s)", err, v.tolerance)
		}
	}
	u, ok := v.CertURLAllowed(m["SigningCertURL"])
	if !ok {
		return fmt.Errorf("%w: SigningCertURL is not an https .pem URL on an SNS host (or one of sns.cert_hosts)", providers.ErrInvalidSignature)
	}
	sig, err := base64.StdEncoding.DecodeString(m["Signature"])
	if err != nil || len(sig) == 0 {
		return fmt.Errorf("%w: Signature is not base64", providers.ErrInvalidSignature)
	}
	pub, err := v.certs.PublicKey(u)
	if errors.Is(err, providers.ErrUnavailable) {
		return err
	}
	if err != nil {
		return fmt.Errorf("%w: %w", providers.ErrInvalidSignature, err)
	}
	if err := rsa.VerifyPKCS1v15(pub, hash, digest(hash, m.StringToSign()), sig); err != nil {
		return fmt.Errorf("%w: Signature does not match", providers.ErrInvalidSignature)
	}
	return nil
}

func digest(h crypto.Hash, s string) []byte {
	if h == crypto.SHA1 {
		d := sha1.Sum([]byte(s))
		return d[:]
	}
	d := sha256.Sum256([]byte(s))
	return d[:]
}

// Resolve implements providers.Resolver: MessageId, Type and Timestamp.
func (v *Verifier) Resolve(r *providers.Request) (providers.Event, error) {
	m, err := ParseMessage(r.Body)
	if err != nil {
		return providers.Event{}, err
	}
	if strings.TrimSpace(m["MessageId"]) == "" {
		return providers.Event{}, fmt.Errorf("%w: the message has no MessageId", providers.ErrNoEventID)
	}
	ev := providers.Event{ID: m["MessageId"], Type: m["Type"]}
	if t, err := time.Parse(time.RFC3339Nano, m["Timestamp"]); err == nil {
		ev.Time = t
	}
	return ev, nil
}

// Describe implements providers.Describer. The signature lives in the body;
// MessageId is signed. The adapter cannot sign: only AWS holds the key.
func (v *Verifier) Describe() providers.Description {
	return providers.Description{
		DefaultEventID:   "json:MessageId",
		DefaultEventType: "json:Type",
		IDSigned:         true,
	}
}
