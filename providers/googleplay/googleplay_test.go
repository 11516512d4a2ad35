package googleplay_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/stretchr/testify/require"

	"github.com/hookline/hookline/providers"
	"github.com/hookline/hookline/providers/googleplay"
	"github.com/hookline/hookline/providers/providertest"
)

var (
	_ providers.Provider       = (*googleplay.Verifier)(nil)
	_ providers.SecretHeaderer = (*googleplay.Verifier)(nil)
)

func TestConformance(t *testing.T) {
	t.Parallel()
	ks := newKeyServer(t, map[string]*rsa.PublicKey{kidOne: &keyOne().PublicKey})
	providertest.Run(t, providertest.Harness{
		Provider: googleplay.Name,
		Settings: settings(ks),
		Delivery: sample,
		WantType: "subscriptionNotification",
		WantTime: time.UnixMilli(eventMillis),
		Sign: func(t testing.TB, _ string, req *providers.Request, now time.Time) {
			authorize(t, req, now)
		},
		// The right kid, another key.
		WrongSigner: func(t testing.TB, req *providers.Request) {
			req.Header.Set("Authorization", "Bearer "+token(t, keyOther(), kidOne, claims(providertest.Now)))
		},
		Features: providertest.Features{
			NoSharedSecret: true,
			// The token authenticates the push; it covers no byte of the
			// body (TestBodyNotSigned).
			BodyNotSigned: true,
		},
	})
}

// TestVerifyAndResolve: a genuine push verifies and resolves to its
// messageId, the notification's type and eventTimeMillis; the key set is
// fetched once for many pushes.
func TestVerifyAndResolve(t *testing.T) {
	t.Parallel()
	ks := newKeyServer(t, map[string]*rsa.PublicKey{kidOne: &keyOne().PublicKey})
	v := build(t, ks, &clock{now: providertest.Now})
	for i := range 20 {
		req := authorize(t, sample("1369693469"+string(rune('0'+i%10))), providertest.Now.Add(-time.Duration(i)*time.Minute))
		require.NoError(t, v.Verify(req))
	}
	require.Equal(t, int64(1), ks.fetches.Load(), "one fetch for many pushes")

	req := authorize(t, sample("136969346945"), providertest.Now)
	require.NoError(t, v.Verify(req))
	ev, err := v.Resolve(req)
	require.NoError(t, err)
	require.Equal(t, "136969346945", ev.ID)
	require.Equal(t, "subscriptionNotification", ev.Type)
	require.True(t, ev.Time.Equal(time.UnixMilli(eventMillis)), "%v", ev.Time)

	// The helper every test and tool signs with makes tokens the adapter
	// and golang-jwt accept.
	tok, err := googleplay.SignToken(keyOne(), kidOne, googleplay.Claims{Issuer: "accounts.google.com", Audience: audience,
		Email: serviceAccount, EmailVerified: true, Subject: subject, AuthorizedParty: subject,
		IssuedAt: providertest.Now, Expiry: providertest.Now.Add(time.Hour)})
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+tok)
	require.NoError(t, v.Verify(req))
	parsed, err := jwt.Parse(tok, func(*jwt.Token) (any, error) { return &keyOne().PublicKey, nil },
		jwt.WithValidMethods([]string{"RS256"}), jwt.WithTimeFunc(func() time.Time { return providertest.Now }), jwt.WithAudience(audience))
	require.NoError(t, err)
	require.Equal(t, kidOne, parsed.Header["kid"])
	require.Equal(t, int64(1), ks.fetches.Load())
}

