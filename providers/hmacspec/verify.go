package hmacspec

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"hash"
	"net/http"
	"strings"
	"time"

	"github.com/hookline/hookline/providers"
)

// Spec returns the description the Verifier runs.
func (v *Verifier) Spec() *Spec { return v.spec }

// Verify implements providers.Verifier. It allocates nothing on success:
// the signatures are decoded into, and the MACs computed with, pooled
// state (Verifier.scratch).
func (v *Verifier) Verify(r *providers.Request) error {
	if v.spec.Mode != MAC {
		return v.verifyToken(r)
	}
	value := headerValue(r.Header, v.header)
	if value == "" && !v.anyExtra(r.Header) {
		return fmt.Errorf("%w: %s header is required", providers.ErrNoSignature, v.spec.Header)
	}
	sc := v.getScratch()
	defer v.putScratch(sc)
	ts, err := v.signatures(r.Header, value, &sc.set)
	if err != nil {
		return err
	}
	if v.spec.stampHeader() {
		if ts = headerValue(r.Header, v.stampHeader); ts == "" {
			return fmt.Errorf("%w: %s header is required", providers.ErrNoSignature, v.spec.TimestampHeader)
		}
	}
	var id string
	if v.idHeader != "" {
		if id = headerValue(r.Header, v.idHeader); id == "" {
			return fmt.Errorf("%w: %s header is required", providers.ErrNoSignature, v.spec.IDHeader)
		}
	}
	if v.spec.timed() {
		t, err := v.spec.parseStamp(ts)
		if err != nil {
			return err
		}
		if err := providers.CheckTimestamp(t, v.now(), v.tolerance); err != nil {
			return fmt.Errorf("%w (tolerance %s)", err, v.tolerance)
		}
	}
	if v.match(sc, r, ts, id) {
		return nil
	}
	return fmt.Errorf("%w: %s does not match", providers.ErrInvalidSignature, v.spec.Header)
}

// anyExtra reports whether h carries one of the extra signature headers.
func (v *Verifier) anyExtra(h http.Header) bool {
	for _, name := range v.extraHeaders {
		if headerValue(h, name) != "" {
			return true
		}
	}
	return false
}

// match reports whether one of sc's signatures is the MAC of the signed
// content under one of the secrets: one MAC per secret, compared with
// every signature in constant time.
func (v *Verifier) match(sc *scratch, r *providers.Request, ts, id string) bool {
	size := v.spec.hash().Size()
	for _, m := range sc.macs {
		sum := v.sum(m, sc, r, ts, id)
		for i := range sc.set.n {
			if hmac.Equal(sum, sc.set.get(i, size)) {
				return true
			}
		}
	}
	return false
}

// sum returns the HMAC m (keyed with one secret) computes of the signed
// content, written segment by segment (the body is never copied), in
// sc.sum.
func (v *Verifier) sum(m hash.Hash, sc *scratch, r *providers.Request, ts, id string) []byte {
	m.Reset()
	for _, g := range v.segs {
		switch g.kind {
		case segLiteral:
			m.Write(g.literal)
		case segBody:
			m.Write(r.Body)
		case segStamp:
			sc.tmp = append(sc.tmp[:0], ts...)
			m.Write(sc.tmp)
		case segID:
			sc.tmp = append(sc.tmp[:0], id...)
			m.Write(sc.tmp)
		case segMethod:
			m.Write(methodPOST)
		case segURL:
			sc.tmp = append(sc.tmp[:0], v.requestURL(r)...)
			m.Write(sc.tmp)
		}
	}
	return m.Sum(sc.sum[:0])
}

var methodPOST = []byte(http.MethodPost)

// signatures parses the signature header and the extra headers into set:
// the timestamp the signature header carries, and every signature, at
// most MaxSignatures in all. An extra header that cannot be read is
// skipped, and so is the signature header when there are extra headers.
func (v *Verifier) signatures(h http.Header, value string, set *sigSet) (string, error) {
	var ts string
	if value != "" {
		var err error
		if ts, err = v.spec.parseInto(value, set); err != nil && (len(v.extraHeaders) == 0 || set.over) {
			return "", err
		}
	}
	for _, name := range v.extraHeaders {
		if x := headerValue(h, name); x != "" {
			if _, err := v.spec.parseInto(x, set); err != nil && set.over {
				return "", err
			}
		}
	}
	if set.n == 0 {
		return "", fmt.Errorf("%w: no usable signature in %s", providers.ErrInvalidSignature, v.spec.Header)
	}
	return ts, nil
}

// message returns the signed content's parts, appended to buf: the
// template with its placeholders replaced. The body is never copied.
func (v *Verifier) message(buf [][]byte, r *providers.Request, ts, id string) [][]byte {
	for _, g := range v.segs {
		switch g.kind {
		case segLiteral:
			buf = append(buf, g.literal)
		case segBody:
			buf = append(buf, r.Body)
		case segStamp:
			buf = append(buf, []byte(ts))
		case segID:
			buf = append(buf, []byte(id))
		case segMethod:
			buf = append(buf, []byte(http.MethodPost))
		case segURL:
			buf = append(buf, []byte(v.requestURL(r)))
		}
	}
	return buf
}

