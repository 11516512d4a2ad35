// Package braintree verifies Braintree webhooks: a form POST with the fields
// `bt_signature` and `bt_payload`. bt_payload is a base64 XML
// `<notification>`; bt_signature is one or more `publicKey|hexsig` pairs
// joined by `&`, where
//
//	hexsig = hex(HMAC-SHA1(key = SHA1(privateKey), msg = bt_payload))
//
// As Braintree's SDKs do, the MAC over bt_payload+"\n" is accepted too, and a
// payload with characters outside [A-Za-z0-9+=/\n] is refused.
//
// Each secret is `public_key:private_key` (the API key pair the webhook is
// signed for); pairs in bt_signature whose public key is not configured are
// ignored. A bt_signature of more than MaxSignaturePairs entries is refused
// before any MAC is computed, and Verify computes at most two MACs (with and
// without the final newline) per configured key, whatever bt_signature lists:
// verification costs O(body). There is no signed timestamp, so the tolerance
// is ignored. The signature lives in the form body, which Verify reads
// whatever the Content-Type says; Resolve refuses a body declared as another
// media type (ErrMalformed).
//
// Braintree sends no event id: the id is `{kind}:{subject id}:{timestamp}`
// from the XML, where the subject id is the `<id>` of the first element under
// `<subject>`. Some kinds have no such id (check, account_updater_daily_report,
// connected_merchant_*); their middle part is then the hex SHA-256 of the
// payload, so that two such notifications in the same second stay distinct
// while a redelivery of the same payload keeps its id. A notification without
// kind or timestamp has no id. The type is the kind, the time the timestamp.
package braintree

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/xml"
	"fmt"
	"hash"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/hookline/hookline/providers"
)

// Name is the adapter's registered name.
const Name = "braintree"

// Form fields of a delivery.
const (
	SignatureField = "bt_signature"
	PayloadField   = "bt_payload"
)

func init() {
	providers.Register(Name, func(cfg providers.Config) (providers.Provider, error) { return New(cfg) })
}

type keyPair struct {
	public string
	macKey []byte // SHA1(private key)
}

// Verifier is the Braintree adapter.
type Verifier struct {
	keys []keyPair
}

// New returns a Braintree adapter for cfg. Each secret is
// `public_key:private_key`.
func New(cfg providers.Config) (*Verifier, error) {
	if len(cfg.Secrets) == 0 {
		return nil, fmt.Errorf("secrets: at least one secret is required")
	}
	if err := cfg.Decode(&struct{}{}); err != nil {
		return nil, fmt.Errorf("braintree: %w", err)
	}
	v := &Verifier{}
	for i, s := range cfg.Secrets {
		pub, priv, ok := strings.Cut(s, ":")
		if !ok || pub == "" || priv == "" || strings.ContainsAny(pub, "|&") {
			return nil, fmt.Errorf("secrets[%d]: want public_key:private_key (Braintree API key pair)", i)
		}
		sum := sha1.Sum([]byte(priv))
		v.keys = append(v.keys, keyPair{public: pub, macKey: sum[:]})
	}
	return v, nil
}

// Pair is one `publicKey|hexsig` entry of bt_signature.
type Pair struct {
	PublicKey string
	Signature []byte // 20 bytes
}

// MaxSignaturePairs caps the `&`-separated entries of bt_signature. Braintree
// sends one pair per API key of the merchant, a handful; a value with more
// entries is refused as a whole (ErrInvalidSignature), so that no sender can
// make one delivery cost more than the cap allows.
const MaxSignaturePairs = 16