// TestBodyNotSigned: the token authenticates the push, not its body. A body
// changed after signing still verifies, and its id and type are the changed
// body's: hookline claims no more than the scheme gives (IDSigned false, no
// content key). TLS protects the body.
func TestBodyNotSigned(t *testing.T) {
	t.Parallel()
	ks := newKeyServer(t, map[string]*rsa.PublicKey{kidOne: &keyOne().PublicKey})
	v := build(t, ks, &clock{now: providertest.Now})
	req := authorize(t, sample("136969346945"), providertest.Now)
	require.NoError(t, v.Verify(req))

	other := push("999999999999", rtdn("voidedPurchaseNotification"))
	other.Header = req.Header.Clone()
	require.NoError(t, v.Verify(other), "the same token verifies another body")
	ev, err := v.Resolve(other)
	require.NoError(t, err)
	require.Equal(t, "999999999999", ev.ID)
	require.Equal(t, "voidedPurchaseNotification", ev.Type)

	d := v.Describe()
	require.False(t, d.IDSigned)
	require.Equal(t, []string{"Authorization"}, d.Headers)
	require.Equal(t, "json:message.messageId", d.DefaultEventID)
	var p providers.Provider = v
	_, isKeyer := p.(providers.ContentKeyer)
	require.False(t, isKeyer, "no signed content to key a replay on")
	_, isSigner := p.(providers.Signer)
	require.False(t, isSigner, "only Google holds the keys")
	require.Equal(t, []string{"Authorization"}, v.SecretHeaders())
}

// TestClaims: a token signed by the right key is refused for what it says,
// before any key is fetched.
func TestClaims(t *testing.T) {
	t.Parallel()
	now := providertest.Now
	edit := func(f func(jwt.MapClaims)) jwt.MapClaims {
		c := claims(now)
		f(c)
		return c
	}
	for name, c := range map[string]struct {
		claims jwt.MapClaims
		want   error
		says   string
	}{
		"wrong aud":          {edit(func(c jwt.MapClaims) { c["aud"] = audience + "/" }), providers.ErrInvalidSignature, "aud"},
		"aud list":           {edit(func(c jwt.MapClaims) { c["aud"] = []string{audience} }), providers.ErrInvalidSignature, "aud"},
		"no aud":             {edit(func(c jwt.MapClaims) { delete(c, "aud") }), providers.ErrInvalidSignature, "aud"},
		"wrong iss":          {edit(func(c jwt.MapClaims) { c["iss"] = "https://accounts.google.com.example" }), providers.ErrInvalidSignature, "iss"},
		"universe iss":       {edit(func(c jwt.MapClaims) { c["iss"] = "googleapis.com" }), providers.ErrInvalidSignature, "iss"},
		"wrong email":        {edit(func(c jwt.MapClaims) { c["email"] = "other@hookline-example.iam.gserviceaccount.com" }), providers.ErrInvalidSignature, "email"},
		"email case":         {edit(func(c jwt.MapClaims) { c["email"] = strings.ToUpper(serviceAccount) }), providers.ErrInvalidSignature, "email"},
		"no email":           {edit(func(c jwt.MapClaims) { delete(c, "email") }), providers.ErrInvalidSignature, "email"},
		"email unverified":   {edit(func(c jwt.MapClaims) { c["email_verified"] = false }), providers.ErrInvalidSignature, "email_verified"},
		"email_verified str": {edit(func(c jwt.MapClaims) { c["email_verified"] = "true" }), providers.ErrInvalidSignature, "email_verified"},
		"no email_verified":  {edit(func(c jwt.MapClaims) { delete(c, "email_verified") }), providers.ErrInvalidSignature, "email_verified"},
		"no iat":             {edit(func(c jwt.MapClaims) { delete(c, "iat") }), providers.ErrInvalidSignature, "iat"},
		"zero iat":           {edit(func(c jwt.MapClaims) { c["iat"] = 0 }), providers.ErrInvalidSignature, "iat"},
		"no exp":             {edit(func(c jwt.MapClaims) { delete(c, "exp") }), providers.ErrInvalidSignature, "exp"},
		"exp not a number":   {edit(func(c jwt.MapClaims) { c["exp"] = "soon" }), providers.ErrInvalidSignature, "claims"},
		"expired":            {claims(now.Add(-time.Hour - googleplay.ClockSkew - time.Second)), providers.ErrTimestampTooOld, "expired"},
		"not yet valid":      {claims(now.Add(googleplay.ClockSkew + time.Second)), providers.ErrTimestampTooNew, "iat"},
		"lifetime too long":  {edit(func(c jwt.MapClaims) { c["exp"] = now.Add(googleplay.MaxLifetime).Unix() }), providers.ErrTimestampTooNew, "exp"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ks := newKeyServer(t, map[string]*rsa.PublicKey{kidOne: &keyOne().PublicKey})
			v := build(t, ks, &clock{now: now})
			req := sample("136969346945")
			req.Header.Set("Authorization", "Bearer "+token(t, keyOne(), kidOne, c.claims))
			err := v.Verify(req)
			require.ErrorIs(t, err, c.want)
			require.ErrorContains(t, err, c.says)
			require.True(t, providers.IsSignatureError(err))
			require.Zero(t, ks.fetches.Load(), "refused before any key is fetched")
		})
	}
}

