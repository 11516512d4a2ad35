package mercadopago_test

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookline/hookline/providers"
	"github.com/hookline/hookline/providers/mercadopago"
	"github.com/hookline/hookline/providers/providertest"
)

var _ providers.Provider = (*mercadopago.Verifier)(nil)
var _ providers.Signer = (*mercadopago.Verifier)(nil)
var _ providers.Describer = (*mercadopago.Verifier)(nil)

func sample(id string) *providers.Request {
	idField := ""
	if id != "" {
		idField = `"id":"` + id + `",`
	}
	// No data.id either when id is empty, so nothing can stand in for it.
	return providertest.Request(`{`+idField+`"live_mode":true,"type":"payment","date_created":"2026-11-30T08:58:00.000-03:00","user_id":987654321,"api_version":"v1","action":"payment.updated","data":{"id":"`+strings.TrimPrefix(id, "evt_")+`"}}`,
		mercadopago.RequestIDHeader, "bb56a2f1-6aae-46ac-982e-9dcd3581d08e")
}

func harness() providertest.Harness {
	return providertest.Harness{
		Provider: mercadopago.Name,
		Secrets:  []string{"mp_webhook_secret_one", "mp_webhook_secret_two"},
		Delivery: sample,
		WantType: "payment",
		WantTime: time.Date(2026, 11, 30, 11, 58, 0, 0, time.UTC),
		// Only data.id, x-request-id and ts are signed, never the body.
		Features: providertest.Features{Timestamp: true, MultipleSignatures: true, BodyNotSigned: true},
		MergeSignatures: func(a, b http.Header) {
			_, v1, ok := strings.Cut(b.Get(mercadopago.Header), ",v1=")
			if !ok {
				panic("no v1 in " + b.Get(mercadopago.Header))
			}
			a.Set(mercadopago.Header, a.Get(mercadopago.Header)+",v2=deadbeef,v1="+v1)
		},
	}
}

func TestConformance(t *testing.T) {
	t.Parallel()
	providertest.Run(t, harness())
}

// TestConformanceQueryDataID runs the suite on deliveries whose data.id comes
// from the notification URL, as Mercado Pago sends it.
func TestConformanceQueryDataID(t *testing.T) {
	t.Parallel()
	h := harness()
	delivery := h.Delivery
	h.Delivery = func(id string) *providers.Request {
		req := delivery(id)
		if id == "" {
			return req
		}
		req.URL.RawQuery = url.Values{"data.id": {"PAY" + id}, "type": {"payment"}}.Encode()
		return req
	}
	providertest.Run(t, h)
}

// The vectors were computed independently of this package with
//
//	printf %s 'id:123456;request-id:bb56a2f1-6aae-46ac-982e-9dcd3581d08e;ts:1742505638683;' | openssl dgst -sha256 -hmac 'mp_webhook_secret'
//	printf %s 'id:ord01jq4s4ky8hwq6na5pxb65b3d3;request-id:bb56a2f1-6aae-46ac-982e-9dcd3581d08e;ts:1742505638;' | openssl dgst -sha256 -hmac 'mp_webhook_secret'
//	printf %s 'id:123456;ts:1742505638683;' | openssl dgst -sha256 -hmac 'mp_webhook_secret'
const (
	vectorSecret    = "mp_webhook_secret"
	vectorRequestID = "bb56a2f1-6aae-46ac-982e-9dcd3581d08e"
	vectorHeaderMs  = "ts=1742505638683,v1=4b35f75f59653405486e383d8c8ee951fa26b0c2efecd957b6aa6ada4385509b"
	vectorHeaderS   = "ts=1742505638,v1=345897bec83086b28b7bc5754612fc88e085bd57633d91689401daddd4426d65"
	vectorHeaderNoR = "ts=1742505638683,v1=6615e8894bf1cd6eb0e42a46bfe27e01efe9cbc9c14e450a42d41ff3b2450e90"
	vectorBody      = `{"action":"payment.updated","api_version":"v1","data":{"id":"123456"},"date_created":"2025-03-20T18:20:30Z","id":112233445566,"live_mode":false,"type":"payment","user_id":724484980}`
)

var vectorNow = time.UnixMilli(1742505638683).Add(30 * time.Second)

func vectorVerifier(t *testing.T) *mercadopago.Verifier {
	t.Helper()
	p, err := mercadopago.New(providers.Config{Secrets: []string{"other", vectorSecret}, Now: func() time.Time { return vectorNow }})
	require.NoError(t, err)
	return p
}

