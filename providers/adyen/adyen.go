// Package adyen verifies Adyen standard webhooks: a JSON batch
// `{"live":…,"notificationItems":[{"NotificationRequestItem":{…}}, …]}` in which
// every item carries its own signature in
// `NotificationRequestItem.additionalData.hmacSignature`: base64
// HMAC-SHA256 over
//
//	pspReference:originalReference:merchantAccountCode:merchantReference:value:currency:eventCode:success
//
// (value and currency from `amount`; a missing field is empty, its colons
// stay), keyed with the hex-decoded HMAC key. A delivery is authentic only if
// every item verifies, each against any configured key (rotation: queued
// notifications keep the old key). There is no signed timestamp, so the
// tolerance is ignored.
//
// The HMAC covers those eight fields, not the body bytes: the rest of an item
// (eventDate, additionalData, …) is not authenticated by Adyen's scheme, and
// an item whose signed fields appear twice is rejected as ambiguous. The
// signatures live in the body: the request's headers (Content-Type included)
// are not part of the scheme. The body is parsed to find them, before any is
// checked, so Verify first refuses a body that nests deeper than
// providers.MaxJSONDepth (providers.ErrTooDeep, a 400).
//
// The adapter is a providers.Splitter: each NotificationRequestItem object is
// its own event, id `{pspReference}:{eventCode}:{success}`, type `eventCode`,
// time `eventDate`.
package adyen

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"

	"github.com/hookline/hookline/providers"
)

// Name is the adapter's registered name.
const Name = "adyen"

// DefaultEventID is each item's composite id, in resolver notation (paths
// relative to the NotificationRequestItem object).
const DefaultEventID = "{json:pspReference}:{json:eventCode}:{json:success}"

// signedFields are the item fields covered by the HMAC, in signing order.
// value and currency live under "amount".
var signedFields = []string{"pspReference", "originalReference", "merchantAccountCode", "merchantReference", "amount.value", "amount.currency", "eventCode", "success"}

func init() {
	providers.Register(Name, func(cfg providers.Config) (providers.Provider, error) { return New(cfg) })
}

// Verifier is the Adyen adapter.
type Verifier struct {
	keys [][]byte
}

// New returns an Adyen adapter for cfg. Each secret is an HMAC key in hex, as
// Adyen's Customer Area shows it.
func New(cfg providers.Config) (*Verifier, error) {
	if len(cfg.Secrets) == 0 {
		return nil, fmt.Errorf("secrets: at least one secret is required")
	}
	if err := cfg.Decode(&struct{}{}); err != nil {
		return nil, fmt.Errorf("adyen: %w", err)
	}
	v := &Verifier{}
	for i, s := range cfg.Secrets {
		k, err := hex.DecodeString(strings.TrimSpace(s))
		if err != nil || len(k) == 0 {
			// Never echo the key or the decoder's message (it quotes bytes).
			return nil, fmt.Errorf("secrets[%d]: the Adyen HMAC key must be hex (as shown in the Customer Area)", i)
		}
		v.keys = append(v.keys, k)
	}
	return v, nil
}

// SigningString returns the string Adyen signs for one NotificationRequestItem
// object (its raw JSON).
func SigningString(item gjson.Result) string {
	parts := make([]string, 0, len(signedFields))
	for _, f := range signedFields {
		parts = append(parts, fieldString(item.Get(f)))
	}
	return strings.Join(parts, ":")
}

func fieldString(v gjson.Result) string {
	switch v.Type {
	case gjson.String:
		return v.Str
	case gjson.Null:
		return ""
	}
	return v.Raw
}

func mac(key []byte, msg string) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(msg))
	return m.Sum(nil)
}

// item is one NotificationRequestItem object located in the raw body.
type item struct {
	obj    gjson.Result
	offset int
}

// items returns the NotificationRequestItem objects of body, with their
// offsets. bad is the sentinel to wrap when the body cannot be read: Verify
// cannot find signatures in it (ErrInvalidSignature), Split cannot find events
// (ErrMalformed).
func items(body []byte, bad error) ([]item, error) {
	if !gjson.ValidBytes(body) {
		return nil, fmt.Errorf("%w: body is not valid JSON", bad)
	}
	if dupKeys(providers.ParseJSON(body), "notificationItems") {
		return nil, fmt.Errorf("%w: \"notificationItems\" appears twice", bad)
	}
	list := gjson.GetBytes(body, "notificationItems")
	if !list.IsArray() {
		return nil, fmt.Errorf("%w: body has no \"notificationItems\" array", providers.ErrMalformed)
	}
	var out []item
	var err error
	list.ForEach(func(_, el gjson.Result) bool {
		if !el.IsObject() {
			err = fmt.Errorf("%w: notificationItems[%d] is not an object", bad, len(out))
			return false
		}
		if dupKeys(el, "NotificationRequestItem") {
			err = fmt.Errorf("%w: notificationItems[%d] repeats NotificationRequestItem", bad, len(out))
			return false
		}
		obj := el.Get("NotificationRequestItem")
		if !obj.IsObject() {
			err = fmt.Errorf("%w: notificationItems[%d] has no NotificationRequestItem object", bad, len(out))
			return false
		}
		// gjson reports where Raw starts in the body; check it rather than trust it.
		if obj.Index <= 0 || obj.Index+len(obj.Raw) > len(body) || !bytes.Equal(body[obj.Index:obj.Index+len(obj.Raw)], []byte(obj.Raw)) {
			err = fmt.Errorf("%w: cannot locate notificationItems[%d] in the body", bad, len(out))
			return false
		}
		out = append(out, item{obj: obj, offset: obj.Index})
		return true
	})
	if err != nil {
		return nil, err
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%w: notificationItems is empty", providers.ErrMalformed)
	}
	return out, nil
}