// TestTimeBoundaries: google-auth-library's rules to the second: now in
// [iat − 300 s, exp + 300 s], exp < now + 86400 s.
func TestTimeBoundaries(t *testing.T) {
	t.Parallel()
	ks := newKeyServer(t, map[string]*rsa.PublicKey{kidOne: &keyOne().PublicKey})
	now := providertest.Now
	v := build(t, ks, &clock{now: now})
	check := func(iat, exp time.Time, want error) {
		t.Helper()
		c := claims(iat)
		c["exp"] = exp.Unix()
		req := sample("1")
		req.Header.Set("Authorization", "Bearer "+token(t, keyOne(), kidOne, c))
		if want == nil {
			require.NoError(t, v.Verify(req), "iat %v exp %v", iat.Sub(now), exp.Sub(now))
		} else {
			require.ErrorIs(t, v.Verify(req), want, "iat %v exp %v", iat.Sub(now), exp.Sub(now))
		}
	}
	skew := googleplay.ClockSkew
	check(now.Add(skew), now.Add(skew+time.Hour), nil)
	check(now.Add(skew+time.Second), now.Add(skew+time.Hour), providers.ErrTimestampTooNew)
	check(now.Add(-skew-time.Hour), now.Add(-skew), nil)
	check(now.Add(-skew-time.Hour), now.Add(-skew-time.Second), providers.ErrTimestampTooOld)
	check(now, now.Add(googleplay.MaxLifetime-time.Second), nil)
	check(now, now.Add(googleplay.MaxLifetime), providers.ErrTimestampTooNew)
	// Between seconds: the library's clock has milliseconds.
	v2 := build(t, ks, &clock{now: now.Add(500 * time.Millisecond)})
	c := claims(now.Add(-time.Hour - skew))
	req := sample("1")
	req.Header.Set("Authorization", "Bearer "+token(t, keyOne(), kidOne, c))
	require.NoError(t, v.Verify(req))
	require.ErrorIs(t, v2.Verify(req), providers.ErrTimestampTooOld)
}

