package hmacspec

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"

	"github.com/hookline/hookline/providers"
)

// Sample returns the Spec's Example for event id and type (typ "" means
// the example's type), unsigned: ${id} and ${type} replaced, escaped for
// the body's format.
func (s *Spec) Sample(id, typ string) *providers.Request {
	if typ == "" {
		typ = s.Example.Type
	}
	esc := func(v string) string {
		if s.Example.Form {
			return url.QueryEscape(v)
		}
		b, _ := json.Marshal(v)
		return string(b[1 : len(b)-1])
	}
	body := strings.NewReplacer("${id}", esc(id), "${type}", esc(typ)).Replace(s.Example.Body)
	h := http.Header{"Content-Type": {"application/json"}}
	if s.Example.Form {
		h.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	plain := strings.NewReplacer("${id}", id, "${type}", typ)
	for i := 0; i+1 < len(s.Example.Headers); i += 2 {
		h.Set(s.Example.Headers[i], plain.Replace(s.Example.Headers[i+1]))
	}
	u, _ := url.Parse("https://hooks.example.com/webhooks/" + s.Name)
	return &providers.Request{Body: []byte(body), Header: h, URL: u}
}

// SampleID is the event id Sample(id, typ) resolves to: "" when id is "",
// the body's hash for a body:sha256 id.
func (s *Spec) SampleID(id, typ string) string {
	if s.EventID == "body:sha256" {
		sum := sha256.Sum256(s.Sample(id, typ).Body)
		return hex.EncodeToString(sum[:])
	}
	if id == "" {
		return ""
	}
	if typ == "" {
		typ = s.Example.Type
	}
	tmpl := s.Example.ID
	if tmpl == "" {
		tmpl = "${id}"
	}
	return strings.NewReplacer("${id}", id, "${type}", typ).Replace(tmpl)
}

// Lookup returns the registered Spec named name.
func Lookup(name string) (*Spec, bool) {
	for _, s := range Specs {
		if s.Name == name {
			return s, true
		}
	}
	return nil, false
}

func init() {
	for _, s := range Specs {
		Register(s)
	}
}