func TestOpenSSLVector(t *testing.T) {
	t.Parallel()
	p := vectorVerifier(t)

	// data.id from the URL (as Mercado Pago sends it); the body is not signed.
	req := providertest.Request(`{"not":"signed"}`, mercadopago.Header, vectorHeaderMs, mercadopago.RequestIDHeader, vectorRequestID)
	req.URL.RawQuery = "data.id=123456&type=payment"
	require.NoError(t, p.Verify(req))

	// data.id from the body when the URL has none.
	req = providertest.Request(vectorBody, mercadopago.Header, vectorHeaderMs, mercadopago.RequestIDHeader, vectorRequestID)
	require.NoError(t, p.Verify(req))
	ev, err := p.Resolve(req)
	require.NoError(t, err)
	require.Equal(t, providers.Event{ID: "112233445566", Type: "payment", Time: time.Date(2025, 3, 20, 18, 20, 30, 0, time.UTC)}, ev)

	// Seconds, and an alphanumeric data.id signed in lowercase.
	req = providertest.Request(`{}`, mercadopago.Header, vectorHeaderS, mercadopago.RequestIDHeader, vectorRequestID)
	req.URL.RawQuery = "data.id=ORD01JQ4S4KY8HWQ6NA5PXB65B3D3&type=order"
	require.NoError(t, p.Verify(req))

	// No x-request-id: that part is left out of the manifest.
	req = providertest.Request(vectorBody, mercadopago.Header, vectorHeaderNoR)
	require.NoError(t, p.Verify(req))
	req.Header.Set(mercadopago.RequestIDHeader, vectorRequestID)
	require.ErrorIs(t, p.Verify(req), providers.ErrInvalidSignature)

	// The data.id is signed.
	req = providertest.Request(vectorBody, mercadopago.Header, vectorHeaderMs, mercadopago.RequestIDHeader, vectorRequestID)
	req.URL.RawQuery = "data.id=123457"
	require.ErrorIs(t, p.Verify(req), providers.ErrInvalidSignature)

	// Sign reproduces the vector.
	signer, err := mercadopago.New(providers.Config{Secrets: []string{vectorSecret}})
	require.NoError(t, err)
	ours := providertest.Request(vectorBody, mercadopago.RequestIDHeader, vectorRequestID)
	require.NoError(t, signer.Sign(ours, time.UnixMilli(1742505638683)))
	require.Equal(t, vectorHeaderMs, ours.Header.Get(mercadopago.Header))
	require.Equal(t, "id:123456;request-id:"+vectorRequestID+";ts:1742505638683;", mercadopago.Manifest(ours, "1742505638683"))
}

// signAt signs vectorBody's manifest by hand with ts as given (seconds or ms).
func signAt(ts string) *providers.Request {
	m := hmac.New(sha256.New, []byte(vectorSecret))
	m.Write([]byte("id:123456;request-id:" + vectorRequestID + ";ts:" + ts + ";"))
	return providertest.Request(vectorBody, mercadopago.RequestIDHeader, vectorRequestID,
		mercadopago.Header, "ts="+ts+",v1="+hex.EncodeToString(m.Sum(nil)))
}

func TestTimestampUnits(t *testing.T) {
	t.Parallel()
	p, err := mercadopago.New(providers.Config{Secrets: []string{vectorSecret}, Now: func() time.Time { return providertest.Now }})
	require.NoError(t, err)

	for _, tc := range []struct {
		at   time.Time
		want error
	}{
		{providertest.Now, nil},
		{providertest.Now.Add(-4 * time.Minute), nil},
		{providertest.Now.Add(4 * time.Minute), nil},
		{providertest.Now.Add(-6 * time.Minute), providers.ErrTimestampTooOld},
		{providertest.Now.Add(6 * time.Minute), providers.ErrTimestampTooNew},
	} {
		for _, ts := range []string{strconv.FormatInt(tc.at.Unix(), 10), strconv.FormatInt(tc.at.UnixMilli(), 10)} {
			err := p.Verify(signAt(ts))
			if tc.want == nil {
				require.NoError(t, err, ts)
			} else {
				require.ErrorIs(t, err, tc.want, ts)
			}
		}
	}

	_, at, _, err := mercadopago.ParseHeader("ts=1742505638,v1=" + strings.Repeat("ab", 32))
	require.NoError(t, err)
	require.Equal(t, time.Unix(1742505638, 0), at)
	_, at, _, err = mercadopago.ParseHeader("ts=1742505638683,v1=" + strings.Repeat("ab", 32))
	require.NoError(t, err)
	require.Equal(t, time.UnixMilli(1742505638683), at)
}

