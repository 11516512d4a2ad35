package twilio_test

import (
	"bytes"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	twilioclient "github.com/twilio/twilio-go/client"

	"github.com/hookline/hookline/providers"
	"github.com/hookline/hookline/providers/providertest"
	"github.com/hookline/hookline/providers/twilio"
)

var _ providers.Provider = (*twilio.Verifier)(nil)
var _ providers.Signer = (*twilio.Verifier)(nil)

func formRequest(rawURL, body string, header ...string) *providers.Request {
	req := providertest.Request(body, header...)
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded; charset=UTF-8")
	u, err := url.Parse(rawURL)
	if err != nil {
		panic(err)
	}
	req.URL = u
	return req
}

// sample is a message status callback carrying the idempotency token id; an
// empty id builds one with neither token nor SID.
func sample(id string) *providers.Request {
	vals := url.Values{
		"AccountSid":    {"AC0123456789abcdef0123456789abcdef"},
		"ApiVersion":    {"2010-04-01"},
		"From":          {"+15017122661"},
		"To":            {"+15558675310"},
		"MessageStatus": {"delivered"},
		"SmsStatus":     {"delivered"},
		"Body":          {"Hello & welcome: 100% = ünïcode+plus"},
	}
	req := formRequest("https://hooks.example.com/webhooks/twilio?source=sms", vals.Encode())
	if id != "" {
		vals.Set("MessageSid", "SM0123456789abcdef0123456789abcdef")
		req = formRequest("https://hooks.example.com/webhooks/twilio?source=sms", vals.Encode(), twilio.IdempotencyHeader, id)
	}
	return req
}

func harness() providertest.Harness {
	return providertest.Harness{
		Provider: twilio.Name,
		Secrets:  []string{"12345", "0123456789abcdef0123456789abcdef"},
		Delivery: sample,
		WantType: "delivered",
	}
}

func TestConformance(t *testing.T) {
	t.Parallel()
	providertest.Run(t, harness())
}

func build(t *testing.T, settings map[string]any, tokens ...string) *twilio.Verifier {
	t.Helper()
	v, err := twilio.New(providers.Config{Source: "test", Secrets: tokens, Settings: providertest.DecodeSettings(settings)})
	require.NoError(t, err)
	return v
}

// Vectors of twilio-go's request_validator_test.go.
const (
	vectorToken = "12345"
	vectorURL   = "https://mycompany.com/myapp.php?foo=1&bar=2"
	vectorSig   = "vOEb5UThFn24KEfnOFLQY2AE5FY="
	vectorJSON  = `{"property": "value", "boolean": true}`
	vectorHash  = "0a1ff7634d9ab3b95db5c9a2dfe9416e41502b283a80c7cf19632632f96e6620"
)

var vectorParams = url.Values{
	"Digits": {"1234"}, "CallSid": {"CA1234567890ABCDE"}, "To": {"+18005551212"}, "Caller": {"+14158675309"},
	"From": {"+14158675309"}, "ReasonConferenceEnded": {"test"}, "Reason": {"Participant"},
}

func TestSDKVectors(t *testing.T) {
	t.Parallel()
	v := build(t, nil, vectorToken)

	req := formRequest(vectorURL, vectorParams.Encode(), twilio.Header, vectorSig)
	require.NoError(t, v.Verify(req))
	// Signed without the port, received with it.
	req.URL, _ = url.Parse(strings.Replace(vectorURL, ".com", ".com:1234", 1))
	require.NoError(t, v.Verify(req))
	req.URL, _ = url.Parse(strings.Replace(vectorURL, ".com", ".com:443", 1))
	require.NoError(t, v.Verify(req))
	// http without port.
	req = formRequest(strings.Replace(vectorURL, "https", "http", 1), vectorParams.Encode(), twilio.Header, "n2xBNyzSW7rfYStDtOFiFMv7qNo=")
	require.NoError(t, v.Verify(req))
	// Wrong sort order (ReasonConferenceEnded before Reason).
	req = formRequest(vectorURL, vectorParams.Encode(), twilio.Header, "95+Bu0JVPi0r/SsESZCVf0dWAjw=")
	require.ErrorIs(t, v.Verify(req), providers.ErrInvalidSignature)

	// Form body property=value&boolean=true.
	req = formRequest(vectorURL, "property=value&boolean=true", twilio.Header, "NBdBDr/T/lgjI+tlgpXjKZQZs/k=")
	require.NoError(t, v.Verify(req))

	// JSON body: bodySHA256 in the URL.
	jsonReq := func(rawURL, sig string) *providers.Request {
		r := providertest.Request(vectorJSON, twilio.Header, sig)
		r.URL, _ = url.Parse(rawURL)
		return r
	}
	require.NoError(t, v.Verify(jsonReq(vectorURL+"&bodySHA256="+vectorHash, "a9nBmqA0ju/hNViExpshrM61xv4=")))
	require.NoError(t, v.Verify(jsonReq("https://mycompany.com/myapp.php?bodySHA256="+vectorHash, "y77kIzt2vzLz71DgmJGsen2scGs=")))
	// The URL's HMAC is right but the body is not the hashed one.
	bad := jsonReq("https://mycompany.com/myapp.php?bodySHA256="+vectorHash, "y77kIzt2vzLz71DgmJGsen2scGs=")
	bad.Body = []byte(`{"property": "value", "boolean": false}`)
	require.ErrorIs(t, v.Verify(bad), providers.ErrInvalidSignature)
	// A JSON body without bodySHA256 is not covered by anything.
	require.ErrorIs(t, v.Verify(jsonReq(vectorURL, vectorSig)), providers.ErrInvalidSignature)
}

