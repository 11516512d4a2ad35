// Package providers is hookline's provider-adapter layer: the contract every
// adapter implements (Provider, and the optional Signer, Splitter, Responder,
// SignatureStatuser, SecretHeaderer, ContentKeyer and Describer), the registry that maps the `provider:`
// name of a source to its adapter, the sentinel errors ingest maps to HTTP
// statuses, and the key resolvers (`header:`, `json:`, `form:`,
// `body:sha256`) with which a source overrides an adapter's event id or type.
//
// The adapters shipped with hookline live in the sub-packages (stripe,
// github, adyen, …) and register themselves; import them all for their side
// effect with
//
//	import _ "github.com/hookline/hookline/providers/all"
//
// # How ingest uses an adapter
//
// For every POST /webhooks/{source}, ingest builds a Request (the exact raw
// body, the headers, the URL the sender called) and then:
//
//  1. Verify. A signature error (ErrNoSignature, ErrInvalidSignature,
//     ErrTimestampTooOld, ErrTimestampTooNew) is a 401, or the status a
//     SignatureStatuser chooses (GoCardless: 498); ErrUnavailable (a key or
//     certificate could not be fetched) is a 503 so that the sender retries;
//     any other error from Verify is a 401 too: a body too garbled to find
//     the signature in has no valid signature.
//  2. Respond, for a Responder: a handshake it handles (Slack's
//     url_verification) is answered as it says, and neither stored nor
//     forwarded.
//  3. Split, for a Splitter (Adyen, GoCardless): each item is its own event,
//     its bytes a sub-slice of the body. Otherwise Resolve, or the source's
//     key resolvers where it configures them. An empty event id
//     (ErrNoEventID) or an unreadable body (ErrMalformed) is a 400.
//  4. Store the body and enqueue one job per event, in one transaction.
//
// # Writing an adapter
//
// An adapter is one package under providers/ plus one line in
// providers/all/all.go. A minimal one, for a sender that puts the hex
// HMAC-SHA256 of the body in X-Acme-Signature and the event id in the body's
// "id":
//
//	package acme
//
//	const Name = "acme"
//
//	func init() {
//		providers.Register(Name, func(cfg providers.Config) (providers.Provider, error) { return New(cfg) })
//	}
//
//	type Verifier struct{ secrets [][]byte }
//
//	func New(cfg providers.Config) (*Verifier, error) {
//		if len(cfg.Secrets) == 0 {
//			return nil, fmt.Errorf("secrets: at least one secret is required")
//		}
//		if err := cfg.Decode(&struct{}{}); err != nil { // no acme: block
//			return nil, fmt.Errorf("acme: %w", err)
//		}
//		v := &Verifier{}
//		for _, s := range cfg.Secrets {
//			v.secrets = append(v.secrets, []byte(s))
//		}
//		return v, nil
//	}
//
//	func (v *Verifier) Verify(r *providers.Request) error {
//		value := r.Header.Get("X-Acme-Signature")
//		if value == "" {
//			return fmt.Errorf("%w: X-Acme-Signature header is required", providers.ErrNoSignature)
//		}
//		sig, err := hex.DecodeString(value)
//		if err != nil || len(sig) != sha256.Size {
//			return fmt.Errorf("%w: X-Acme-Signature is not a hex HMAC-SHA256", providers.ErrInvalidSignature)
//		}
//		for _, s := range v.secrets { // every secret: rotation
//			m := hmac.New(sha256.New, s)
//			m.Write(r.Body) // the raw bytes, never a re-encoding
//			if hmac.Equal(m.Sum(nil), sig) {
//				return nil
//			}
//		}
//		return fmt.Errorf("%w: X-Acme-Signature does not match", providers.ErrInvalidSignature)
//	}
//
//	func (v *Verifier) Resolve(r *providers.Request) (providers.Event, error) {
//		f, err := providers.JSONFields(r.Body, "id", "type")
//		if err != nil {
//			return providers.Event{}, err // ErrMalformed
//		}
//		if f[0] == "" {
//			return providers.Event{}, fmt.Errorf("%w: body has no \"id\"", providers.ErrNoEventID)
//		}
//		return providers.Event{ID: f[0], Type: f[1]}, nil
//	}
//
// The rules every Verify follows: verify the raw request bytes; compare in
// constant time (hmac.Equal, subtle.ConstantTimeCompare); accept when any
// configured secret matches any signature the request carries, and ignore
// signature schemes or versions you do not know rather than fall back to a
// weaker one; check a signed timestamp in both directions with CheckTimestamp
// and the source's tolerance (Config.Tolerance, zero meaning your default);
// return the sentinel errors above, wrapped with detail that never says which
// secret or which byte failed; never panic, whatever the headers and body.
// Keep the cost of a delivery proportional to its size whatever it lists:
// compute each MAC once per secret and compare it with every signature, and
// cap the signatures considered (Braintree, Standard Webhooks). A JSON body
// that Verify parses before its signature is checked (Adyen's items, Mercado
// Pago's unsigned body) goes through CheckJSONDepth first, and ErrTooDeep is
// returned as it is.
// Read the clock through Config.NowFunc and fetch keys with Config.HTTPClient,
// so that tests control both. New validates the configuration and names the
// bad field relative to the source ("secrets[1]: …", "acme.region: …"): the
// provider block is decoded by Config.Decode, which rejects unknown fields.
//
// Then add what applies of the optional interfaces:
//
//   - Signer: sign a body as the provider does, so that `hookline send` and
//     the tests can produce deliveries (PayPal and Plaid cannot: only they
//     hold their keys).
//   - Describer: the signature headers, the default event id, the default
//     tolerance and whether the signature covers the default event id
//     (IDSigned), for `hookline providers` and the README.
//   - ContentKeyer: when the default event id is not signed (a header such as
//     X-GitHub-Delivery), a digest of what the signature does cover
//     (ContentDigest), so that a delivery replayed under a fresh id is a
//     duplicate. Every adapter with IDSigned false implements it, unless it
//     signs nothing to key on (Xendit's static token, Mollie's classic
//     deliveries under allow_unsigned, the generic hmac adapter, which has
//     no default id).
//   - SecretHeaderer: request headers that carry a credential rather than a
//     signature (Xendit's X-Callback-Token), which ingest never stores.
//   - Splitter: a delivery that carries several events. Verify checks the
//     whole delivery (every item's signature) first; Split returns each item
//     with its exact bytes, a sub-slice of Request.Body, and their offset.
//   - Responder: a handshake the provider expects answered without storing it.
//   - SignatureStatuser: a status other than 401 for a failed verification.
//
// # Default event ids
//
// Description.DefaultEventID is written in key-resolver notation (see
// ParseKeyResolver). A simple id is one resolver: "json:id",
// "header:X-Shopify-Event-Id", "body:sha256". A composite id, as the
// configuration reference writes it, joins its parts with ":", each part in
// braces and a resolver where one names it:
//
//	{json:pspReference}:{json:eventCode}:{json:success}          Adyen, per item
//	{header:X-GitHub-Hook-ID}:{header:X-GitHub-Delivery}         GitHub
//	{json:meta.event_name}:{json:data.type}:{json:data.id}:{json:data.attributes.updated_at}   Lemon Squeezy
//
// Where no resolver reaches a part, it is a plain name that the adapter's
// package documents: Braintree's {kind}:{subject id}:{timestamp} are read from
// the <notification> XML inside form:bt_payload (the subject id is the <id>
// of the first element under <subject>); Mercado Pago's fallback
// {data.id}:{type} takes data.id from the URL's query, else the body. Three
// more marks: "form:A|B" is the first of the fields present, a part in
// brackets is left out when empty, and a fallback follows ", else ", as in
// Twilio's
//
//	header:I-Twilio-Idempotency-Token, else {form:MessageSid|CallSid|SmsSid}[:{form:MessageStatus|CallStatus}]
//
// For a Splitter the json paths are relative to each item. An empty
// DefaultEventID means the adapter has none: its sources must configure
// event_id (the generic hmac adapter).
//
// # Testing an adapter
//
// Run the conformance suite, providertest.Run, under the adapter's registered
// name:
//
//	func TestConformance(t *testing.T) {
//		providertest.Run(t, providertest.Harness{
//			Provider: acme.Name,
//			Secrets:  []string{"acme_secret_one", "acme_secret_two"},
//			Delivery: func(id string) *providers.Request {
//				return providertest.Request(`{"id":"` + id + `","type":"order.paid"}`)
//			},
//			WantType: "order.paid",
//		})
//	}
//
// It checks the sign→verify round trip (through your Signer, or Harness.Sign),
// unsigned and tampered deliveries, wrong and rotated secrets, missing and
// garbled headers, fallback headers, stale and future timestamps
// (Features.Timestamp), several signatures in one header
// (Features.MultipleSignatures), and event resolution, composite ids included
// (Harness.WantID). Then, in the adapter's own tests:
//
//   - an oracle: the provider's published test vector, or its official SDK as
//     a test-only dependency, in both directions (the SDK accepts what you
//     sign, you accept what the SDK signs); docs/providers.md lists them;
//   - a fuzz target for every header parser (FuzzParseHeader): no panics, and
//     a signature it accepts always has the MAC's size;
//   - a case in ingest/providers_e2e_test.go and a sample in
//     cmd/hookline/send.go, which check the adapter end to end through the
//     HTTP server, Postgres and `hookline send`.
package providers