// requestURL is the URL {url} stands for.
func (v *Verifier) requestURL(r *providers.Request) string {
	if v.url != "" {
		return v.url
	}
	if r.URL == nil {
		return ""
	}
	return r.URL.String()
}

// verifyToken checks a Token or Basic header against every secret, each
// compared in constant time through its SHA-256 (so that lengths do not
// leak either).
func (v *Verifier) verifyToken(r *providers.Request) error {
	value := strings.TrimSpace(r.Header.Get(v.spec.Header))
	if value == "" {
		return fmt.Errorf("%w: %s header is required", providers.ErrNoSignature, v.spec.Header)
	}
	if v.spec.Mode == Basic {
		scheme, cred, ok := strings.Cut(value, " ")
		if !ok || !strings.EqualFold(scheme, "Basic") {
			return fmt.Errorf("%w: %s is not Basic credentials", providers.ErrInvalidSignature, v.spec.Header)
		}
		raw, err := base64.StdEncoding.DecodeString(strings.TrimSpace(cred))
		if err != nil {
			return fmt.Errorf("%w: %s is not Basic credentials", providers.ErrInvalidSignature, v.spec.Header)
		}
		value = string(raw)
	}
	got := sha256.Sum256([]byte(value))
	for _, want := range v.tokens {
		if hmac.Equal(got[:], want[:]) {
			return nil
		}
	}
	return fmt.Errorf("%w: %s does not match", providers.ErrInvalidSignature, v.spec.Header)
}

// Resolve implements providers.Resolver with the Spec's EventID, EventType
// and EventTime.
func (v *Verifier) Resolve(r *providers.Request) (providers.Event, error) {
	return v.res.resolve(r)
}

// Sign implements providers.Signer with the first secret, at now: the
// timestamp (if any) in the Spec's unit, the signature header in its
// layout. The IDHeader, when the template signs one, must already be set.
// A token scheme sets its header to the secret.
func (v *Verifier) Sign(r *providers.Request, now time.Time) error {
	switch v.spec.Mode {
	case Token:
		r.Header.Set(v.spec.Header, string(v.keys[0]))
		return nil
	case Basic:
		r.Header.Set(v.spec.Header, "Basic "+base64.StdEncoding.EncodeToString(v.keys[0]))
		return nil
	}
	var ts string
	if v.spec.hasStamp() {
		ts = v.spec.formatStamp(now)
	}
	if v.spec.stampHeader() {
		r.Header.Set(v.spec.TimestampHeader, ts)
	}
	sc := v.getScratch()
	sig := v.spec.encode(v.sum(sc.macs[0], sc, r, ts, r.Header.Get(v.spec.IDHeader)))
	v.putScratch(sc)
	switch v.spec.Layout {
	case Pairs:
		if v.spec.TimestampKey != "" {
			sig = v.spec.TimestampKey + "=" + ts + "," + v.spec.SignatureKeys[0] + "=" + sig
		} else {
			sig = v.spec.SignatureKeys[0] + "=" + sig
		}
	case Leading:
		sig = ts + "," + sig
	}
	r.Header.Set(v.spec.Header, sig)
	return nil
}

// SecretHeaders implements providers.SecretHeaderer: a token scheme's
// header carries the secret itself.
func (v *Verifier) SecretHeaders() []string {
	if v.spec.Mode == MAC {
		return nil
	}
	return []string{v.spec.Header}
}

// Describe implements providers.Describer. Headers are the signature
// header, then the timestamp and id headers the template signs; the extra
// signature headers are the fallbacks.
func (v *Verifier) Describe() providers.Description {
	d := providers.Description{
		Headers:         []string{v.spec.Header},
		FallbackHeaders: v.spec.ExtraHeaders,
		DefaultEventID:  v.spec.EventID,
		IDSigned:        v.idSigned,
		// A spec names a type resolver only for schemes whose every event
		// has one.
		DefaultEventType: v.spec.EventType,
	}
	if v.spec.stampHeader() {
		d.Headers = append(d.Headers, v.spec.TimestampHeader)
	}
	if v.spec.IDHeader != "" {
		d.Headers = append(d.Headers, v.spec.IDHeader)
	}
	if v.spec.timed() {
		d.DefaultTolerance = v.spec.Tolerance
	}
	return d
}

// Register registers s under s.Name, after checking it.
func Register(s *Spec) {
	RegisterWith(s, func(cfg providers.Config) (providers.Provider, error) { return New(s, cfg) })
}

// RegisterWith registers an adapter built on s (code around the engine: a
// handshake, settings of its own) under s.Name, after checking s.
func RegisterWith(s *Spec, build providers.Factory) {
	if err := s.Validate(); err != nil {
		panic("hmacspec: " + err.Error())
	}
	providers.Register(s.Name, build)
}

// SigningKey returns the first secret's key: the one Sign uses, and the
// one handshakes answer with (Zoom's encryptedToken).
func (v *Verifier) SigningKey() []byte { return v.keys[0] }