// TestAlgorithms: only RS256 is accepted; none, HS256, other RSA and EC
// algorithms, and an RS256 signature under a header naming another
// algorithm are refused, without fetching a key.
func TestAlgorithms(t *testing.T) {
	t.Parallel()
	ks := newKeyServer(t, map[string]*rsa.PublicKey{kidOne: &keyOne().PublicKey})
	v := build(t, ks, &clock{now: providertest.Now})
	c := claims(providertest.Now)
	sign := func(m jwt.SigningMethod, key any) string {
		tok := jwt.NewWithClaims(m, c)
		tok.Header["kid"] = kidOne
		s, err := tok.SignedString(key)
		require.NoError(t, err)
		return s
	}
	ec, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	jwks, err := googleplay.JWKS(map[string]*rsa.PublicKey{kidOne: &keyOne().PublicKey})
	require.NoError(t, err)
	good := token(t, keyOne(), kidOne, c)
	_, rest, _ := strings.Cut(good, ".")
	relabel := func(header string) string {
		return base64.RawURLEncoding.EncodeToString([]byte(header)) + "." + rest
	}
	for name, tok := range map[string]string{
		"none":             sign(jwt.SigningMethodNone, jwt.UnsafeAllowNoneSignatureType),
		"HS256 (the JWKS)": sign(jwt.SigningMethodHS256, jwks),
		"RS512":            sign(jwt.SigningMethodRS512, keyOne()),
		"PS256":            sign(jwt.SigningMethodPS256, keyOne()),
		"ES256":            sign(jwt.SigningMethodES256, ec),
		"relabelled none":  relabel(`{"alg":"none","kid":"` + kidOne + `"}`),
		"relabelled rs256": relabel(`{"alg":"rs256","kid":"` + kidOne + `"}`),
		"crit":             relabel(`{"alg":"RS256","kid":"` + kidOne + `","crit":["exp"]}`),
	} {
		req := sample("1")
		req.Header.Set("Authorization", "Bearer "+tok)
		require.ErrorIs(t, v.Verify(req), providers.ErrInvalidSignature, name)
	}
	require.Zero(t, ks.fetches.Load(), "no key is fetched for a refused algorithm")
}

// TestAuthorizationHeader: the header's form.
func TestAuthorizationHeader(t *testing.T) {
	t.Parallel()
	ks := newKeyServer(t, map[string]*rsa.PublicKey{kidOne: &keyOne().PublicKey})
	v := build(t, ks, &clock{now: providertest.Now})
	tok := token(t, keyOne(), kidOne, claims(providertest.Now))
	for _, ok := range []string{"Bearer " + tok, "bearer " + tok, "BEARER  " + tok + " "} {
		req := sample("1")
		req.Header.Set("Authorization", ok)
		require.NoError(t, v.Verify(req), ok)
	}
	req := sample("1")
	require.ErrorIs(t, v.Verify(req), providers.ErrNoSignature)
	req.Header.Set("Authorization", " ")
	require.ErrorIs(t, v.Verify(req), providers.ErrNoSignature)
	for _, bad := range []string{tok, "Basic " + tok, "Bearer", "Bearer ", "Token " + tok, "Bearer " + tok + "x", "Bearer " + tok + " x"} {
		req.Header.Set("Authorization", bad)
		require.ErrorIs(t, v.Verify(req), providers.ErrInvalidSignature, bad)
	}
	req.Header = http.Header{"Authorization": {"Bearer " + tok, "Bearer " + tok}}
	require.ErrorIs(t, v.Verify(req), providers.ErrInvalidSignature, "two Authorization headers")
}