func TestParseHeader(t *testing.T) {
	t.Parallel()
	sig := strings.Repeat("0a", 32)
	for _, bad := range []string{"", "v1=" + sig, "ts=1742505638", "ts=,v1=" + sig, "ts=abc,v1=" + sig, "ts=+1742505638,v1=" + sig,
		"ts=01742505638,v1=" + sig, "ts=-1,v1=" + sig, "ts=0,v1=" + sig, "ts=1,ts=2,v1=" + sig, "ts=99999999999999999999,v1=" + sig, "ts=1742505638,v1=zz"} {
		_, _, _, err := mercadopago.ParseHeader(bad)
		require.ErrorIs(t, err, providers.ErrInvalidSignature, bad)
	}
	ts, _, v1, err := mercadopago.ParseHeader(" ts=1742505638 , v0=00, v1=zz, v1=" + sig + ",v1=" + strings.Repeat("1b", 32))
	require.NoError(t, err)
	require.Equal(t, "1742505638", ts)
	require.Len(t, v1, 2)
}

func TestResolve(t *testing.T) {
	t.Parallel()
	p := vectorVerifier(t)

	// Without a notification id: {data.id}:{type}, else {data.id}:{action}.
	ev, err := p.Resolve(providertest.Request(`{"type":"payment","action":"payment.created","data":{"id":"123456"}}`))
	require.NoError(t, err)
	require.Equal(t, providers.Event{ID: "123456:payment", Type: "payment"}, ev)
	ev, err = p.Resolve(providertest.Request(`{"action":"payment.created","data":{"id":123456}}`))
	require.NoError(t, err)
	require.Equal(t, providers.Event{ID: "123456:payment.created", Type: "payment.created"}, ev)
	req := providertest.Request(`{"type":"payment"}`)
	req.URL.RawQuery = "data.id=999&type=payment"
	ev, err = p.Resolve(req)
	require.NoError(t, err)
	require.Equal(t, "999:payment", ev.ID)

	_, err = p.Resolve(providertest.Request(`{"type":"payment","data":{}}`))
	require.ErrorIs(t, err, providers.ErrNoEventID)
	_, err = p.Resolve(providertest.Request(`{"id":`))
	require.ErrorIs(t, err, providers.ErrMalformed)
}

func TestNew(t *testing.T) {
	t.Parallel()
	_, err := mercadopago.New(providers.Config{})
	require.Error(t, err)
	_, err = mercadopago.New(providers.Config{Secrets: []string{"k"}, Settings: providertest.DecodeSettings(map[string]any{"access_token": "x"})})
	require.Error(t, err, "unknown settings are an error")

	p, err := mercadopago.New(providers.Config{Secrets: []string{"k"}})
	require.NoError(t, err)
	require.Equal(t, 5*time.Minute, p.Describe().DefaultTolerance)
	require.Equal(t, "json:id, else {data.id}:{type}", p.Describe().DefaultEventID)
	// Sign adds an x-request-id when there is none.
	req := providertest.Request(`{}`)
	require.NoError(t, p.Sign(req, time.Now()))
	require.NotEmpty(t, req.Header.Get(mercadopago.RequestIDHeader))
	require.NoError(t, p.Verify(req))
}

func FuzzParseHeader(f *testing.F) {
	f.Add(vectorHeaderMs)
	f.Add(vectorHeaderS + ",v1=" + strings.Repeat("0", 64))
	f.Add("ts=,v1=")
	f.Add("ts=1,ts=2")
	f.Add(",,,=")
	f.Fuzz(func(t *testing.T, v string) {
		ts, at, sigs, err := mercadopago.ParseHeader(v)
		if err != nil {
			if !providers.IsSignatureError(err) {
				t.Fatalf("not a signature error: %v", err)
			}
			return
		}
		if len(sigs) == 0 || ts == "" || at.IsZero() {
			t.Fatalf("no error but ts %q at %v sigs %d for %q", ts, at, len(sigs), v)
		}
		for _, c := range ts {
			if c < '0' || c > '9' {
				t.Fatalf("non-digit ts %q accepted from %q", ts, v)
			}
		}
		for _, s := range sigs {
			if len(s) != 32 {
				t.Fatalf("signature of %d bytes accepted from %q", len(s), v)
			}
		}
	})
}

