package adyen_test

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/tidwall/gjson"

	"github.com/hookline/hookline/providers"
	"github.com/hookline/hookline/providers/adyen"
	"github.com/hookline/hookline/providers/providertest"
)

var _ providers.Provider = (*adyen.Verifier)(nil)
var _ providers.Signer = (*adyen.Verifier)(nil)
var _ providers.Splitter = (*adyen.Verifier)(nil)

// Hex HMAC keys; vectorKey is the one of Adyen's SDK tests.
const (
	vectorKey = "DFB1EB5485895CFA84146406857104ABB4CBCABDC8AAF103A624C8F6A3EAAB00"
	otherKey  = "44782DEF547AAA06C910C43932B1EB0C71FC68D9D0C057550C48EC2ACF6BA056"
)

// sample is a two-item batch; the first item's pspReference is psp. The
// layout (indentation, escapes) makes the item offsets non-trivial.
func sample(psp string) *providers.Request {
	return providertest.Request(`{
  "live": "false",
  "notificationItems": [
    {
      "NotificationRequestItem": {
        "additionalData": {"authCode": "058705", "cardSummary": "0010"},
        "amount": {"currency": "EUR", "value": 1130},
        "eventCode": "AUTHORISATION",
        "eventDate": "2026-11-30T12:59:00+01:00",
        "merchantAccountCode": "TestMerchant",
        "merchantReference": "order \"42\"",
        "paymentMethod": "visa",
        "pspReference": "` + psp + `",
        "reason": "058705:0010:03/2030",
        "success": "true"
      }
    },
    {"NotificationRequestItem":{"amount":{"currency":"EUR","value":1130},"eventCode":"CAPTURE","eventDate":"2026-11-30T13:00:00+01:00","merchantAccountCode":"TestMerchant","merchantReference":"order-42","originalReference":"` + psp + `","pspReference":"QFQTPCQ8HXSKGK82","success":"true"}}
  ]
}`)
}

func TestConformance(t *testing.T) {
	t.Parallel()
	providertest.Run(t, providertest.Harness{
		Provider: adyen.Name,
		Secrets:  []string{vectorKey, otherKey},
		Delivery: sample,
		// The first item's composite id; no pspReference, no id.
		WantID: func(psp string) string {
			if psp == "" {
				return ""
			}
			return psp + ":AUTHORISATION:true"
		},
		WantType: "AUTHORISATION",
		WantTime: time.Date(2026, 11, 30, 11, 59, 0, 0, time.UTC),
		Features: providertest.Features{
			// The HMAC covers eight fields, not the body bytes: flipping a
			// byte of an unsigned field (eventDate, additionalData) cannot be
			// detected. TestTamperedSignedFields covers the signed ones.
			BodyNotSigned: true,
			// The signatures are in the items, not in a header.
			SignatureInBody: true,
		},
	})
}

func build(t *testing.T, keys ...string) *adyen.Verifier {
	t.Helper()
	v, err := adyen.New(providers.Config{Source: "test", Secrets: keys})
	require.NoError(t, err)
	return v
}

func signed(t *testing.T, key, psp string) *providers.Request {
	t.Helper()
	req := sample(psp)
	require.NoError(t, build(t, key).Sign(req, providertest.Now))
	return req
}