// TestParseToken: malformed tokens are invalid signatures, never panics.
func TestParseToken(t *testing.T) {
	t.Parallel()
	good := token(t, keyOne(), kidOne, claims(providertest.Now))
	tok, err := googleplay.ParseToken(good)
	require.NoError(t, err)
	require.Equal(t, kidOne, tok.Kid)
	require.Equal(t, audience, tok.Audience)
	require.Equal(t, serviceAccount, tok.Email)
	require.True(t, tok.EmailVerified)
	require.Equal(t, float64(providertest.Now.Unix()), tok.IssuedAt)
	require.Len(t, tok.Signature, 256)
	require.True(t, strings.HasPrefix(good, tok.SigningInput+"."))

	enc := func(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }
	h, p, _ := strings.Cut(good, ".")
	p, sig, _ := strings.Cut(p, ".")
	claimsOK := `{"iss":"accounts.google.com","aud":"a","iat":1,"exp":2}`
	for name, bad := range map[string]string{
		"empty":            "",
		"two parts":        h + "." + p,
		"four parts":       good + ".x",
		"padded":           h + "=." + p + "." + sig,
		"std alphabet":     strings.NewReplacer("-", "+", "_", "/").Replace(good),
		"newline":          h + "\n." + p + "." + sig,
		"no kid":           enc(`{"alg":"RS256"}`) + "." + p + "." + sig,
		"empty kid":        enc(`{"alg":"RS256","kid":""}`) + "." + p + "." + sig,
		"long kid":         enc(`{"alg":"RS256","kid":"`+strings.Repeat("k", 257)+`"}`) + "." + p + "." + sig,
		"kid not string":   enc(`{"alg":"RS256","kid":7}`) + "." + p + "." + sig,
		"header array":     enc(`["RS256"]`) + "." + p + "." + sig,
		"header trailing":  enc(`{"alg":"RS256","kid":"k"} {}`) + "." + p + "." + sig,
		"payload array":    h + "." + enc(`[]`) + "." + sig,
		"payload deep":     h + "." + enc(`{"x":`+strings.Repeat("[", 100)+strings.Repeat("]", 100)+`}`) + "." + sig,
		"iat not number":   h + "." + enc(`{"iss":"accounts.google.com","aud":"a","iat":"x","exp":2}`) + "." + sig,
		"iat infinite":     h + "." + enc(`{"iss":"accounts.google.com","aud":"a","iat":1e999,"exp":2}`) + "." + sig,
		"aud object":       h + "." + enc(`{"iss":"accounts.google.com","aud":{},"iat":1,"exp":2}`) + "." + sig,
		"iss number":       h + "." + enc(`{"iss":1,"aud":"a","iat":1,"exp":2}`) + "." + sig,
		"short signature":  h + "." + enc(claimsOK) + "." + sig[:100],
		"empty signature":  h + "." + enc(claimsOK) + ".",
		"signature !b64":   h + "." + enc(claimsOK) + "." + sig[:len(sig)-1] + "*",
		"over 8 KiB":       h + "." + enc(`{"iss":"`+strings.Repeat("i", 8<<10)+`"}`) + "." + sig,
		"header not b64":   "!!!." + p + "." + sig,
		"payload not json": h + "." + enc("not json") + "." + sig,
	} {
		_, err := googleplay.ParseToken(bad)
		require.ErrorIs(t, err, providers.ErrInvalidSignature, name)
		require.NotContains(t, err.Error(), sig[:20], "%s: the error quotes the token", name)
	}
}

// TestPackageName: with package_name set, only Developer Notifications of
// that package are accepted (401 naming packageName), before any key is
// fetched.
func TestPackageName(t *testing.T) {
	t.Parallel()
	ks := newKeyServer(t, map[string]*rsa.PublicKey{kidOne: &keyOne().PublicKey})
	v := build(t, ks, &clock{now: providertest.Now}, "package_name", packageName)
	require.NoError(t, v.Verify(authorize(t, sample("1"), providertest.Now)))
	require.NoError(t, v.Verify(authorize(t, push("2", rtdn("testNotification")), providertest.Now)))
	fetches := ks.fetches.Load()
	for name, data := range map[string]string{
		"another package": strings.Replace(rtdn("subscriptionNotification"), packageName, "com.example.other", 1),
		"prefix":          strings.Replace(rtdn("subscriptionNotification"), packageName, packageName+".debug", 1),
		"no packageName":  `{"version":"1.0","eventTimeMillis":"1","testNotification":{"version":"1.0"}}`,
		"not an RTDN":     `{"order_id":"8841","status":"paid"}`,
		"not JSON":        "hello",
		"package number":  `{"packageName":7,"testNotification":{}}`,
	} {
		err := v.Verify(authorize(t, push("3", data), providertest.Now))
		require.ErrorIs(t, err, providers.ErrInvalidSignature, name)
		require.ErrorContains(t, err, "packageName", name)
	}
	noData := authorize(t, providertest.Request(`{"message":{"messageId":"4","attributes":{"k":"v"}},"subscription":"s"}`), providertest.Now)
	require.ErrorIs(t, v.Verify(noData), providers.ErrInvalidSignature)
	deep := authorize(t, providertest.Request(`{"message":`+strings.Repeat("[", 70)+strings.Repeat("]", 70)+`}`), providertest.Now)
	require.ErrorIs(t, v.Verify(deep), providers.ErrTooDeep)
	require.Equal(t, fetches, ks.fetches.Load(), "refused before any key is fetched")

	// Without package_name any push verifies, RTDN or not.
	all := build(t, ks, &clock{now: providertest.Now})
	require.NoError(t, all.Verify(authorize(t, push("5", `{"order_id":"8841"}`), providertest.Now)))
	require.NoError(t, all.Verify(noData))
}