// ParseSignature parses a bt_signature value. Entries without "|", with an
// empty public key or a signature that is not 40 hex digits are skipped (a
// garbled entry never matches; another may); no usable entry is an error, and
// so is a value of more than MaxSignaturePairs entries, usable or not.
func ParseSignature(value string) ([]Pair, error) {
	if strings.Count(value, "&") >= MaxSignaturePairs {
		return nil, fmt.Errorf("%w: %s has more than %d entries", providers.ErrInvalidSignature, SignatureField, MaxSignaturePairs)
	}
	var out []Pair
	for entry := range strings.SplitSeq(value, "&") {
		pub, sig, ok := strings.Cut(entry, "|")
		if !ok || pub == "" {
			continue
		}
		b, err := hex.DecodeString(sig)
		if err != nil || len(b) != sha1.Size {
			continue
		}
		out = append(out, Pair{PublicKey: pub, Signature: b})
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%w: no publicKey|signature pair in %s", providers.ErrInvalidSignature, SignatureField)
	}
	return out, nil
}

// ValidPayload reports whether p uses only the characters Braintree's
// base64 payloads are made of: [A-Za-z0-9+=/\n].
func ValidPayload(p string) bool {
	for i := 0; i < len(p); i++ {
		c := p[i]
		switch {
		case c >= 'A' && c <= 'Z', c >= 'a' && c <= 'z', c >= '0' && c <= '9', c == '+', c == '=', c == '/', c == '\n':
		default:
			return false
		}
	}
	return true
}

// newMAC returns an HMAC-SHA1 keyed with key; every MAC of the package is
// computed through it (tests count them).
var newMAC = func(key []byte) hash.Hash { return hmac.New(sha1.New, key) }

func mac(key, payload []byte, newline bool) []byte {
	m := newMAC(key)
	m.Write(payload)
	if newline {
		m.Write([]byte{'\n'})
	}
	return m.Sum(nil)
}

// Verify implements providers.Verifier.
func (v *Verifier) Verify(r *providers.Request) error {
	vals, err := url.ParseQuery(string(r.Body))
	if err != nil {
		return fmt.Errorf("%w: unreadable form body", providers.ErrInvalidSignature)
	}
	if len(vals[SignatureField]) > 1 || len(vals[PayloadField]) > 1 {
		// Receivers disagree on which repeated field counts (first or last).
		return fmt.Errorf("%w: %s or %s appears more than once", providers.ErrInvalidSignature, SignatureField, PayloadField)
	}
	sigValue, payload := vals.Get(SignatureField), vals.Get(PayloadField)
	if sigValue == "" || payload == "" {
		return fmt.Errorf("%w: form fields %s and %s are required", providers.ErrNoSignature, SignatureField, PayloadField)
	}
	if !ValidPayload(payload) {
		return fmt.Errorf("%w: %s contains characters outside [A-Za-z0-9+=/\\n]", providers.ErrInvalidSignature, PayloadField)
	}
	pairs, err := ParseSignature(sigValue)
	if err != nil {
		return err
	}
	// Each key's two MACs are computed once, when a pair names its public
	// key, and compared with every such pair: at most 2*len(v.keys) MACs.
	var msg []byte
	matchedKey := false
	for _, k := range v.keys {
		var plain, newline []byte
		for _, p := range pairs {
			if p.PublicKey != k.public {
				continue
			}
			matchedKey = true
			if plain == nil {
				if msg == nil {
					msg = []byte(payload)
				}
				plain = mac(k.macKey, msg, false)
			}
			if hmac.Equal(plain, p.Signature) {
				return nil
			}
			if newline == nil {
				newline = mac(k.macKey, msg, true)
			}
			if hmac.Equal(newline, p.Signature) {
				return nil
			}
		}
	}
	if !matchedKey {
		return fmt.Errorf("%w: no signature for a configured public key", providers.ErrInvalidSignature)
	}
	return fmt.Errorf("%w: %s does not match", providers.ErrInvalidSignature, SignatureField)
}

// Notification is the part of the `<notification>` XML the adapter reads.
type Notification struct {
	XMLName   xml.Name `xml:"notification"`
	Timestamp string   `xml:"timestamp"`
	Kind      string   `xml:"kind"`
	Subject   struct {
		Children []struct {
			XMLName xml.Name
			ID      []string `xml:"id"`
		} `xml:",any"`
	} `xml:"subject"`
}