// TestSDKVector checks the signing string and HMAC of Adyen's SDK tests
// (hmacvalidator), and a second vector computed with
// `openssl dgst -sha256 -mac HMAC -macopt hexkey:… -binary | base64`.
func TestSDKVector(t *testing.T) {
	t.Parallel()
	v := build(t, vectorKey)

	body := `{"live":"false","notificationItems":[{"NotificationRequestItem":{"additionalData":{"hmacSignature":"ipnxGCaUZ4l8TUW75a71/ghd2Fe5ffvX0pV4TLTntIc="},"amount":{"currency":"EUR","value":1000},"eventCode":"EVENT","merchantAccountCode":"merchantAccount","merchantReference":"reference","originalReference":"originalReference","pspReference":"pspReference","success":"true"}}]}`
	require.Equal(t, "pspReference:originalReference:merchantAccount:reference:1000:EUR:EVENT:true",
		adyen.SigningString(gjson.Get(body, "notificationItems.0.NotificationRequestItem")))
	require.NoError(t, v.Verify(providertest.Request(body)))

	// originalReference absent: its slot stays empty between the colons.
	body2 := `{"live":"false","notificationItems":[{"NotificationRequestItem":{"additionalData":{"hmacSignature":"Ny9gS2veKo5E4w8/OL6xz1/wvT/hYkAXy1xNc/QvO4I="},"amount":{"value":1130,"currency":"EUR"},"eventCode":"AUTHORISATION","merchantAccountCode":"TestMerchant","merchantReference":"TestPayment-1407325143704","pspReference":"7914073381342284","success":"true"}}]}`
	require.Equal(t, "7914073381342284::TestMerchant:TestPayment-1407325143704:1130:EUR:AUTHORISATION:true",
		adyen.SigningString(gjson.Get(body2, "notificationItems.0.NotificationRequestItem")))
	require.NoError(t, v.Verify(providertest.Request(body2)))

	// Our Sign reproduces the SDK's signature.
	unsigned := providertest.Request(strings.Replace(body, `"hmacSignature":"ipnxGCaUZ4l8TUW75a71/ghd2Fe5ffvX0pV4TLTntIc="`, `"hmacSignature":""`, 1))
	require.NoError(t, v.Sign(unsigned, time.Time{}))
	require.Equal(t, body, string(unsigned.Body))

	require.ErrorIs(t, build(t, otherKey).Verify(providertest.Request(body)), providers.ErrInvalidSignature)
}

func TestCompositeID(t *testing.T) {
	t.Parallel()
	req := signed(t, vectorKey, "8835514421131111")
	v := build(t, vectorKey)
	require.NoError(t, v.Verify(req))

	items, err := v.Split(req)
	require.NoError(t, err)
	require.Len(t, items, 2)
	require.Equal(t, "8835514421131111:AUTHORISATION:true", items[0].Event.ID)
	require.Equal(t, "AUTHORISATION", items[0].Event.Type)
	require.True(t, time.Date(2026, 11, 30, 11, 59, 0, 0, time.UTC).Equal(items[0].Event.Time))
	require.Equal(t, "QFQTPCQ8HXSKGK82:CAPTURE:true", items[1].Event.ID)
	require.Equal(t, "CAPTURE", items[1].Event.Type)

	for _, it := range items {
		require.Equal(t, it.Body, req.Body[it.Offset:it.Offset+len(it.Body)])
		require.True(t, gjson.ValidBytes(it.Body))
		require.Equal(t, byte('{'), it.Body[0])
		require.Equal(t, it.Event.ID, gjson.GetBytes(it.Body, "pspReference").Str+":"+gjson.GetBytes(it.Body, "eventCode").Str+":true")
	}

	ev, err := v.Resolve(req)
	require.NoError(t, err)
	require.Equal(t, items[0].Event, ev)
	require.Equal(t, "{json:pspReference}:{json:eventCode}:{json:success}", v.Describe().DefaultEventID)
}

func TestEveryItemMustVerify(t *testing.T) {
	t.Parallel()
	both := build(t, vectorKey, otherKey)

	// Item 0 signed with one key, item 1 with the other (a rotation in the
	// middle of a retry queue): both keys configured → accepted.
	a := signed(t, vectorKey, "psp_a")
	b := signed(t, otherKey, "psp_a")
	itemsA, err := both.Split(a)
	require.NoError(t, err)
	itemsB, err := both.Split(b)
	require.NoError(t, err)
	mixed := providertest.Clone(a)
	mixed.Body = append(append(append([]byte{}, a.Body[:itemsA[1].Offset]...), itemsB[1].Body...), a.Body[itemsA[1].Offset+len(itemsA[1].Body):]...)
	require.NoError(t, both.Verify(mixed))

	// One key only: the item signed with the other one fails the whole delivery.
	require.ErrorIs(t, build(t, vectorKey).Verify(mixed), providers.ErrInvalidSignature)
	require.ErrorIs(t, build(t, otherKey).Verify(mixed), providers.ErrInvalidSignature)

	// An unsigned second item fails the delivery.
	unsignedSecond := providertest.Clone(a)
	unsignedSecond.Body = bytes.Replace(a.Body, []byte(`"hmacSignature":"`), []byte(`"hmacSignaturX":"`), 2)
	require.ErrorIs(t, both.Verify(unsignedSecond), providers.ErrNoSignature)
}