// TestResolve: the id, type and time of pushes of every shape.
func TestResolve(t *testing.T) {
	t.Parallel()
	ks := newKeyServer(t, map[string]*rsa.PublicKey{kidOne: &keyOne().PublicKey})
	v := build(t, ks, &clock{now: providertest.Now})
	published := providertest.Now.Add(-time.Second).Truncate(time.Millisecond)
	for _, kind := range googleplay.NotificationTypes {
		ev, err := v.Resolve(push("7", rtdn(kind)))
		require.NoError(t, err)
		require.Equal(t, providers.Event{ID: "7", Type: kind, Time: time.UnixMilli(eventMillis).UTC()}, ev)
	}
	for name, c := range map[string]struct {
		data, typ string
		at        time.Time
	}{
		"not an RTDN":          {`{"order_id":"8841"}`, "", published},
		"not JSON":             {"plain text", "", published},
		"two kinds":            {`{"packageName":"p","testNotification":{},"subscriptionNotification":{}}`, "", published},
		"kind not an object":   {`{"packageName":"p","testNotification":true}`, "", published},
		"kind null":            {`{"packageName":"p","testNotification":null,"voidedPurchaseNotification":{}}`, "voidedPurchaseNotification", published},
		"eventTimeMillis num":  {`{"eventTimeMillis":1764504000123,"testNotification":{}}`, "testNotification", time.UnixMilli(1764504000123)},
		"eventTimeMillis bad":  {`{"eventTimeMillis":"soon","testNotification":{}}`, "testNotification", published},
		"eventTimeMillis huge": {`{"eventTimeMillis":"99999999999999999","testNotification":{}}`, "testNotification", published},
		"eventTimeMillis neg":  {`{"eventTimeMillis":-5,"testNotification":{}}`, "testNotification", published},
	} {
		ev, err := v.Resolve(push("8", c.data))
		require.NoError(t, err, name)
		require.Equal(t, "8", ev.ID, name)
		require.Equal(t, c.typ, ev.Type, name)
		require.True(t, c.at.Equal(ev.Time), "%s: %v", name, ev.Time)
	}

	// Data as protobuf's JSON mapping may write it: URL-safe or unpadded.
	raw := []byte(rtdn("testNotification") + "??>>")
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		ev, err := v.Resolve(providertest.Request(`{"message":{"data":"` + enc.EncodeToString(raw) + `","messageId":"9"}}`))
		require.NoError(t, err)
		require.Equal(t, providers.Event{ID: "9"}, ev, "trailing bytes: not JSON")
	}
	ev, err := v.Resolve(providertest.Request(`{"message":{"data":"` + base64.RawURLEncoding.EncodeToString([]byte(rtdn("testNotification"))) + `","messageId":"9"}}`))
	require.NoError(t, err)
	require.Equal(t, "testNotification", ev.Type)

	// No data (attributes only), publish_time only.
	ev, err = v.Resolve(providertest.Request(`{"message":{"attributes":{"a":"b"},"message_id":"10","messageId":"10","publish_time":"2026-11-30T11:59:59.5Z"}}`))
	require.NoError(t, err)
	require.Equal(t, "10", ev.ID)
	require.Empty(t, ev.Type)
	require.True(t, ev.Time.Equal(time.Date(2026, 11, 30, 11, 59, 59, 5e8, time.UTC)), "%v", ev.Time)
	// Data over 64 KiB is carried, not read.
	big := base64.StdEncoding.EncodeToString([]byte(`{"testNotification":{},"pad":"` + strings.Repeat("x", 64<<10) + `"}`))
	ev, err = v.Resolve(providertest.Request(`{"message":{"data":"` + big + `","messageId":"11"}}`))
	require.NoError(t, err)
	require.Equal(t, providers.Event{ID: "11"}, ev)

	for name, body := range map[string]string{
		"no messageId":     `{"message":{"data":"e30=","message_id":""}}`,
		"empty messageId":  `{"message":{"data":"e30=","messageId":"","message_id":""}}`,
		"blank messageId":  `{"message":{"messageId":" "}}`,
		"null messageId":   `{"message":{"messageId":null}}`,
		"only message_id":  `{"message":{"message_id":"12"}}`,
		"case-folded name": `{"message":{"MessageId":"12"}}`,
	} {
		_, err := v.Resolve(providertest.Request(body))
		require.ErrorIs(t, err, providers.ErrNoEventID, name)
	}
	for name, body := range map[string]string{
		"ids differ":         `{"message":{"messageId":"12","message_id":"13"}}`,
		"id not string":      `{"message":{"messageId":12}}`,
		"data not string":    `{"message":{"messageId":"12","data":{}}}`,
		"publishTime number": `{"message":{"messageId":"12","publishTime":5}}`,
		"no message":         `{"subscription":"s"}`,
		"message array":      `{"message":[]}`,
		"array":              `[]`,
		"trailing":           `{"message":{"messageId":"12"}} {}`,
		"deep":               `{"message":{"messageId":"12","x":` + strings.Repeat("[", 70) + strings.Repeat("]", 70) + `}}`,
	} {
		_, err := v.Resolve(providertest.Request(body))
		require.ErrorIs(t, err, providers.ErrMalformed, name)
	}
}