// TestTwilioGoOracle: what we sign, twilio-go's RequestValidator accepts.
func TestTwilioGoOracle(t *testing.T) {
	t.Parallel()
	v := build(t, nil, "oracle_token")
	validator := twilioclient.NewRequestValidator("oracle_token")

	for _, rawURL := range []string{
		"https://hooks.example.com/webhooks/twilio",
		"https://hooks.example.com:8443/webhooks/twilio?a=1&b=two%20words",
		"http://127.0.0.1:8080/webhooks/twilio",
	} {
		req := sample("tok-1")
		req.URL, _ = url.Parse(rawURL)
		require.NoError(t, v.Sign(req, time.Time{}))
		require.NoError(t, v.Verify(req))
		require.True(t, validator.ValidateBody(req.URL.String(), req.Body, req.Header.Get(twilio.Header)), rawURL)

		jsonReq := providertest.Request(`{"event":"x","n":[1,2]}`)
		jsonReq.URL, _ = url.Parse(rawURL)
		require.NoError(t, v.Sign(jsonReq, time.Time{}))
		require.Contains(t, jsonReq.URL.RawQuery, "bodySHA256=")
		require.NoError(t, v.Verify(jsonReq))
		require.True(t, validator.ValidateBody(jsonReq.URL.String(), jsonReq.Body, jsonReq.Header.Get(twilio.Header)), rawURL)
	}

	// And the other way, on the SDK's published signature.
	params := map[string]string{}
	for k, vs := range vectorParams {
		params[k] = vs[0]
	}
	sdk := twilioclient.NewRequestValidator(vectorToken)
	require.True(t, sdk.Validate(vectorURL, params, vectorSig))
}

func TestRepeatedParams(t *testing.T) {
	t.Parallel()
	v := build(t, nil, vectorToken)
	body := "Media=b&Media=a&Media=b&To=%2B1"
	// twilio-node: every value sorted, each as name+value.
	node := formRequest(vectorURL, body)
	require.NoError(t, v.Sign(node, time.Time{}))
	require.NoError(t, v.Verify(node))
	// Changing any value of a repeated name breaks the signature.
	tampered := formRequest(vectorURL, "Media=b&Media=a&Media=c&To=%2B1")
	tampered.Header.Set(twilio.Header, node.Header.Get(twilio.Header))
	require.ErrorIs(t, v.Verify(tampered), providers.ErrInvalidSignature)
	// twilio-go's shortcut (a signature over the first value only) is
	// refused: it would leave the other values unauthenticated.
	validator := twilioclient.NewRequestValidator(vectorToken)
	firstOnly := formRequest(vectorURL, "Media=b&To=%2B1")
	require.NoError(t, v.Sign(firstOnly, time.Time{}))
	goReq := formRequest(vectorURL, body)
	require.True(t, validator.ValidateBody(vectorURL, goReq.Body, firstOnly.Header.Get(twilio.Header)))
	goReq.Header.Set(twilio.Header, firstOnly.Header.Get(twilio.Header))
	require.ErrorIs(t, v.Verify(goReq), providers.ErrInvalidSignature)
}