// TestContentKey: the body (its id included) is not signed; a replay with
// another body id has the original's content key, another data.id another.
func TestContentKey(t *testing.T) {
	t.Parallel()
	providertest.ContentKeyReplay(t, harness(), func(r *providers.Request) {
		r.Body = []byte(strings.Replace(string(r.Body), `"id":"evt_content_key"`, `"id":"evt_fresh"`, 1))
	}, sample("evt_other"))
	require.False(t, vectorVerifier(t).Describe().IDSigned)

	// The key is the manifest's: data.id from the URL counts, the body then not at all.
	p := vectorVerifier(t)
	req := providertest.Request(vectorBody, mercadopago.RequestIDHeader, vectorRequestID, mercadopago.Header, vectorHeaderMs)
	key := p.ContentKey(req)
	require.Len(t, key, 32)
	req.URL.RawQuery = "data.id=123456&type=payment"
	req.Body = []byte(`{"id":1}`)
	require.NoError(t, p.Verify(req))
	require.Equal(t, key, p.ContentKey(req))
	req.Header.Set(mercadopago.RequestIDHeader, "another")
	require.NotEqual(t, key, p.ContentKey(req))
	req.Header.Set(mercadopago.Header, "garbled")
	require.Nil(t, p.ContentKey(req))
}

// TestDeepBodyRefused: the unsigned body is refused beyond
// providers.MaxJSONDepth before it is read, whether or not the manifest needs it.
func TestDeepBodyRefused(t *testing.T) {
	t.Parallel()
	p, err := mercadopago.New(providers.Config{Secrets: []string{"s"}, Now: func() time.Time { return providertest.Now }})
	require.NoError(t, err)
	nest := func(depth int) string {
		return strings.Repeat(`{"a":`, depth-1) + `{"data":{"id":"1"}}` + strings.Repeat("}", depth-1)
	}
	for _, query := range []string{"", "data.id=1"} {
		ok := providertest.Request(nest(providers.MaxJSONDepth - 1))
		ok.URL.RawQuery = query
		require.NoError(t, p.Sign(ok, providertest.Now))
		require.NoError(t, p.Verify(ok), "depth %d", providers.MaxJSONDepth)

		deep := providertest.Request(nest(providers.MaxJSONDepth))
		deep.URL.RawQuery = query
		require.NoError(t, p.Sign(deep, providertest.Now))
		err := p.Verify(deep)
		require.ErrorIs(t, err, providers.ErrTooDeep)
		require.ErrorIs(t, err, providers.ErrMalformed)
		require.False(t, providers.IsSignatureError(err))

		huge := providertest.Request(strings.Repeat("[", 1<<16))
		huge.URL.RawQuery = query
		require.NoError(t, p.Sign(huge, providertest.Now))
		require.ErrorIs(t, p.Verify(huge), providers.ErrTooDeep)
	}
}

// FuzzVerifyBody: for any body and notification query, a delivery that Sign
// signs verifies unless its body nests too deep (and then fails with
// providers.ErrTooDeep, nothing else), and a verified one has a content key
// that a replay with another body but the same data.id keeps.
func FuzzVerifyBody(f *testing.F) {
	f.Add(vectorBody, "")
	f.Add(vectorBody, "data.id=123456&type=payment")
	f.Add(strings.Repeat("[", 70), "")
	f.Add(`{"data":{"id":"[[[["}}`, "data.id=%zz")
	f.Add(`"\"{{{{"`, "")
	p, err := mercadopago.New(providers.Config{Secrets: []string{vectorSecret}, Now: func() time.Time { return vectorNow }})
	require.NoError(f, err)
	f.Fuzz(func(t *testing.T, body, query string) {
		req := providertest.Request(body)
		req.URL.RawQuery = query
		require.NoError(t, p.Sign(req, vectorNow))
		err := p.Verify(req)
		deep := providers.CheckJSONDepth(req.Body) != nil
		switch {
		case deep && !errors.Is(err, providers.ErrTooDeep):
			t.Fatalf("deep body %q: %v", body, err)
		case !deep && err != nil:
			t.Fatalf("own signature rejected for %q ?%q: %v", body, query, err)
		case deep:
			return
		}
		key := p.ContentKey(req)
		if len(key) != 32 {
			t.Fatalf("no content key for a verified delivery")
		}
		replay := providertest.Clone(req)
		replay.Body = []byte(`{"id":"fresh","data":{"id":` + strconv.Quote(mercadopagoDataID(req)) + `}}`)
		if p.Verify(replay) == nil && !bytes.Equal(p.ContentKey(replay), key) {
			t.Fatalf("a replay that verifies keys differently")
		}
	})
}

// mercadopagoDataID is the manifest's data.id of req: the query's, else the body's.
func mercadopagoDataID(req *providers.Request) string {
	if id := req.URL.Query().Get("data.id"); id != "" {
		return id
	}
	id, _ := providers.JSONString(req.Body, "data.id")
	return id
}
