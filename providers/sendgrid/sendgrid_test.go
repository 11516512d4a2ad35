package sendgrid_test

import (
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/tidwall/gjson"

	"github.com/hookline/hookline/providers"
	"github.com/hookline/hookline/providers/providertest"
	"github.com/hookline/hookline/providers/sendgrid"
)

var _ providers.Provider = (*sendgrid.Verifier)(nil)
var _ providers.Splitter = (*sendgrid.Verifier)(nil)
var _ providers.Describer = (*sendgrid.Verifier)(nil)

func newKey(t testing.TB) *ecdsa.PrivateKey {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	return k
}

func verificationKey(t testing.TB, k *ecdsa.PrivateKey) string {
	t.Helper()
	s, err := sendgrid.EncodePublicKey(&k.PublicKey)
	require.NoError(t, err)
	return s
}

// keys are two verification keys of the test's own (rotation) and a third
// that no source configures.
type keys struct {
	one, two, other *ecdsa.PrivateKey
	pubOne, pubTwo  string
}

func newKeys(t testing.TB) *keys {
	k := &keys{one: newKey(t), two: newKey(t), other: newKey(t)}
	k.pubOne, k.pubTwo = verificationKey(t, k.one), verificationKey(t, k.two)
	return k
}

// eventTime is the first sample event's timestamp.
const eventTime = 1796036390

// sample is a delivery of three events as SendGrid lays them out (one event
// a line, CRLF-terminated), the first one's sg_event_id being id.
func sample(id string) *providers.Request {
	return providertest.Request(`[{"email":"jon@example.com","event":"delivered","ip":"168.1.1.1","response":"250 OK","sg_event_id":"` + id + `","sg_message_id":"14c5d75ce93.dfd.64b469.filter0001.16648.5515E0B88.0","smtp-id":"<14c5d75ce93.dfd.64b469@ismtpd-555>","timestamp":` + strconv.Itoa(eventTime) + `,"tls":1},` + "\r\n" +
		`{"email":"jon@example.com","event":"open","ip":"255.255.255.255","sg_event_id":"b3Blbi0xMjM0NTY3ODktMTIzNDU2Nzg5","sg_machine_open":false,"sg_message_id":"14c5d75ce93.dfd.64b469.filter0001.16648.5515E0B88.0","timestamp":1796036400,"useragent":"Mozilla/5.0"},` + "\r\n" +
		`{"email":"jon@example.com","event":"click","sg_event_id":"Y2xpY2stMTIzNDU2Nzg5LTEyMzQ1Njc4OQ","sg_message_id":"14c5d75ce93.dfd.64b469.filter0001.16648.5515E0B88.0","timestamp":1796036410,"url":"https://example.com/pricing","url_offset":{"index":0,"type":"html"}}]` + "\r\n")
}

func harness(k *keys) providertest.Harness {
	return providertest.Harness{
		Provider: sendgrid.Name,
		Secrets:  []string{k.pubOne, k.pubTwo},
		Delivery: sample,
		WantType: "delivered",
		WantTime: time.Unix(eventTime, 0),
		// No default window: the conformance suite checks one set on the source.
		Tolerance: 5 * time.Minute,
		// The adapter cannot sign: the test signs with the private half of
		// the verification key it is given.
		Sign: func(t testing.TB, secret string, req *providers.Request, now time.Time) {
			priv := map[string]*ecdsa.PrivateKey{k.pubOne: k.one, k.pubTwo: k.two}[secret]
			require.NotNil(t, priv, "no private key for that verification key")
			require.NoError(t, sendgrid.SignWithKey(req, priv, now))
		},
		WrongSigner: func(t testing.TB, req *providers.Request) {
			require.NoError(t, sendgrid.SignWithKey(req, k.other, providertest.Now))
		},
		Features: providertest.Features{Timestamp: true},
	}
}

func TestConformance(t *testing.T) {
	t.Parallel()
	// The adapter holds public keys only: it cannot sign, the harness does.
	_, signs := any(&sendgrid.Verifier{}).(providers.Signer)
	require.False(t, signs)
	providertest.Run(t, harness(newKeys(t)))
}

func build(t *testing.T, secrets ...string) *sendgrid.Verifier {
	t.Helper()
	v, err := sendgrid.New(providers.Config{Source: "test", Secrets: secrets, Now: func() time.Time { return providertest.Now }})
	require.NoError(t, err)
	return v
}