func TestURLSetting(t *testing.T) {
	t.Parallel()
	// Twilio called the public URL; hookline sees the proxied one.
	public := build(t, map[string]any{"url": "https://mycompany.com/myapp.php"}, vectorToken)
	req := formRequest("http://10.0.0.7:8080/webhooks/twilio?foo=1&bar=2", vectorParams.Encode(), twilio.Header, vectorSig)
	require.NoError(t, public.Verify(req))
	require.ErrorIs(t, build(t, nil, vectorToken).Verify(req), providers.ErrInvalidSignature)

	// No URL at all.
	req.URL = nil
	require.ErrorIs(t, build(t, nil, vectorToken).Verify(req), providers.ErrInvalidSignature)

	for _, bad := range []string{"mycompany.com/x", "ftp://mycompany.com/x", "https://mycompany.com/x?foo=1", "https://", "https://x/#frag"} {
		_, err := twilio.New(providers.Config{Secrets: []string{"t"}, Settings: providertest.DecodeSettings(map[string]any{"url": bad})})
		require.ErrorContains(t, err, "twilio.url", bad)
	}
	_, err := twilio.New(providers.Config{Secrets: []string{"t"}, Settings: providertest.DecodeSettings(map[string]any{"uri": "https://x"})})
	require.Error(t, err)
	_, err = twilio.New(providers.Config{})
	require.Error(t, err)

	// Sign of a JSON body with no request URL uses twilio.url.
	j := providertest.Request(vectorJSON)
	j.URL = nil
	require.NoError(t, public.Sign(j, time.Time{}))
	require.Equal(t, "https://mycompany.com/myapp.php?bodySHA256="+vectorHash, j.URL.String())
	require.NoError(t, public.Verify(j))
}

func TestResolve(t *testing.T) {
	t.Parallel()
	v := build(t, nil, vectorToken)
	resolve := func(body string, header ...string) (providers.Event, error) {
		return v.Resolve(formRequest(vectorURL, body, header...))
	}
	ev, err := resolve("MessageSid=SM1&MessageStatus=sent", twilio.IdempotencyHeader, "tok")
	require.NoError(t, err)
	require.Equal(t, providers.Event{ID: "tok", Type: "sent"}, ev)

	ev, err = resolve("MessageSid=SM1&MessageStatus=sent")
	require.NoError(t, err)
	require.Equal(t, providers.Event{ID: "SM1:sent", Type: "sent"}, ev)
	ev, err = resolve("MessageSid=SM1&MessageStatus=delivered")
	require.NoError(t, err)
	require.Equal(t, "SM1:delivered", ev.ID)

	ev, err = resolve("CallSid=CA1&CallStatus=completed")
	require.NoError(t, err)
	require.Equal(t, providers.Event{ID: "CA1:completed", Type: "completed"}, ev)

	ev, err = resolve("SmsSid=SM2&Body=hi")
	require.NoError(t, err)
	require.Equal(t, providers.Event{ID: "SM2"}, ev)

	_, err = resolve("Body=hi")
	require.ErrorIs(t, err, providers.ErrNoEventID)
	_, err = resolve("Body=%zz")
	require.ErrorIs(t, err, providers.ErrMalformed)

	j := providertest.Request(vectorJSON, twilio.IdempotencyHeader, "tok-json")
	ev, err = v.Resolve(j)
	require.NoError(t, err)
	require.Equal(t, providers.Event{ID: "tok-json"}, ev)
	_, err = v.Resolve(providertest.Request(vectorJSON))
	require.ErrorIs(t, err, providers.ErrNoEventID)

	require.Equal(t, "header:I-Twilio-Idempotency-Token, else {form:MessageSid|CallSid|SmsSid}[:{form:MessageStatus|CallStatus}]", v.Describe().DefaultEventID)
}

func TestURLVariants(t *testing.T) {
	t.Parallel()
	for in, want := range map[string][]string{
		"https://a.example/x?q=1":       {"https://a.example/x?q=1", "https://a.example:443/x?q=1"},
		"http://a.example/x":            {"http://a.example/x", "http://a.example:80/x"},
		"https://a.example:8443/x":      {"https://a.example:8443/x", "https://a.example/x"},
		"https://[2001:db8::1]:8443/x":  {"https://[2001:db8::1]:8443/x", "https://[2001:db8::1]/x"},
		"https://[2001:db8::1]/x":       {"https://[2001:db8::1]/x", "https://[2001:db8::1]:443/x"},
		"https://a.example/p%2Fq?x=%20": {"https://a.example/p%2Fq?x=%20", "https://a.example:443/p%2Fq?x=%20"},
	} {
		u, err := url.Parse(in)
		require.NoError(t, err)
		require.Equal(t, want, twilio.URLVariants(u), in)
	}
}

func FuzzParseHeader(f *testing.F) {
	f.Add(vectorSig)
	f.Add("vOEb5UThFn24KEfnOFLQY2AE5FY")
	f.Add("")
	f.Fuzz(func(t *testing.T, v string) {
		sig, err := twilio.ParseHeader(v)
		if err == nil && len(sig) != 20 {
			t.Fatalf("%q accepted as %x", v, sig)
		}
	})
}