// SubjectID is the `<id>` of the first element under `<subject>`, or "".
func (n *Notification) SubjectID() string {
	if len(n.Subject.Children) == 0 || len(n.Subject.Children[0].ID) == 0 {
		return ""
	}
	return strings.TrimSpace(n.Subject.Children[0].ID[0])
}

// ParsePayload decodes a bt_payload value into its notification.
func ParsePayload(payload string) (*Notification, []byte, error) {
	// The standard decoder skips the '\n' line breaks of Braintree's payloads.
	raw, err := base64.StdEncoding.DecodeString(payload)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %s is not base64", providers.ErrMalformed, PayloadField)
	}
	var n Notification
	if err := xml.Unmarshal(raw, &n); err != nil {
		return nil, nil, fmt.Errorf("%w: %s is not a <notification> XML document", providers.ErrMalformed, PayloadField)
	}
	return &n, raw, nil
}

// Resolve implements providers.Resolver: `{kind}:{subject id}:{timestamp}`,
// type kind, time timestamp.
func (v *Verifier) Resolve(r *providers.Request) (providers.Event, error) {
	vals, err := providers.ParseForm(r)
	if err != nil {
		return providers.Event{}, err
	}
	payload := vals.Get(PayloadField)
	if payload == "" {
		return providers.Event{}, fmt.Errorf("%w: no %s field", providers.ErrMalformed, PayloadField)
	}
	n, raw, err := ParsePayload(payload)
	if err != nil {
		return providers.Event{}, err
	}
	kind, ts := strings.TrimSpace(n.Kind), strings.TrimSpace(n.Timestamp)
	if providers.Blank(kind) || providers.Blank(ts) {
		return providers.Event{}, fmt.Errorf("%w: notification has no kind or timestamp", providers.ErrNoEventID)
	}
	subject := n.SubjectID()
	if providers.Blank(subject) {
		sum := sha256.Sum256(raw)
		subject = hex.EncodeToString(sum[:])
	}
	ev := providers.Event{ID: kind + ":" + subject + ":" + ts, Type: kind}
	if t, err := time.Parse(time.RFC3339Nano, ts); err == nil {
		ev.Time = t
	}
	return ev, nil
}

// Sign implements providers.Signer with the first key pair. When r.Body is a
// form with a bt_payload it signs that payload; otherwise r.Body is taken as
// the notification XML and base64-encoded. Either way r.Body becomes the form
// `bt_payload=…&bt_signature=publicKey|hexsig` (any earlier signature is
// replaced). now is unused: the scheme has no timestamp.
func (v *Verifier) Sign(r *providers.Request, _ time.Time) error {
	var payload string
	if vals, err := url.ParseQuery(string(r.Body)); err == nil && vals.Get(PayloadField) != "" && !bytes.HasPrefix(bytes.TrimSpace(r.Body), []byte("<")) {
		payload = vals.Get(PayloadField)
	} else {
		payload = base64.StdEncoding.EncodeToString(r.Body)
	}
	k := v.keys[0]
	form := url.Values{
		PayloadField:   {payload},
		SignatureField: {k.public + "|" + hex.EncodeToString(mac(k.macKey, []byte(payload), false))},
	}
	r.Body = []byte(form.Encode())
	if r.Header == nil {
		r.Header = http.Header{}
	}
	r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	return nil
}

// DefaultEventID is the composite default id; its parts are read from the
// `<notification>` XML in form:bt_payload, which no key resolver reaches.
const DefaultEventID = "{kind}:{subject id}:{timestamp} (the <notification> XML in form:bt_payload)"

// Describe implements providers.Describer. The signature is a form field,
// so no header is listed. The id is read from bt_payload, which the
// signature covers.
func (v *Verifier) Describe() providers.Description {
	return providers.Description{DefaultEventID: DefaultEventID, IDSigned: true}
}
