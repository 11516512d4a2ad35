package providers_test

import (
	"crypto"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/hookline/hookline/providers"
)

// acme is a minimal adapter: the sender signs the raw body with
// HMAC-SHA256, hex in Acme-Signature, and names the event in Acme-Event-Id
// (not signed: a real adapter would then also be a ContentKeyer).
type acme struct{ keys [][]byte }

func (a *acme) Verify(r *providers.Request) error {
	h := strings.TrimSpace(r.Header.Get("Acme-Signature"))
	if h == "" {
		return providers.ErrNoSignature
	}
	sig, err := hex.DecodeString(h)
	if err != nil || !providers.MatchHMAC(crypto.SHA256, a.keys, [][]byte{sig}, r.Body) {
		return fmt.Errorf("%w: Acme-Signature does not match", providers.ErrInvalidSignature)
	}
	return nil
}

func (a *acme) Resolve(r *providers.Request) (providers.Event, error) {
	id := strings.TrimSpace(r.Header.Get("Acme-Event-Id"))
	if id == "" {
		return providers.Event{}, fmt.Errorf("%w: Acme-Event-Id header is empty", providers.ErrNoEventID)
	}
	return providers.Event{ID: id, Type: r.Header.Get("Acme-Event-Type")}, nil
}

// newAcme is acme's factory: hookline calls it once per source, with that
// source's secrets. The adapter's package registers it from init, under the
// name a source gives in its provider field:
//
//	func init() { providers.Register("acme", newAcme) }
func newAcme(cfg providers.Config) (providers.Provider, error) {
	if len(cfg.Secrets) == 0 {
		return nil, errors.New("secrets: at least one secret is required")
	}
	return &acme{keys: providers.SecretKeys(cfg.Secrets)}, nil
}

// An adapter verifies each delivery against every secret of its source and
// resolves the event's id and type; ingest answers its sentinel errors (401
// for the signature errors, 400 for ErrNoEventID).
func Example_adapter() {
	p, err := newAcme(providers.Config{Source: "acme", Secrets: []string{"new-secret", "old-secret"}})
	if err != nil {
		panic(err)
	}
	body := []byte(`{"order":42}`)
	signed := func(secret string) *providers.Request {
		sig := hex.EncodeToString(providers.HMAC(crypto.SHA256, []byte(secret), body))
		return &providers.Request{Body: body, Header: http.Header{
			"Acme-Signature": {sig}, "Acme-Event-Id": {"ev_1"}, "Acme-Event-Type": {"order.paid"}}}
	}

	fmt.Println(p.Verify(signed("old-secret")))                                      // rotation: any configured secret
	fmt.Println(errors.Is(p.Verify(signed("wrong")), providers.ErrInvalidSignature)) // a 401
	fmt.Println(errors.Is(p.Verify(&providers.Request{Body: body, Header: http.Header{}}), providers.ErrNoSignature))
	ev, err := p.Resolve(signed("new-secret"))
	fmt.Println(ev.ID, ev.Type, err)
	// Output:
	// <nil>
	// true
	// true
	// ev_1 order.paid <nil>
}