// FuzzSignVerify: for any URL and form body, what Sign produces Verify
// accepts, twilio-go agrees when no parameter repeats, and a one-byte change
// of the body is rejected. Nothing panics.
func FuzzSignVerify(f *testing.F) {
	f.Add(vectorURL, vectorParams.Encode(), byte(3))
	f.Add("https://h.example:8443/p?x=1&x=2", "A=1&A=0&b=", byte(0))
	f.Add("http://[::1]/", "", byte(1))
	f.Add("https://h.example/%zz", "a=%zz", byte(7))
	v, err := twilio.New(providers.Config{Secrets: []string{vectorToken}})
	if err != nil {
		f.Fatal(err)
	}
	validator := twilioclient.NewRequestValidator(vectorToken)
	f.Fuzz(func(t *testing.T, rawURL, body string, flip byte) {
		u, err := url.Parse(rawURL)
		// Fragments never reach a server, so they are no part of a real request URL.
		if err != nil || u.Host == "" || u.Fragment != "" || strings.Contains(rawURL, "#") || (u.Scheme != "http" && u.Scheme != "https") {
			return
		}
		req := &providers.Request{Body: []byte(body), Header: http.Header{"Content-Type": {"application/x-www-form-urlencoded"}}, URL: u}
		if err := v.Sign(req, time.Time{}); err != nil {
			_ = v.Verify(req)
			return
		}
		if err := v.Verify(req); err != nil {
			t.Fatalf("own signature rejected for %q %q: %v", rawURL, body, err)
		}
		params, _ := url.ParseQuery(body)
		single := true
		for _, vs := range params {
			single = single && len(vs) == 1
		}
		if single && !strings.Contains(u.Host, "[") && !validator.ValidateBody(u.String(), req.Body, req.Header.Get(twilio.Header)) {
			t.Fatalf("twilio-go rejects our signature for %q %q", rawURL, body)
		}
		if len(body) > 0 {
			bad := providertest.Clone(req)
			bad.Body[int(flip)%len(bad.Body)] ^= 0x20
			if pa, perr := url.ParseQuery(string(bad.Body)); perr == nil && sameParams(pa, params) {
				return // e.g. a flipped '+' that still decodes to the same values
			}
			if v.Verify(bad) == nil {
				t.Fatalf("tampered body verified: %q", bad.Body)
			}
		}
	})
}

func sameParams(a, b url.Values) bool {
	if len(a) != len(b) {
		return false
	}
	for k, va := range a {
		vb := b[k]
		if strings.Join(va, "\x00") != strings.Join(vb, "\x00") {
			return false
		}
	}
	return true
}

// TestContentKey: the idempotency token is not signed; a replay under a
// fresh one has the original's content key, other parameters another key.
func TestContentKey(t *testing.T) {
	t.Parallel()
	other := sample("tok-other")
	other.Body = []byte(url.Values{"MessageSid": {"SM0123456789abcdef0123456789abcdef"}, "MessageStatus": {"failed"}}.Encode())
	providertest.ContentKeyReplay(t, harness(), func(r *providers.Request) {
		r.Header.Set(twilio.IdempotencyHeader, "tok-fresh")
	}, other)
	require.False(t, build(t, nil, "t").Describe().IDSigned)
}

