package sendgrid_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"fmt"
	"net/http"
	"time"

	"github.com/hookline/hookline/providers"
	"github.com/hookline/hookline/providers/sendgrid"
)

// A source is configured with SendGrid's Verification Key (the public key);
// a test that plays SendGrid holds the private half and signs with
// SignWithKey. Each event of the delivered array is its own event.
func ExampleSignWithKey() {
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		panic(err)
	}
	verificationKey, err := sendgrid.EncodePublicKey(&priv.PublicKey) // as SendGrid shows it
	if err != nil {
		panic(err)
	}
	now := time.Unix(1796036400, 0)
	v, err := sendgrid.New(providers.Config{Source: "sendgrid", Secrets: []string{verificationKey}, Now: func() time.Time { return now }})
	if err != nil {
		panic(err)
	}

	req := &providers.Request{Header: http.Header{"Content-Type": {"application/json"}},
		Body: []byte("[{\"email\":\"jon@example.com\",\"event\":\"processed\",\"sg_event_id\":\"cHJvY2Vzc2VkLTE\",\"timestamp\":1796036390},\r\n" +
			"{\"email\":\"jon@example.com\",\"event\":\"delivered\",\"sg_event_id\":\"ZGVsaXZlcmVkLTE\",\"timestamp\":1796036395}]\r\n")}
	if err := sendgrid.SignWithKey(req, priv, now); err != nil {
		panic(err)
	}
	fmt.Println(req.Header.Get(sendgrid.HeaderTimestamp))
	fmt.Println(v.Verify(req))

	items, err := v.Split(req)
	if err != nil {
		panic(err)
	}
	for _, it := range items {
		fmt.Println(it.Event.ID, it.Event.Type, it.Event.Time.Unix(), string(req.Body[it.Offset:it.Offset+12]))
	}
	// Output:
	// 1796036400
	// <nil>
	// cHJvY2Vzc2VkLTE processed 1796036390 {"email":"jo
	// ZGVsaXZlcmVkLTE delivered 1796036395 {"email":"jo
}
