package googleplay

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/hookline/hookline/providers"
)

// NotificationTypes are the keys of a Developer Notification, one of which
// each carries (Google Play's RTDN reference): the event type.
var NotificationTypes = []string{
	"subscriptionNotification",
	"oneTimeProductNotification",
	"voidedPurchaseNotification",
	"pendingRefundReviewNotification",
	"testNotification",
}

// maxDataBytes bounds the base64 message.data that is decoded (a Developer
// Notification is a few hundred bytes): larger data is carried, not read.
const maxDataBytes = 64 << 10

// maxEventMillis is 9999-12-31T23:59:59.999Z in Unix milliseconds.
const maxEventMillis = 253402300799999

// Push is what the adapter reads of a Pub/Sub push request body (a
// wrapped one): {"message": {...}, "subscription": "..."}.
type Push struct {
	// MessageID is message.messageId ("" when absent).
	MessageID string
	// PublishTime is message.publishTime (else publish_time); zero when
	// absent or not RFC 3339.
	PublishTime time.Time
	// Subscription is the subscription's full name.
	Subscription string
	// Data is message.data, decoded; nil when absent, not base64, or over
	// 64 KiB of base64 (then DataTooLarge).
	Data         []byte
	DataTooLarge bool
}

func malformed(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{providers.ErrMalformed}, args...)...)
}

// object decodes b as one JSON object, keys compared exactly (a key given
// twice: the last, as JSON.parse keeps it).
func object(b []byte) (map[string]json.RawMessage, bool) {
	b = bytes.TrimSpace(b)
	if len(b) == 0 || b[0] != '{' {
		return nil, false
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(b, &m) != nil {
		return nil, false
	}
	return m, true
}

// str reads m[key] as a JSON string; null or absent is ("", false, nil).
func str(m map[string]json.RawMessage, key string) (string, bool, error) {
	raw, ok := m[key]
	if !ok || string(raw) == "null" {
		return "", false, nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", false, malformed("message.%s is not a string", key)
	}
	return s, true, nil
}

// ParsePush reads a Pub/Sub push body: one JSON object nesting at most
// providers.MaxJSONDepth deep, whose "message" is an object; messageId,
// message_id, publishTime, publish_time and data, when present, strings;
// message_id, when present with messageId, equal to it. Errors wrap
// providers.ErrMalformed (providers.ErrTooDeep for a body nesting too
// deep) and never quote the body.
func ParsePush(body []byte) (*Push, error) {
	if err := providers.CheckJSONDepth(body); err != nil {
		return nil, err
	}
	top, ok := object(body)
	if !ok {
		return nil, malformed("the body is not a JSON object (a wrapped Pub/Sub push)")
	}
	msg, ok := object(top["message"])
	if !ok {
		return nil, malformed("the body has no message object (a wrapped Pub/Sub push)")
	}
	p := &Push{}
	if sub, ok := top["subscription"]; ok {
		_ = json.Unmarshal(sub, &p.Subscription)
	}
	var err error
	if err = p.readIDs(msg); err != nil {
		return nil, err
	}
	if err = p.readPublishTime(msg); err != nil {
		return nil, err
	}
	data, present, err := str(msg, "data")
	if err != nil || !present {
		return p, err
	}
	if len(data) > maxDataBytes {
		p.DataTooLarge = true
		return p, nil
	}
	p.Data = decodeData(data)
	return p, nil
}

// readIDs reads messageId; message_id, when both are present, must repeat
// it.
func (p *Push) readIDs(msg map[string]json.RawMessage) error {
	id, camel, err := str(msg, "messageId")
	if err != nil {
		return err
	}
	snake, present, err := str(msg, "message_id")
	if err != nil {
		return err
	}
	if camel && present && snake != id {
		return malformed("message.messageId and message.message_id differ")
	}
	p.MessageID = id
	return nil
}

// readPublishTime reads publishTime, else publish_time.
func (p *Push) readPublishTime(msg map[string]json.RawMessage) error {
	for _, key := range []string{"publishTime", "publish_time"} {
		s, present, err := str(msg, key)
		if err != nil {
			return err
		}
		if present {
			if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
				p.PublishTime = t
			}
			return nil
		}
	}
	return nil
}

// decodeData decodes base64 as protobuf's JSON mapping writes bytes
// (standard alphabet, padded) and accepts them (URL-safe, unpadded too);
// nil when it is not base64.
func decodeData(s string) []byte {
	s = strings.TrimRight(s, "=")
	enc := base64.RawStdEncoding
	if strings.ContainsAny(s, "-_") {
		enc = base64.RawURLEncoding
	}
	b, err := enc.DecodeString(s)
	if err != nil {
		return nil
	}
	return b
}

// DeveloperNotification is what the adapter reads of the data of a Google
// Play RTDN.
type DeveloperNotification struct {
	// PackageName is packageName; nil when absent or not a string.
	PackageName *string
	// Type is the one key of NotificationTypes the notification carries
	// (an object); "" when it carries none, or several.
	Type string
	// EventTime is eventTimeMillis (a string of digits, as Pub/Sub's JSON
	// writes int64, or a number); zero when absent or out of range.
	EventTime time.Time
}

// Notification reads the push's data as a Developer Notification; nil when
// the data is not a JSON object (not an RTDN).
func (p *Push) Notification() *DeveloperNotification {
	if p.Data == nil || providers.CheckJSONDepth(p.Data) != nil {
		return nil
	}
	m, ok := object(p.Data)
	if !ok {
		return nil
	}
	n := &DeveloperNotification{}
	if s, present, err := str(m, "packageName"); err == nil && present {
		n.PackageName = &s
	}
	for _, key := range NotificationTypes {
		if v, ok := m[key]; ok && bytes.HasPrefix(bytes.TrimSpace(v), []byte("{")) {
			if n.Type != "" {
				n.Type = ""
				break
			}
			n.Type = key
		}
	}
	n.EventTime = eventTime(m["eventTimeMillis"])
	return n
}

// eventTime reads eventTimeMillis: "1503349566168" or 1503349566168.
func eventTime(raw json.RawMessage) time.Time {
	s := string(bytes.TrimSpace(raw))
	if unq, err := strconv.Unquote(s); err == nil && strings.HasPrefix(s, `"`) {
		s = unq
	}
	ms, err := strconv.ParseInt(s, 10, 64)
	if err != nil || ms <= 0 || ms > maxEventMillis {
		return time.Time{}
	}
	return time.UnixMilli(ms).UTC()
}
