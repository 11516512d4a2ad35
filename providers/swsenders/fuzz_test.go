package swsenders_test

import (
	"net/http"
	"testing"

	"github.com/hookline/hookline/providers"
	"github.com/hookline/hookline/providers/standardwebhooks"
	"github.com/hookline/hookline/providers/swsenders"
)

// FuzzResolve runs every sender's resolvers (the webhook-id, the type from
// the body or a header, the time) over hostile bodies and headers: no
// panic, and a resolved event's id is the webhook-id header.
func FuzzResolve(f *testing.F) {
	f.Add(uint8(0), []byte(`{"type":"user.created","timestamp":"2026-11-30T12:00:00Z"}`), "msg_1", "scenario.run")
	f.Add(uint8(3), []byte(`{"created":{},"event_type":[1]}`), "", "")
	f.Add(uint8(5), []byte("{\"type\":\"\xff\"}"), "\xe2\x80\xa8", "\x00")
	f.Fuzz(func(t *testing.T, which uint8, body []byte, id, topic string) {
		s := swsenders.Senders[int(which)%len(swsenders.Senders)]
		p, err := providers.New(s.Name, providers.Config{Secrets: []string{"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"}})
		if err != nil {
			t.Fatal(err)
		}
		r := &providers.Request{Body: body, Header: http.Header{}}
		r.Header.Set(standardwebhooks.HeaderID, id)
		r.Header.Set("Webhook-Topic", topic)
		ev, err := p.Resolve(r)
		if err == nil && ev.ID != r.Header.Get(standardwebhooks.HeaderID) {
			t.Fatalf("%s: id %q, header %q", s.Name, ev.ID, id)
		}
	})
}