func signed(t *testing.T, priv *ecdsa.PrivateKey, at time.Time) *providers.Request {
	t.Helper()
	req := sample("ZGVsaXZlcmVkLTAtMTIzNDU2Nzg5")
	require.NoError(t, sendgrid.SignWithKey(req, priv, at))
	return req
}

func TestVerify(t *testing.T) {
	t.Parallel()
	k := newKeys(t)
	v := build(t, k.pubOne)

	genuine := signed(t, k.one, providertest.Now)
	require.NoError(t, v.Verify(genuine))
	require.Equal(t, strconv.FormatInt(providertest.Now.Unix(), 10), genuine.Header.Get(sendgrid.HeaderTimestamp))

	// Tampered body: one byte, or a byte more.
	bad := providertest.Clone(genuine)
	bad.Body[10] ^= 0x01
	require.ErrorIs(t, v.Verify(bad), providers.ErrInvalidSignature)
	bad = providertest.Clone(genuine)
	bad.Body = append(bad.Body, '\n')
	require.ErrorIs(t, v.Verify(bad), providers.ErrInvalidSignature)

	// Tampered timestamp, still within the tolerance: it is signed.
	bad = providertest.Clone(genuine)
	bad.Header.Set(sendgrid.HeaderTimestamp, strconv.FormatInt(providertest.Now.Unix()+1, 10))
	require.ErrorIs(t, v.Verify(bad), providers.ErrInvalidSignature)
	// The same seconds with a leading zero are other signed bytes.
	bad.Header.Set(sendgrid.HeaderTimestamp, "0"+genuine.Header.Get(sendgrid.HeaderTimestamp))
	require.ErrorIs(t, v.Verify(bad), providers.ErrInvalidSignature)

	// Wrong key.
	require.ErrorIs(t, v.Verify(signed(t, k.other, providertest.Now)), providers.ErrInvalidSignature)

	// No window by default: a retry signed days ago still verifies.
	require.Zero(t, v.Describe().DefaultTolerance)
	require.NoError(t, v.Verify(signed(t, k.one, providertest.Now.Add(-72*time.Hour))))
	require.NoError(t, v.Verify(signed(t, k.one, providertest.Now.Add(72*time.Hour))))
	// A source's tolerance bounds the age, both ways.
	win, err := sendgrid.New(providers.Config{Secrets: []string{k.pubOne}, Tolerance: 24 * time.Hour, Now: func() time.Time { return providertest.Now }})
	require.NoError(t, err)
	require.NoError(t, win.Verify(signed(t, k.one, providertest.Now.Add(-23*time.Hour))))
	require.NoError(t, win.Verify(signed(t, k.one, providertest.Now.Add(23*time.Hour))))
	require.ErrorIs(t, win.Verify(signed(t, k.one, providertest.Now.Add(-25*time.Hour))), providers.ErrTimestampTooOld)
	require.ErrorIs(t, win.Verify(signed(t, k.one, providertest.Now.Add(25*time.Hour))), providers.ErrTimestampTooNew)

	// Missing headers.
	for _, h := range []string{sendgrid.HeaderSignature, sendgrid.HeaderTimestamp} {
		bad = providertest.Clone(genuine)
		bad.Header.Del(h)
		require.ErrorIs(t, v.Verify(bad), providers.ErrNoSignature, h)
	}

	// Garbled signature and timestamp headers.
	sig := genuine.Header.Get(sendgrid.HeaderSignature)
	der, err := base64.StdEncoding.DecodeString(sig)
	require.NoError(t, err)
	garbled := []string{"!!!", sig + "=", sig + "A",
		base64.StdEncoding.EncodeToString(append(der, 0)), base64.StdEncoding.EncodeToString(der[:len(der)-1]),
		base64.StdEncoding.EncodeToString(make([]byte, 64)), // raw r||s, not DER
	}
	if strings.HasSuffix(sig, "=") { // DER of 70 or 71 bytes: padded
		garbled = append(garbled, strings.TrimRight(sig, "="))
	}
	if url := base64.URLEncoding.EncodeToString(der); url != sig {
		garbled = append(garbled, url)
	}
	for _, s := range garbled {
		bad = providertest.Clone(genuine)
		bad.Header.Set(sendgrid.HeaderSignature, s)
		require.ErrorIs(t, v.Verify(bad), providers.ErrInvalidSignature, s)
	}
	for _, ts := range []string{"abc", "-1", "+" + genuine.Header.Get(sendgrid.HeaderTimestamp), "1.5", "99999999999999999999", "1e9"} {
		bad = providertest.Clone(genuine)
		bad.Header.Set(sendgrid.HeaderTimestamp, ts)
		require.ErrorIs(t, v.Verify(bad), providers.ErrInvalidSignature, ts)
	}
}