func TestTamperedSignedFields(t *testing.T) {
	t.Parallel()
	v := build(t, vectorKey)
	req := signed(t, vectorKey, "psp_tamper")
	require.NoError(t, v.Verify(req))
	for _, c := range []struct{ from, to string }{
		{`"pspReference": "psp_tamper"`, `"pspReference": "psp_tampeR"`},
		{`"value": 1130`, `"value": 1131`},
		{`"currency": "EUR"`, `"currency": "USD"`},
		{`"eventCode": "AUTHORISATION"`, `"eventCode": "CANCELLATION"`},
		{`"success": "true"`, `"success": "false"`},
		{`"merchantAccountCode": "TestMerchant"`, `"merchantAccountCode": "OtherMerchant"`},
		{`"merchantReference": "order \"42\""`, `"merchantReference": "order \"43\""`},
		{`"originalReference":"psp_tamper"`, `"originalReference":"psp_other"`},
	} {
		bad := providertest.Clone(req)
		bad.Body = bytes.Replace(req.Body, []byte(c.from), []byte(c.to), 1)
		require.NotEqual(t, req.Body, bad.Body, c.from)
		require.ErrorIs(t, v.Verify(bad), providers.ErrInvalidSignature, c.from)
	}
}

func TestRepeatedSignedFieldRejected(t *testing.T) {
	t.Parallel()
	v := build(t, vectorKey)
	req := signed(t, vectorKey, "psp_dup")
	// A second "value" after the signed one: gjson reads the first, a
	// last-wins parser downstream would see 999999.
	bad := providertest.Clone(req)
	bad.Body = bytes.Replace(req.Body, []byte(`"value": 1130}`), []byte(`"value": 1130, "value": 999999}`), 1)
	require.ErrorIs(t, v.Verify(bad), providers.ErrInvalidSignature)
	bad.Body = bytes.Replace(req.Body, []byte(`"success": "true"`), []byte(`"success": "true", "success": "false"`), 1)
	require.ErrorIs(t, v.Verify(bad), providers.ErrInvalidSignature)
}

func TestMalformed(t *testing.T) {
	t.Parallel()
	v := build(t, vectorKey)
	for _, body := range []string{`{"live":"false","notificationItems":[]}`, `{"live":"false"}`, `{"notificationItems":{}}`} {
		req := providertest.Request(body)
		require.ErrorIs(t, v.Verify(req), providers.ErrMalformed, body)
		_, err := v.Split(req)
		require.ErrorIs(t, err, providers.ErrMalformed, body)
		_, err = v.Resolve(req)
		require.ErrorIs(t, err, providers.ErrMalformed, body)
	}
	// A body that is not JSON has no readable signature.
	require.ErrorIs(t, v.Verify(providertest.Request(`{"notificationItems":[`)), providers.ErrInvalidSignature)
	// The headers are not part of the scheme: the item signatures verify
	// whatever the Content-Type says, or without one.
	req := signed(t, vectorKey, "psp_ct")
	for _, ct := range []string{"text/plain", "application/json; charset=utf-8", ""} {
		req.Header.Set("Content-Type", ct)
		require.NoError(t, v.Verify(req), ct)
	}
}

func TestNewRejectsBadKeys(t *testing.T) {
	t.Parallel()
	_, err := adyen.New(providers.Config{})
	require.Error(t, err)
	_, err = adyen.New(providers.Config{Secrets: []string{vectorKey, "not-hex-secret-value"}})
	require.Error(t, err)
	require.Contains(t, err.Error(), "secrets[1]")
	require.NotContains(t, err.Error(), "not-hex")
	_, err = adyen.New(providers.Config{Secrets: []string{vectorKey}, Settings: providertest.DecodeSettings(map[string]any{"nope": 1})})
	require.Error(t, err)
}

// TestIndependentHMAC recomputes one item's signature by hand.
func TestIndependentHMAC(t *testing.T) {
	t.Parallel()
	req := signed(t, vectorKey, "psp_hand")
	key, err := hex.DecodeString(vectorKey)
	require.NoError(t, err)
	m := hmac.New(sha256.New, key)
	m.Write([]byte(`psp_hand::TestMerchant:order "42":1130:EUR:AUTHORISATION:true`))
	require.Equal(t, base64.StdEncoding.EncodeToString(m.Sum(nil)),
		gjson.GetBytes(req.Body, "notificationItems.0.NotificationRequestItem.additionalData.hmacSignature").Str)
}