// TestContentKeySignedString: the key follows what the signature covers,
// not the bytes: a form re-encoded or reordered, or a URL under which the
// same signature verifies, keys the same.
func TestContentKeySignedString(t *testing.T) {
	t.Parallel()
	v := build(t, nil, vectorToken)
	key := func(r *providers.Request) []byte {
		t.Helper()
		require.NoError(t, v.Verify(r))
		k := v.ContentKey(r)
		require.Len(t, k, 32)
		return k
	}
	orig := formRequest(vectorURL, vectorParams.Encode(), twilio.Header, vectorSig)
	want := key(orig)

	// Reordered and re-encoded parameters: the same signed string.
	reordered := formRequest(vectorURL, "To=%2B18005551212&Reason=Participant&ReasonConferenceEnded=test&Digits=1234&CallSid=CA1234567890ABCDE&Caller=%2b14158675309&From=+14158675309",
		twilio.Header, vectorSig)
	reordered.Body = []byte(strings.Replace(string(reordered.Body), "From=+", "From=%2B", 1))
	require.Equal(t, want, key(reordered))

	// The URL with an explicit port: the signature verifies, the key is the same.
	for _, port := range []string{":443", ":1234"} {
		alt := providertest.Clone(orig)
		alt.URL, _ = url.Parse(strings.Replace(vectorURL, ".com", ".com"+port, 1))
		require.Equal(t, want, key(alt), port)
	}

	// Another value: another key.
	changed := formRequest(vectorURL, "property=value&boolean=true", twilio.Header, "NBdBDr/T/lgjI+tlgpXjKZQZs/k=")
	require.NotEqual(t, want, key(changed))

	// JSON: the URL carries the body's hash, so another body is another key.
	j1 := providertest.Request(vectorJSON, twilio.IdempotencyHeader, "tok-1")
	j1.URL, _ = url.Parse("https://mycompany.com/myapp.php")
	require.NoError(t, v.Sign(j1, time.Time{}))
	j2 := providertest.Request(`{"property": "value", "boolean": false}`, twilio.IdempotencyHeader, "tok-1")
	j2.URL, _ = url.Parse("https://mycompany.com/myapp.php")
	require.NoError(t, v.Sign(j2, time.Time{}))
	require.NotEqual(t, key(j1), key(j2))
	replay := providertest.Clone(j1)
	replay.Header.Set(twilio.IdempotencyHeader, "tok-2")
	require.Equal(t, key(j1), key(replay))

	// The scheme is part of the key: the same content under another scheme
	// never collides.
	require.NotEqual(t, want, providers.ContentDigest("github", []byte(vectorURL)))

	// Nothing to key on without a URL, or with an unreadable form.
	noURL := providertest.Clone(orig)
	noURL.URL = nil
	require.Nil(t, v.ContentKey(noURL))
	bad := formRequest(vectorURL, "a=%zz")
	require.Nil(t, v.ContentKey(bad))
}

// FuzzContentKey: for any URL and form body that Sign signs, the content key
// survives what the signature survives (a fresh idempotency token, the body
// re-encoded, every URL variant that verifies), and ContentKey never panics
// on what does not verify.
func FuzzContentKey(f *testing.F) {
	f.Add(vectorURL, vectorParams.Encode(), "x=1")
	f.Add("https://h.example:8443/p?x=1&x=2", "A=1&A=0&b=", "A=1")
	f.Add("http://[::1]/", "", "")
	f.Add("https://h.example/%zz", "a=%zz", "a=b")
	f.Add("https://h.example/p?bodySHA256=00", "a=b", "a=c")
	v, err := twilio.New(providers.Config{Secrets: []string{vectorToken}})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, rawURL, body, otherBody string) {
		u, err := url.Parse(rawURL)
		if err != nil || u.Host == "" || u.Fragment != "" || strings.Contains(rawURL, "#") || (u.Scheme != "http" && u.Scheme != "https") {
			return
		}
		req := &providers.Request{Body: []byte(body), Header: http.Header{"Content-Type": {"application/x-www-form-urlencoded"}}, URL: u}
		_ = v.ContentKey(req) // unsigned: anything but a panic
		if v.Sign(req, time.Time{}) != nil || v.Verify(req) != nil {
			return
		}
		key := v.ContentKey(req)
		if len(key) != 32 {
			t.Fatalf("no content key for a verified request %q %q", rawURL, body)
		}
		replay := providertest.Clone(req)
		replay.Header.Set(twilio.IdempotencyHeader, "fresh")
		params, _ := url.ParseQuery(body)
		replay.Body = []byte(params.Encode())
		if replay.URL.Query().Has(twilio.BodyHashParam) {
			replay.Body = req.Body // the body is covered by its hash
		}
		if v.Verify(replay) == nil && !bytes.Equal(v.ContentKey(replay), key) {
			t.Fatalf("re-encoded replay keys differently: %q vs %q", body, replay.Body)
		}
		for _, variant := range twilio.URLVariants(u) {
			alt := providertest.Clone(req)
			alt.URL, _ = url.Parse(variant)
			if alt.URL != nil && v.Verify(alt) == nil && !bytes.Equal(v.ContentKey(alt), key) {
				t.Fatalf("URL variant %q keys differently from %q", variant, rawURL)
			}
		}
		other := &providers.Request{Body: []byte(otherBody), Header: http.Header{"Content-Type": {"application/x-www-form-urlencoded"}}, URL: u}
		if v.Sign(other, time.Time{}) != nil || v.Verify(other) != nil {
			return
		}
		op, _ := url.ParseQuery(otherBody)
		if twilio.ParamStrings(op)[0] != twilio.ParamStrings(params)[0] && other.URL.String() == req.URL.String() && bytes.Equal(v.ContentKey(other), key) {
			t.Fatalf("different signed parameters key the same: %q vs %q", body, otherBody)
		}
	})
}