// TestRotation: with two keys configured, a delivery signed by either
// verifies; with one, only its own.
func TestRotation(t *testing.T) {
	t.Parallel()
	k := newKeys(t)
	both := build(t, k.pubOne, k.pubTwo)
	require.NoError(t, both.Verify(signed(t, k.one, providertest.Now)))
	require.NoError(t, both.Verify(signed(t, k.two, providertest.Now)))
	require.ErrorIs(t, both.Verify(signed(t, k.other, providertest.Now)), providers.ErrInvalidSignature)
	require.ErrorIs(t, build(t, k.pubTwo).Verify(signed(t, k.one, providertest.Now)), providers.ErrInvalidSignature)
}

func TestParsePublicKey(t *testing.T) {
	t.Parallel()
	priv := newKey(t)
	der, err := x509.MarshalPKIXPublicKey(&priv.PublicKey)
	require.NoError(t, err)
	b64 := base64.StdEncoding.EncodeToString(der)
	pemKey := string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}))

	for name, s := range map[string]string{
		"as SendGrid shows it": b64,
		"surrounding space":    "  " + b64 + "\n",
		"PEM":                  pemKey,
		"PEM body, no armour":  b64[:64] + "\n" + b64[64:],
	} {
		pub, err := sendgrid.ParsePublicKey(s)
		require.NoError(t, err, name)
		require.True(t, pub.Equal(&priv.PublicKey), name)
	}

	p384, err := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	require.NoError(t, err)
	p384DER, err := x509.MarshalPKIXPublicKey(&p384.PublicKey)
	require.NoError(t, err)
	rsaKey, err := rsa.GenerateKey(rand.Reader, 2048)
	require.NoError(t, err)
	rsaDER, err := x509.MarshalPKIXPublicKey(&rsaKey.PublicKey)
	require.NoError(t, err)
	edPub, _, err := ed25519.GenerateKey(rand.Reader)
	require.NoError(t, err)
	edDER, err := x509.MarshalPKIXPublicKey(edPub)
	require.NoError(t, err)
	privDER, err := x509.MarshalPKCS8PrivateKey(priv)
	require.NoError(t, err)
	point, err := priv.PublicKey.Bytes() // the bare point, not a SubjectPublicKeyInfo
	require.NoError(t, err)
	offCurve := append([]byte(nil), der...)
	offCurve[len(offCurve)-1] ^= 0x01

	for name, s := range map[string]string{
		"empty":            "",
		"not base64":       "not a key!",
		"url alphabet":     base64.RawURLEncoding.EncodeToString(der),
		"trailing data":    base64.StdEncoding.EncodeToString(append(append([]byte(nil), der...), 0)),
		"truncated":        base64.StdEncoding.EncodeToString(der[:len(der)-1]),
		"P-384":            base64.StdEncoding.EncodeToString(p384DER),
		"RSA":              base64.StdEncoding.EncodeToString(rsaDER),
		"ed25519":          base64.StdEncoding.EncodeToString(edDER),
		"bare point":       base64.StdEncoding.EncodeToString(point),
		"point off curve":  base64.StdEncoding.EncodeToString(offCurve),
		"private key PEM":  string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: privDER})),
		"private key b64":  base64.StdEncoding.EncodeToString(privDER),
		"PEM then garbage": pemKey + "x",
	} {
		_, err := sendgrid.ParsePublicKey(s)
		require.Error(t, err, name)
	}
}