// dupKeys reports whether any of names occurs more than once as a key of obj.
// gjson reads the first occurrence while other JSON parsers keep the last, so
// a repeated signed field would let the verified and the processed values differ.
func dupKeys(obj gjson.Result, names ...string) bool {
	seen := map[string]bool{}
	dup := false
	obj.ForEach(func(k, _ gjson.Result) bool {
		for _, n := range names {
			if k.Str == n {
				if seen[n] {
					dup = true
					return false
				}
				seen[n] = true
			}
		}
		return true
	})
	return dup
}

// Verify implements providers.Verifier: every item must carry a signature
// that one of the configured keys produced. A body nesting deeper than
// providers.MaxJSONDepth is refused with providers.ErrTooDeep before it is
// parsed.
func (v *Verifier) Verify(r *providers.Request) error {
	if err := providers.CheckJSONDepth(r.Body); err != nil {
		return err
	}
	its, err := items(r.Body, providers.ErrInvalidSignature)
	if err != nil {
		return err
	}
	for i, it := range its {
		if dupKeys(it.obj, "pspReference", "originalReference", "merchantAccountCode", "merchantReference", "amount", "eventCode", "success", "additionalData") ||
			dupKeys(it.obj.Get("amount"), "value", "currency") ||
			dupKeys(it.obj.Get("additionalData"), "hmacSignature") {
			return fmt.Errorf("%w: notificationItems[%d] repeats a signed field", providers.ErrInvalidSignature, i)
		}
		sigField := it.obj.Get("additionalData.hmacSignature")
		if sigField.Type != gjson.String || sigField.Str == "" {
			return fmt.Errorf("%w: notificationItems[%d] has no additionalData.hmacSignature", providers.ErrNoSignature, i)
		}
		sig, derr := base64.StdEncoding.DecodeString(sigField.Str)
		if derr != nil || len(sig) != sha256.Size {
			return fmt.Errorf("%w: notificationItems[%d]: hmacSignature is not a base64 HMAC-SHA256", providers.ErrInvalidSignature, i)
		}
		msg := SigningString(it.obj)
		ok := false
		for _, k := range v.keys {
			if hmac.Equal(mac(k, msg), sig) {
				ok = true
			}
		}
		if !ok {
			return fmt.Errorf("%w: notificationItems[%d] signature does not match", providers.ErrInvalidSignature, i)
		}
	}
	return nil
}

func event(obj gjson.Result) (providers.Event, error) {
	f := []gjson.Result{obj.Get("pspReference"), obj.Get("eventCode"), obj.Get("success"), obj.Get("eventDate")}
	psp, code, success, date := fieldString(f[0]), fieldString(f[1]), fieldString(f[2]), fieldString(f[3])
	if providers.Blank(psp) {
		return providers.Event{}, fmt.Errorf("%w: item has no pspReference (or a blank one)", providers.ErrNoEventID)
	}
	ev := providers.Event{ID: psp + ":" + code + ":" + success, Type: code}
	if t, err := time.Parse(time.RFC3339, date); err == nil {
		ev.Time = t
	}
	return ev, nil
}

// Split implements providers.Splitter: one item per NotificationRequestItem,
// its bytes a slice of the body.
func (v *Verifier) Split(r *providers.Request) ([]providers.Item, error) {
	its, err := items(r.Body, providers.ErrMalformed)
	if err != nil {
		return nil, err
	}
	out := make([]providers.Item, 0, len(its))
	for i, it := range its {
		ev, err := event(it.obj)
		if err != nil {
			return nil, fmt.Errorf("notificationItems[%d]: %w", i, err)
		}
		out = append(out, providers.Item{Body: r.Body[it.offset : it.offset+len(it.obj.Raw)], Offset: it.offset, Event: ev})
	}
	return out, nil
}

// Resolve implements providers.Resolver with the first item (ingest splits
// Adyen deliveries instead; Resolve serves callers that want one event).
func (v *Verifier) Resolve(r *providers.Request) (providers.Event, error) {
	its, err := items(r.Body, providers.ErrMalformed)
	if err != nil {
		return providers.Event{}, err
	}
	return event(its[0].obj)
}

// Sign implements providers.Signer with the first key: it writes an
// hmacSignature into every item, replacing r.Body (and any signature there).
// now is unused: the scheme has no timestamp.
func (v *Verifier) Sign(r *providers.Request, _ time.Time) error {
	its, err := items(r.Body, providers.ErrMalformed)
	if err != nil {
		return err
	}
	body := r.Body
	for i, it := range its {
		sig := base64.StdEncoding.EncodeToString(mac(v.keys[0], SigningString(it.obj)))
		body, err = sjson.SetBytes(body, "notificationItems."+strconv.Itoa(i)+".NotificationRequestItem.additionalData.hmacSignature", sig)
		if err != nil {
			return fmt.Errorf("adyen: sign notificationItems[%d]: %w", i, err)
		}
	}
	r.Body = body
	if r.Header == nil {
		r.Header = http.Header{}
	}
	if r.Header.Get("Content-Type") == "" {
		r.Header.Set("Content-Type", "application/json")
	}
	return nil
}

// Describe implements providers.Describer. The signatures are in the body, so
// no header is listed; the id's json paths are relative to each item, and
// its three fields are among those each item's signature covers.
func (v *Verifier) Describe() providers.Description {
	return providers.Description{DefaultEventID: DefaultEventID, IDSigned: true}
}
