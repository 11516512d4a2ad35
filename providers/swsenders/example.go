package swsenders

import (
	"encoding/json"
	"net/http"
	"strings"
	"time"

	"github.com/hookline/hookline/providers"
	"github.com/hookline/hookline/providers/standardwebhooks"
)

// Sample returns the sender's example delivery for event id and type (typ
// "" means the example's), unsigned: id in the webhook-id header, the type
// in the body.
func (s *Sender) Sample(id, typ string) *providers.Request {
	if typ == "" {
		typ = s.ExampleType
	}
	b, _ := json.Marshal(typ)
	body := strings.ReplaceAll(s.ExampleBody, "${type}", string(b[1:len(b)-1]))
	h := http.Header{"Content-Type": {"application/json"}}
	h.Set(standardwebhooks.HeaderID, id)
	if strings.HasPrefix(s.EventType, "header:") {
		h.Set(strings.TrimPrefix(s.EventType, "header:"), typ)
	}
	return &providers.Request{Body: []byte(body), Header: h}
}

// Lookup returns the registered Sender named name.
func Lookup(name string) (*Sender, bool) {
	for _, s := range Senders {
		if s.Name == name {
			return s, true
		}
	}
	return nil, false
}

// parseTime reads an RFC 3339 time or unix seconds; zero when it cannot.
func parseTime(s string) time.Time {
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t
	}
	return time.Time{}
}