// FuzzBody feeds arbitrary bodies to the body parser behind Verify, Split
// and Resolve: no panics, and split items are always slices of the body.
func FuzzBody(f *testing.F) {
	f.Add(string(sample("psp").Body))
	f.Add(`{"notificationItems":[{"NotificationRequestItem":{"additionalData":{"hmacSignature":"ipnxGCaUZ4l8TUW75a71/ghd2Fe5ffvX0pV4TLTntIc="},"pspReference":"p"}}]}`)
	f.Add(`{"notificationItems":[{"NotificationRequestItem":1},[],null]}`)
	f.Add(`{"notificationItems":[{"NotificationRequestItem":{},"NotificationRequestItem":{}}]}`)
	f.Add(`{"notificationItems":[`)
	v, err := adyen.New(providers.Config{Secrets: []string{vectorKey}})
	if err != nil {
		f.Fatal(err)
	}
	f.Add(strings.Repeat(`{"notificationItems":[`, 40))
	f.Add(`{"a":"[[[[\"{{{{"}`)
	f.Fuzz(func(t *testing.T, body string) {
		req := providertest.Request(body)
		err := v.Verify(req)
		if err == nil {
			t.Fatalf("unsigned body verified: %q", body)
		}
		if deep := providers.CheckJSONDepth(req.Body) != nil; deep != errors.Is(err, providers.ErrTooDeep) {
			t.Fatalf("depth check and Verify disagree on %q: %v", body, err)
		}
		items, err := v.Split(req)
		if err == nil && len(items) == 0 {
			t.Fatalf("no error but no items for %q", body)
		}
		for _, it := range items {
			if !bytes.Equal(it.Body, req.Body[it.Offset:it.Offset+len(it.Body)]) || it.Event.ID == "" {
				t.Fatalf("bad item %+v in %q", it, body)
			}
		}
		_, _ = v.Resolve(req)
	})
}

func TestRepeatedItemsArrayRejected(t *testing.T) {
	t.Parallel()
	v := build(t, vectorKey)
	req := signed(t, vectorKey, "psp_dup")
	bad := providertest.Clone(req)
	// A second, unsigned notificationItems that a last-wins parser would read.
	bad.Body = append(bytes.TrimSuffix(bytes.TrimSpace(req.Body), []byte("}")), []byte(`,"notificationItems":[{"NotificationRequestItem":{"pspReference":"forged"}}]}`)...)
	require.ErrorIs(t, v.Verify(bad), providers.ErrInvalidSignature)
}

// TestDeepBodyRefused: the body is parsed before any signature is checked,
// so nesting beyond providers.MaxJSONDepth is refused first, with
// providers.ErrTooDeep (a 400), even when every item's signature is right:
// the nesting sits in additionalData, which no signature covers.
func TestDeepBodyRefused(t *testing.T) {
	t.Parallel()
	v := build(t, vectorKey)
	nested := func(depth int) *providers.Request {
		t.Helper()
		// body > notificationItems > item > NotificationRequestItem >
		// additionalData: 5 levels before the nested value.
		deep := strings.Repeat(`{"x":`, depth-6) + `[]` + strings.Repeat(`}`, depth-6)
		req := sample("psp_deep")
		req.Body = bytes.Replace(req.Body, []byte(`"cardSummary": "0010"`), []byte(`"cardSummary": "0010", "deep": `+deep), 1)
		require.NoError(t, v.Sign(req, time.Time{}))
		return req
	}
	require.NoError(t, v.Verify(nested(providers.MaxJSONDepth)))
	err := v.Verify(nested(providers.MaxJSONDepth + 1))
	require.ErrorIs(t, err, providers.ErrTooDeep)
	require.ErrorIs(t, err, providers.ErrMalformed)
	require.False(t, providers.IsSignatureError(err))

	// A megabyte of brackets is refused in one pass.
	require.ErrorIs(t, v.Verify(providertest.Request(strings.Repeat("[", 1<<20))), providers.ErrTooDeep)
	// Brackets inside strings do not count.
	req := sample("psp_strings")
	req.Body = bytes.Replace(req.Body, []byte(`"reason": "058705:0010:03/2030"`), []byte(`"reason": "`+strings.Repeat(`[{\"`, 100)+`"`), 1)
	require.NoError(t, v.Sign(req, time.Time{}))
	require.NoError(t, v.Verify(req))
}