func TestSettings(t *testing.T) {
	t.Parallel()
	base := map[string]any{"audience": audience, "service_account": serviceAccount}
	with := func(k string, val any) map[string]any {
		m := map[string]any{}
		for k, v := range base {
			m[k] = v
		}
		if val == nil {
			delete(m, k)
		} else {
			m[k] = val
		}
		return m
	}
	for _, c := range []struct {
		settings map[string]any
		want     string
	}{
		{nil, "googleplay.audience: required"},
		{with("audience", nil), "googleplay.audience: required"},
		{with("audience", " "+audience), "googleplay.audience"},
		{with("service_account", nil), "googleplay.service_account: required"},
		{with("service_account", "rtdn-push"), "googleplay.service_account"},
		{with("service_account", "a b@example.com"), "googleplay.service_account"},
		{with("package_name", "com.example.app "), "googleplay.package_name"},
		{with("keys_url", "http://www.googleapis.com/oauth2/v3/certs"), "googleplay.keys_url"},
		{with("keys_url", "/oauth2/v3/certs"), "googleplay.keys_url"},
		{with("keys_url", "https://user:pw@www.googleapis.com/oauth2/v3/certs"), "googleplay.keys_url"},
		{with("secret", "x"), "googleplay"},
	} {
		_, err := googleplay.New(providers.Config{Settings: providertest.DecodeSettings(c.settings)})
		require.ErrorContains(t, err, c.want, "%v", c.settings)
	}
	for _, ok := range []map[string]any{
		base,
		with("package_name", packageName),
		with("keys_url", "https://www.googleapis.com/oauth2/v3/certs"),
		with("keys_url", "http://127.0.0.1:8080/certs"),
		with("keys_url", "http://localhost/certs"),
	} {
		_, err := googleplay.New(providers.Config{Settings: providertest.DecodeSettings(ok)})
		require.NoError(t, err, "%v", ok)
	}
	// secrets are not used (Google holds the keys): given, they are an error
	// naming the field rather than silently ignored.
	_, err := googleplay.New(providers.Config{Secrets: []string{"unused"}, Settings: providertest.DecodeSettings(base)})
	require.ErrorContains(t, err, "secrets: googleplay takes none")
}
