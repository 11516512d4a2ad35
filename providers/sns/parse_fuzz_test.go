package sns

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/hookline/hookline/providers"
)

// FuzzParseMessage fuzzes the body parser: no panics; its errors wrap
// ErrMalformed; an accepted body is one JSON object whose known keys it
// reports exactly as encoding/json reads them (strings; null is absent),
// with no key twice.
func FuzzParseMessage(f *testing.F) {
	f.Add([]byte(`{
  "Type" : "Notification",
  "MessageId" : "22b80b92-fdea-4c2c-8f9d-bdfb0c7bf324",
  "TopicArn" : "arn:aws:sns:us-west-2:123456789012:MyTopic",
  "Subject" : "My First Message",
  "Message" : "Hello world!",
  "Timestamp" : "2012-05-02T00:54:06.655Z",
  "SignatureVersion" : "1",
  "Signature" : "EXAMPLEw6JRN...",
  "SigningCertURL" : "https://sns.us-west-2.amazonaws.com/SimpleNotificationService-f3ecfb7224c7233fe7bb5f59f96de52f.pem",
  "UnsubscribeURL" : "https://sns.us-west-2.amazonaws.com/?Action=Unsubscribe&SubscriptionArn=arn:aws:sns:us-west-2:123456789012:MyTopic:c9135db0-26c4-47ec-8998-413945fb5a96"
}`))
	f.Add([]byte(`{"Type":"SubscriptionConfirmation","Token":"t","SubscribeURL":null,"Subject":"\u00e9\ud800","x":[{"y":{}}]}`))
	f.Add([]byte(`{"Message":"a","Mess\u0061ge":"b"}`))
	f.Add([]byte(`{"Message":1} `))
	f.Add([]byte(`[]`))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, body []byte) {
		m, err := ParseMessage(body)
		if err != nil {
			if !errors.Is(err, providers.ErrMalformed) {
				t.Fatalf("unexpected error kind: %v", err)
			}
			return
		}
		var all map[string]any
		if err := json.Unmarshal(body, &all); err != nil {
			t.Fatalf("accepted what encoding/json refuses: %v", err)
		}
		for k, v := range m {
			if !known(k) || all[k] != v {
				t.Fatalf("key %q: parsed %q, encoding/json %v", k, v, all[k])
			}
		}
		for k, v := range all {
			if _, isString := v.(string); known(k) && isString {
				if _, ok := m[k]; !ok {
					t.Fatalf("key %q dropped", k)
				}
			}
		}
		_ = m.StringToSign()
	})
}