func TestNew(t *testing.T) {
	t.Parallel()
	k := newKeys(t)
	_, err := sendgrid.New(providers.Config{})
	require.ErrorContains(t, err, "secrets")
	_, err = sendgrid.New(providers.Config{Secrets: []string{k.pubOne}, Settings: providertest.DecodeSettings(map[string]any{"nope": 1})})
	require.ErrorContains(t, err, "sendgrid")

	// A bad key is named by its index, never quoted.
	secret := "whsec_not_a_verification_key_" + k.pubTwo[:20]
	_, err = sendgrid.New(providers.Config{Secrets: []string{k.pubOne, secret}})
	require.ErrorContains(t, err, "secrets[1]")
	require.NotContains(t, err.Error(), secret)
	require.NotContains(t, err.Error(), k.pubOne)
}

func TestSplit(t *testing.T) {
	t.Parallel()
	k := newKeys(t)
	v := build(t, k.pubOne)
	req := signed(t, k.one, providertest.Now)
	require.NoError(t, v.Verify(req))
	items, err := v.Split(req)
	require.NoError(t, err)
	require.Len(t, items, 3)
	want := []providers.Event{
		{ID: "ZGVsaXZlcmVkLTAtMTIzNDU2Nzg5", Type: "delivered", Time: time.Unix(eventTime, 0).UTC()},
		{ID: "b3Blbi0xMjM0NTY3ODktMTIzNDU2Nzg5", Type: "open", Time: time.Unix(1796036400, 0).UTC()},
		{ID: "Y2xpY2stMTIzNDU2Nzg5LTEyMzQ1Njc4OQ", Type: "click", Time: time.Unix(1796036410, 0).UTC()},
	}
	for i, it := range items {
		require.Equal(t, want[i], it.Event)
		require.Equal(t, it.Body, req.Body[it.Offset:it.Offset+len(it.Body)], "a slice of the body")
		require.Equal(t, byte('{'), it.Body[0])
		require.Equal(t, byte('}'), it.Body[len(it.Body)-1], "the CRLF between events is not part of an item")
		require.Equal(t, it.Event.ID, gjson.GetBytes(it.Body, "sg_event_id").Str)
	}
	require.Equal(t, 1, items[0].Offset)

	ev, err := v.Resolve(req)
	require.NoError(t, err)
	require.Equal(t, items[0].Event, ev)
	require.Equal(t, "json:sg_event_id", v.Describe().DefaultEventID)
	require.True(t, v.Describe().IDSigned)

	// An event without a type or a usable time is still an event.
	items, err = v.Split(providertest.Request(`[{"sg_event_id":"a"},{"sg_event_id":"b","event":7,"timestamp":"1796036400"},{"sg_event_id":"c","timestamp":1.5e9}]`))
	require.NoError(t, err)
	for _, it := range items {
		require.Empty(t, it.Event.Type)
		require.True(t, it.Event.Time.IsZero())
	}

	for _, body := range []string{``, `{`, `{}`, `[]`, ` [ ] `, `[1]`, `[{"sg_event_id":"a"},[]]`, `[{"sg_event_id":"a"}`, `"x"`, strings.Repeat("[", 100) + strings.Repeat("]", 100)} {
		_, err := v.Split(providertest.Request(body))
		require.ErrorIs(t, err, providers.ErrMalformed, body)
	}
	// An event without a sg_event_id (missing, blank, not a string) refuses
	// the whole delivery.
	for _, ev := range []string{`{"event":"open"}`, `{"sg_event_id":""}`, `{"sg_event_id":"  "}`, `{"sg_event_id":12345}`, `{"sg_event_id":null}`} {
		_, err := v.Split(providertest.Request(`[{"sg_event_id":"first","event":"processed"},` + ev + `]`))
		require.ErrorIs(t, err, providers.ErrNoEventID, ev)
		_, err = v.Resolve(providertest.Request(`[` + ev + `]`))
		require.ErrorIs(t, err, providers.ErrNoEventID, ev)
	}
}

func TestSignWithKey(t *testing.T) {
	t.Parallel()
	p384, err := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	require.NoError(t, err)
	req := sample("x")
	require.Error(t, sendgrid.SignWithKey(req, p384, providertest.Now))
	require.Error(t, sendgrid.SignWithKey(req, nil, providertest.Now))
	require.Empty(t, req.Header.Get(sendgrid.HeaderSignature))

	// A request without headers gets them.
	k := newKey(t)
	bare := &providers.Request{Body: []byte(`[{"sg_event_id":"x"}]`)}
	require.NoError(t, sendgrid.SignWithKey(bare, k, providertest.Now))
	require.NoError(t, build(t, verificationKey(t, k)).Verify(bare))
}
