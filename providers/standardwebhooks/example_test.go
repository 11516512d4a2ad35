package standardwebhooks_test

import (
	"fmt"
	"net/http"
	"time"

	"github.com/hookline/hookline/providers/standardwebhooks"
)

// Signing a forward for a destination that verifies Standard Webhooks: decode
// the `whsec_` secret once, then set the three webhook-* headers per request.
func ExampleSetHeaders() {
	key, err := standardwebhooks.DecodeSecret("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
	if err != nil {
		panic(err)
	}
	h := http.Header{}
	standardwebhooks.SetHeaders(h, key, "msg_p5jXN8AQM9LWM0D4loKWxJek", time.Unix(1614265330, 0), []byte(`{"test": 2432232314}`))
	fmt.Println(h.Get("webhook-id"))
	fmt.Println(h.Get("webhook-timestamp"))
	fmt.Println(h.Get("webhook-signature"))
	// Output:
	// msg_p5jXN8AQM9LWM0D4loKWxJek
	// 1614265330
	// v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=
}
