package sns

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"

	"github.com/hookline/hookline/providers"
)

// Message types (the body's Type and the x-amz-sns-message-type header).
const (
	TypeNotification             = "Notification"
	TypeSubscriptionConfirmation = "SubscriptionConfirmation"
	TypeUnsubscribeConfirmation  = "UnsubscribeConfirmation"
)

// SignedKeys are the keys SNS signs, in the order it signs them. Each that a
// message carries is signed: a Notification's Message, MessageId, Subject
// (when present), Timestamp, TopicArn and Type; a confirmation's Message,
// MessageId, SubscribeURL, Timestamp, Token, TopicArn and Type.
var SignedKeys = []string{"Message", "MessageId", "Subject", "SubscribeURL", "Timestamp", "Token", "TopicArn", "Type"}

// unsignedKeys are the other keys of an SNS message that the adapter reads.
var unsignedKeys = []string{"SignatureVersion", "Signature", "SigningCertURL", "UnsubscribeURL"}

// Message is an SNS message: the string values of the keys the adapter reads
// (SignedKeys and SignatureVersion, Signature, SigningCertURL,
// UnsubscribeURL) that the body carries. A key whose value is null is
// absent, as in AWS's validators; other keys are ignored.
type Message map[string]string

// StringToSign is what SNS signs for m: "<key>\n<value>\n" for each of
// SignedKeys that m carries, in that order.
func (m Message) StringToSign() string {
	var b strings.Builder
	for _, k := range SignedKeys {
		if v, ok := m[k]; ok {
			b.WriteString(k)
			b.WriteByte('\n')
			b.WriteString(v)
			b.WriteByte('\n')
		}
	}
	return b.String()
}

func known(key string) bool {
	for _, k := range SignedKeys {
		if k == key {
			return true
		}
	}
	for _, k := range unsignedKeys {
		if k == key {
			return true
		}
	}
	return false
}

func malformed(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{providers.ErrMalformed}, args...)...)
}

// ParseMessage reads the SNS message that body holds: one JSON object, valid
// UTF-8, nesting at most providers.MaxJSONDepth deep, no key twice (a
// duplicate would let two readers see two messages), and the keys it reads
// strings or null. Errors wrap providers.ErrMalformed (providers.ErrTooDeep
// for a body nesting too deep); they never quote the body.
func ParseMessage(body []byte) (Message, error) {
	if err := providers.CheckJSONDepth(body); err != nil {
		return nil, err
	}
	if !utf8.Valid(body) {
		return nil, malformed("body is not valid UTF-8")
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, malformed("body is not a JSON object")
	}
	m := Message{}
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, malformed("body is not a JSON object")
		}
		key, _ := tok.(string)
		if seen[key] {
			if known(key) {
				return nil, malformed("key %s appears twice", key)
			}
			return nil, malformed("a key appears twice")
		}
		seen[key] = true
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, malformed("body is not a JSON object")
		}
		if !known(key) || string(raw) == "null" {
			continue
		}
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, malformed("%s is not a string", key)
		}
		m[key] = s
	}
	if tok, err := dec.Token(); err != nil || tok != json.Delim('}') {
		return nil, malformed("body is not a JSON object")
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, malformed("data after the JSON object")
	}
	return m, nil
}
