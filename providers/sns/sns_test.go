package sns_test

import (
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"math/big"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookline/hookline/providers"
	"github.com/hookline/hookline/providers/providertest"
	"github.com/hookline/hookline/providers/sns"
)

var _ providers.Provider = (*sns.Verifier)(nil)

func rsaKey() *rsa.PrivateKey {
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		panic(err)
	}
	return k
}

// signingKey is the test's stand-in for SNS's key, and wrongKey one that no
// certificate holds; each made once (RSA key generation is slow under -race).
var (
	signingKey = sync.OnceValue(rsaKey)
	wrongKey   = sync.OnceValue(rsaKey)
)

// The topics: the source's two, and one of somebody else's.
const (
	topicArn   = "arn:aws:sns:us-east-1:123456789012:hookline-orders"
	otherTopic = "arn:aws:sns:us-east-1:123456789012:hookline-refunds"
	foreignArn = "arn:aws:sns:us-east-1:999999999999:attacker-topic"
)

// certPath is where the test servers serve the signing certificate.
const certPath = "/SimpleNotificationService-9c6465fa7f48f5cacd23014631ec1136.pem"

func certPEM(t testing.TB, key *rsa.PrivateKey, notBefore, notAfter time.Time) []byte {
	t.Helper()
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "sns.amazonaws.com"},
		NotBefore:    notBefore,
		NotAfter:     notAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

// certServer serves certificates on loopback and counts fetches. While down
// is set it answers 503.
type certServer struct {
	*httptest.Server
	fetches atomic.Int64
	down    atomic.Bool
	mu      sync.Mutex
	certs   map[string][]byte
}

func newCertServer(t testing.TB) *certServer {
	cs := &certServer{certs: map[string][]byte{}}
	cs.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		cs.fetches.Add(1)
		if cs.down.Load() {
			http.Error(w, "upstream connect error", http.StatusServiceUnavailable)
			return
		}
		if r.URL.Path == "/redirect.pem" {
			http.Redirect(w, r, certPath, http.StatusFound)
			return
		}
		cs.mu.Lock()
		c, ok := cs.certs[r.URL.Path]
		cs.mu.Unlock()
		if !ok {
			http.NotFound(w, r)
			return
		}
		_, _ = w.Write(c)
	}))
	t.Cleanup(cs.Close)
	cs.put(certPath, certPEM(t, signingKey(), providertest.Now.Add(-24*time.Hour), providertest.Now.Add(365*24*time.Hour)))
	return cs
}

func (cs *certServer) put(path string, pemBytes []byte) {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	cs.certs[path] = pemBytes
}

func (cs *certServer) host() string {
	u, _ := url.Parse(cs.URL)
	return u.Host
}

// awsTransport sends every request to the test server cs instead, as if it
// were the host the URL names: how a test serves SigningCertURLs on AWS's
// hosts (which the adapter allows over https only) from loopback.
type awsTransport struct{ to *url.URL }

func (a awsTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.URL.Scheme, r.URL.Host, r.Host = a.to.Scheme, a.to.Host, ""
	return http.DefaultTransport.RoundTrip(r)
}

func (cs *certServer) awsClient() *http.Client {
	u, _ := url.Parse(cs.URL)
	return &http.Client{Transport: awsTransport{to: u}}
}

// awsCertURL is SNS's SigningCertURL shape; tests serve it through awsClient.
const awsCertURL = "https://sns.us-east-1.amazonaws.com" + certPath

// msg is an SNS message: its fields, written in SNS's order by body.
type msg map[string]string

var snsOrder = []string{"Type", "MessageId", "Token", "TopicArn", "Subject", "Message", "SubscribeURL", "Timestamp",
	"SignatureVersion", "Signature", "SigningCertURL", "UnsubscribeURL"}

func (m msg) with(kv ...string) msg {
	c := msg{}
	for k, v := range m {
		c[k] = v
	}
	for i := 0; i+1 < len(kv); i += 2 {
		c[kv[i]] = kv[i+1]
	}
	return c
}

func (m msg) without(keys ...string) msg {
	c := m.with()
	for _, k := range keys {
		delete(c, k)
	}
	return c
}

func jsonText(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// body writes m as SNS does: one key a line, `"Key" : "value"`.
func (m msg) body() []byte {
	var lines []string
	for _, k := range snsOrder {
		if v, ok := m[k]; ok {
			lines = append(lines, "  "+jsonText(k)+" : "+jsonText(v))
		}
	}
	var rest []string
	for k := range m {
		if !slices.Contains(snsOrder, k) {
			rest = append(rest, k)
		}
	}
	slices.Sort(rest)
	for _, k := range rest {
		lines = append(lines, "  "+jsonText(k)+" : "+jsonText(m[k]))
	}
	return []byte("{\n" + strings.Join(lines, ",\n") + "\n}")
}

// request is m as SNS POSTs it.
func (m msg) request() *providers.Request {
	u, _ := url.Parse("https://hooks.example.com/webhooks/sns")
	h := http.Header{}
	h.Set("Content-Type", "text/plain; charset=UTF-8")
	h.Set("User-Agent", "Amazon Simple Notification Service Agent")
	h.Set(sns.HeaderMessageType, m["Type"])
	h.Set(sns.HeaderMessageID, m["MessageId"])
	h.Set(sns.HeaderTopicArn, m["TopicArn"])
	return &providers.Request{Body: m.body(), Header: h, URL: u}
}

// sign signs m as SNS does with key, SignatureVersion version, the
// certificate at certURL.
func sign(t testing.TB, key *rsa.PrivateKey, version, certURL string, m msg) msg {
	t.Helper()
	m = m.with("SignatureVersion", version, "SigningCertURL", certURL)
	hash, d := crypto.SHA256, sha256.Sum256([]byte(sns.Message(m).StringToSign()))
	digest := d[:]
	if version == "1" {
		s := sha1.Sum([]byte(sns.Message(m).StringToSign()))
		hash, digest = crypto.SHA1, s[:]
	}
	sig, err := rsa.SignPKCS1v15(rand.Reader, key, hash, digest)
	require.NoError(t, err)
	return m.with("Signature", base64.StdEncoding.EncodeToString(sig))
}

func snsTime(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z") }

func notification(id string) msg {
	return msg{
		"Type":      sns.TypeNotification,
		"MessageId": id,
		"TopicArn":  topicArn,
		"Subject":   "Order 8841 paid",
		"Message":   `{"order_id":"8841","status":"paid","amount":2000}`,
		"Timestamp": snsTime(providertest.Now),
		"UnsubscribeURL": "https://sns.us-east-1.amazonaws.com/?Action=Unsubscribe&SubscriptionArn=" + topicArn +
			":0f5d9c9e-4a7b-4a8e-9f5e-3c1e0e6c2b11",
	}
}

const token = "2336412f37fb687f5d51e6e2425dacbba8e3d4c7ff9d4b7b8e2bd9fa5f7b1c9e" +
	"b6f1ff6e1d2c3b4a5968778695a4b3c2d1e0f1e2d3c4b5a69788796a5b4c3d2e1f0"

func confirmation(typ, id string) msg {
	return msg{
		"Type":      typ,
		"MessageId": id,
		"Token":     token,
		"TopicArn":  topicArn,
		"Message": "You have chosen to subscribe to the topic " + topicArn +
			".\nTo confirm the subscription, visit the SubscribeURL included in this message.",
		"SubscribeURL": "https://sns.us-east-1.amazonaws.com/?Action=ConfirmSubscription&TopicArn=" + topicArn + "&Token=" + token,
		"Timestamp":    snsTime(providertest.Now),
	}
}

// decode reads a test body back into a msg.
func decode(t testing.TB, body []byte) msg {
	t.Helper()
	m, err := sns.ParseMessage(body)
	require.NoError(t, err)
	return msg(m)
}

// suiteSign is the conformance suite's signer: the "secret" is the topic
// ARN the message is published to.
func suiteSign(key *rsa.PrivateKey, certURL string) func(t testing.TB, secret string, req *providers.Request, now time.Time) {
	return func(t testing.TB, secret string, req *providers.Request, now time.Time) {
		m := sign(t, key, "2", certURL, decode(t, req.Body).with("TopicArn", secret, "Timestamp", snsTime(now)))
		signed := m.request()
		req.Body, req.Header = signed.Body, signed.Header
	}
}

func TestConformance(t *testing.T) {
	t.Parallel()
	cs := newCertServer(t)
	certURL := cs.URL + certPath
	providertest.Run(t, providertest.Harness{
		Provider: sns.Name,
		// The topics the source accepts: a message published to the
		// second, checked against the first, is the suite's wrong secret.
		Secrets:  []string{topicArn, otherTopic},
		Settings: map[string]any{"cert_hosts": []string{cs.host()}},
		// SNS retries under the original Timestamp, so none is checked by
		// default; the suite checks the one a source sets.
		Tolerance: 2 * time.Hour,
		Delivery:  func(id string) *providers.Request { return notification(id).request() },
		WantType:  sns.TypeNotification,
		WantTime:  providertest.Now,
		Sign:      suiteSign(signingKey(), certURL),
		// Right topic and certificate URL, another key.
		WrongSigner: func(t testing.TB, req *providers.Request) {
			suiteSign(wrongKey(), certURL)(t, topicArn, req, providertest.Now)
		},
		Features: providertest.Features{
			Timestamp: true,
			// The signature covers the signed fields' values, not the body
			// bytes (whitespace, UnsubscribeURL, SigningCertURL):
			// TestTamperedSignedFields covers the signed fields.
			BodyNotSigned:   true,
			SignatureInBody: true,
		},
	})
}

type bundle struct {
	cs      *certServer
	certURL string
	now     time.Time
	mu      sync.Mutex
}

func (b *bundle) clock() time.Time {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.now
}

func (b *bundle) setClock(t time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.now = t
}

func setup(t *testing.T) *bundle {
	t.Helper()
	cs := newCertServer(t)
	return &bundle{cs: cs, certURL: cs.URL + certPath, now: providertest.Now}
}

// build is an adapter accepting topicArn and otherTopic, allowed to fetch
// from the bundle's server.
func (b *bundle) build(t *testing.T) *sns.Verifier {
	t.Helper()
	v, err := sns.New(providers.Config{Source: "test", Secrets: []string{topicArn, otherTopic},
		Settings: providertest.DecodeSettings(map[string]any{"cert_hosts": []string{b.cs.host()}}), Now: b.clock})
	require.NoError(t, err)
	return v
}

// buildAWS is an adapter with the default settings whose fetches reach the
// bundle's server through awsClient.
func (b *bundle) buildAWS(t *testing.T) *sns.Verifier {
	t.Helper()
	v, err := sns.New(providers.Config{Source: "test", Secrets: []string{topicArn, otherTopic}, Now: b.clock, HTTPClient: b.cs.awsClient()})
	require.NoError(t, err)
	return v
}

func TestVerify(t *testing.T) {
	t.Parallel()
	b := setup(t)
	v := b.buildAWS(t)
	for _, version := range []string{"1", "2"} {
		for _, m := range []msg{notification("6f1a1f2e-0001-5c3b-9a0d-" + version), notification("6f1a1f2e-0002-5c3b-9a0d-" + version).without("Subject")} {
			req := sign(t, signingKey(), version, awsCertURL, m).request()
			require.NoError(t, v.Verify(req), "SignatureVersion %s, subject %v", version, m["Subject"] != "")
			ev, err := v.Resolve(req)
			require.NoError(t, err)
			require.Equal(t, providers.Event{ID: m["MessageId"], Type: sns.TypeNotification, Time: providertest.Now}, ev)
		}
	}

	// Signed with another key than the certificate's.
	forged := sign(t, wrongKey(), "2", awsCertURL, notification("6f1a1f2e-0003")).request()
	require.ErrorIs(t, v.Verify(forged), providers.ErrInvalidSignature)

	// One fetch for all of them, and for many more deliveries.
	for i := range 20 {
		req := sign(t, signingKey(), []string{"1", "2"}[i%2], awsCertURL, notification("6f1a1f2e-1"+string(rune('a'+i)))).request()
		require.NoError(t, v.Verify(req))
	}
	require.Equal(t, int64(1), b.cs.fetches.Load(), "the certificate is cached")
}

// TestTamperedSignedFields: the signature covers each signed field's value
// (the conformance suite's byte flips cannot, as it does not cover the body
// bytes); the unsigned fields are not covered.
func TestTamperedSignedFields(t *testing.T) {
	t.Parallel()
	b := setup(t)
	v := b.build(t)
	for _, version := range []string{"1", "2"} {
		genuine := sign(t, signingKey(), version, b.certURL, notification("a4c1a0b2-tamper-"+version))
		require.NoError(t, v.Verify(genuine.request()))
		for name, bad := range map[string]msg{
			"Message":          genuine.with("Message", strings.Replace(genuine["Message"], "8841", "8842", 1)),
			"MessageId":        genuine.with("MessageId", genuine["MessageId"]+"x"),
			"Subject":          genuine.with("Subject", "Order 8841 refunded"),
			"Timestamp":        genuine.with("Timestamp", snsTime(providertest.Now.Add(time.Millisecond))),
			"TopicArn":         genuine.with("TopicArn", otherTopic), // also accepted by the source: the signature refuses it
			"Type":             genuine.with("Type", sns.TypeSubscriptionConfirmation, "SubscribeURL", "https://sns.us-east-1.amazonaws.com/?Action=ConfirmSubscription", "Token", token),
			"Subject removed":  genuine.without("Subject"),
			"Subject added":    sign(t, signingKey(), version, b.certURL, notification("a4c1a0b2-nosubj-"+version).without("Subject")).with("Subject", "added"),
			"Token added":      genuine.with("Token", token),
			"SubscribeURL":     genuine.with("SubscribeURL", "https://sns.us-east-1.amazonaws.com/?Action=ConfirmSubscription"),
			"other version":    genuine.with("SignatureVersion", map[string]string{"1": "2", "2": "1"}[version]),
			"unknown version":  genuine.with("SignatureVersion", "3"),
			"Signature":        genuine.with("Signature", sign(t, signingKey(), version, b.certURL, notification("other"))["Signature"]),
			"Signature cut":    genuine.with("Signature", genuine["Signature"][:len(genuine["Signature"])-4]),
			"Signature base64": genuine.with("Signature", "!"+genuine["Signature"][1:]),
		} {
			err := v.Verify(bad.request())
			require.ErrorIs(t, err, providers.ErrInvalidSignature, "%s (SignatureVersion %s)", name, version)
		}
		// Unsigned fields: the signature stays valid.
		for name, ok := range map[string]msg{
			"UnsubscribeURL": genuine.with("UnsubscribeURL", genuine["UnsubscribeURL"]+"&x=1"),
			"unknown key":    genuine.with("Extra", "1"),
		} {
			require.NoError(t, v.Verify(ok.request()), name)
		}
		// Key order and whitespace are not signed either.
		compact, err := json.Marshal(map[string]string(genuine))
		require.NoError(t, err)
		req := genuine.request()
		req.Body = compact
		require.NoError(t, v.Verify(req))
	}
}

// TestTopicAllowList: a message SNS really signed, for a topic the source
// does not list, is refused (401) naming TopicArn, before any fetch.
func TestTopicAllowList(t *testing.T) {
	t.Parallel()
	b := setup(t)
	v := b.build(t)
	req := sign(t, signingKey(), "2", b.certURL, notification("9a8b7c6d-foreign").with("TopicArn", foreignArn)).request()
	err := v.Verify(req)
	require.ErrorIs(t, err, providers.ErrInvalidSignature)
	require.True(t, providers.IsSignatureError(err))
	require.ErrorContains(t, err, "TopicArn")
	for _, arn := range []string{foreignArn, topicArn, otherTopic} {
		require.NotContains(t, err.Error(), arn, "the error names the field, not the topics")
	}
	require.Zero(t, b.cs.fetches.Load(), "a foreign topic's message costs no fetch")

	// The same message for a source that lists that topic verifies.
	w, err := sns.New(providers.Config{Secrets: []string{foreignArn},
		Settings: providertest.DecodeSettings(map[string]any{"cert_hosts": []string{b.cs.host()}}), Now: b.clock})
	require.NoError(t, err)
	require.NoError(t, w.Verify(req))

	// Both of the source's topics are accepted.
	for _, arn := range []string{topicArn, otherTopic} {
		require.NoError(t, v.Verify(sign(t, signingKey(), "1", b.certURL, notification("9a8b7c6d-"+arn[len(arn)-6:]).with("TopicArn", arn)).request()))
	}
}

// TestConfirmations: SubscriptionConfirmation and UnsubscribeConfirmation
// sign Message, MessageId, SubscribeURL, Timestamp, Token, TopicArn and Type.
func TestConfirmations(t *testing.T) {
	t.Parallel()
	b := setup(t)
	v := b.build(t)
	for _, typ := range []string{sns.TypeSubscriptionConfirmation, sns.TypeUnsubscribeConfirmation} {
		for _, version := range []string{"1", "2"} {
			genuine := sign(t, signingKey(), version, b.certURL, confirmation(typ, "165545c9-2a5c-472c-8df2-"+typ[:5]+version))
			require.Equal(t, "Message\n"+genuine["Message"]+"\nMessageId\n"+genuine["MessageId"]+"\nSubscribeURL\n"+genuine["SubscribeURL"]+
				"\nTimestamp\n"+genuine["Timestamp"]+"\nToken\n"+token+"\nTopicArn\n"+topicArn+"\nType\n"+typ+"\n", sns.Message(genuine).StringToSign())
			req := genuine.request()
			require.NoError(t, v.Verify(req), "%s v%s", typ, version)
			ev, err := v.Resolve(req)
			require.NoError(t, err)
			require.Equal(t, providers.Event{ID: genuine["MessageId"], Type: typ, Time: providertest.Now}, ev)

			for name, bad := range map[string]msg{
				"Token":                genuine.with("Token", token[1:]+"0"),
				"SubscribeURL":         genuine.with("SubscribeURL", "https://evil.example/?Action=ConfirmSubscription&Token="+token),
				"Message":              genuine.with("Message", "You have chosen to subscribe."),
				"no Token":             genuine.without("Token"),
				"no SubscribeURL":      genuine.without("SubscribeURL"),
				"as a Notification":    genuine.with("Type", sns.TypeNotification),
				"Subject added":        genuine.with("Subject", "hi"),
				"foreign topic":        sign(t, signingKey(), version, b.certURL, confirmation(typ, "foreign").with("TopicArn", foreignArn)),
				"signed without Token": signWithout(t, version, b.certURL, genuine, typ),
			} {
				if bad == nil {
					continue
				}
				require.ErrorIs(t, v.Verify(bad.request()), providers.ErrInvalidSignature, "%s %s v%s", name, typ, version)
			}
		}
	}
}

// signWithout is, for an UnsubscribeConfirmation, the message signed over
// the Notification keys (without Token), as sns-validator 0.3.5 checks it;
// AWS's documentation and its PHP validator sign Token, and so does
// hookline: such a signature is refused. nil for other types.
func signWithout(t *testing.T, version, certURL string, m msg, typ string) msg {
	if typ != sns.TypeUnsubscribeConfirmation {
		return nil
	}
	s := sign(t, signingKey(), version, certURL, m.without("Token"))
	return s.with("Token", m["Token"])
}

func TestHeaders(t *testing.T) {
	t.Parallel()
	b := setup(t)
	v := b.build(t)
	genuine := sign(t, signingKey(), "2", b.certURL, notification("0b7e1c52-headers"))
	for _, h := range []struct{ name, value string }{
		{sns.HeaderMessageType, sns.TypeSubscriptionConfirmation},
		{sns.HeaderMessageID, "0b7e1c52-other"},
		{sns.HeaderTopicArn, otherTopic},
	} {
		req := genuine.request()
		req.Header.Set(h.name, h.value)
		err := v.Verify(req)
		require.ErrorIs(t, err, providers.ErrInvalidSignature, h.name)
		require.ErrorContains(t, err, h.name)
		req.Header.Add(h.name, req.Header.Get(h.name))
		require.ErrorIs(t, v.Verify(req), providers.ErrInvalidSignature, "%s twice", h.name)
	}
	// The headers are optional (they are not signed).
	req := genuine.request()
	for _, h := range []string{sns.HeaderMessageType, sns.HeaderMessageID, sns.HeaderTopicArn} {
		req.Header.Del(h)
	}
	require.NoError(t, v.Verify(req))
}

func TestCertURLRules(t *testing.T) {
	t.Parallel()
	b := setup(t)
	v, err := sns.New(providers.Config{Secrets: []string{topicArn},
		Settings: providertest.DecodeSettings(map[string]any{"cert_hosts": []string{b.cs.host(), "localstack.example:4566", "sns.internal.example"}})})
	require.NoError(t, err)
	for raw, ok := range map[string]bool{
		b.certURL:  true,
		awsCertURL: true,
		"https://sns.eu-west-1.amazonaws.com/SimpleNotificationService-1.pem":       true,
		"https://SNS.EU-WEST-1.AmazonAWS.com/SimpleNotificationService-1.pem":       true,
		"https://sns.cn-north-1.amazonaws.com.cn/SimpleNotificationService.pem":     true,
		"https://sns.us-gov-west-1.amazonaws.com/a/b.pem":                           true,
		"https://localstack.example:4566/_aws/sns/SimpleNotificationService-1.pem":  true,
		"https://sns.internal.example/x.pem":                                        true,
		"https://sns.internal.example:443/x.pem":                                    true,
		"http://sns.us-east-1.amazonaws.com" + certPath:                             false, // https only
		"https://sns.us-east-1.amazonaws.com:443" + certPath:                        false, // AWS's hosts: no port, as AWS's validators
		"https://sns.us-east-1.amazonaws.com:" + certPath:                           false,
		"https://sns.us-east-1.amazonaws.com/SimpleNotificationService.crt":         false,
		"https://sns.us-east-1.amazonaws.com/SimpleNotificationService.pem?x=1":     false,
		"https://sns.us-east-1.amazonaws.com/x?.pem":                                false,
		"https://sns.us-east-1.amazonaws.com/x.pem?":                                false,
		"https://sns.us-east-1.amazonaws.com/x.pem#f":                               false,
		"https://sns.us-east-1.amazonaws.com":                                       false,
		"https://sns.us.amazonaws.com/x.pem":                                        false, // region of at least 3 characters
		"https://sns.us-east-1.amazonaws.com.evil.example/x.pem":                    false,
		"https://evil.example/sns.us-east-1.amazonaws.com/x.pem":                    false,
		"https://s3.amazonaws.com/bucket/x.pem":                                     false,
		"https://sns.us-east-1.amazonaws.com.cn.evil/x.pem":                         false,
		"https://bucket.sns.us-east-1.amazonaws.com/x.pem":                          false,
		"https://user@sns.us-east-1.amazonaws.com/x.pem":                            false,
		"ftp://sns.us-east-1.amazonaws.com/x.pem":                                   false,
		"//sns.us-east-1.amazonaws.com/x.pem":                                       false,
		"https:sns.us-east-1.amazonaws.com/x.pem":                                   false,
		"https://localstack.example/x.pem":                                          false, // listed with a port
		"https://sns.internal.example:8443/x.pem":                                   false,
		"http://sns.internal.example/x.pem":                                         false, // not loopback: https only
		"http://127.0.0.1:1/x.pem":                                                  false, // loopback but not listed
		b.cs.URL + "/x.crt":                                                         false,
		"":                                                                          false,
		"https://sns.us-east-1.amazonaws.com/" + strings.Repeat("a", 2048) + ".pem": false,
	} {
		_, got := v.CertURLAllowed(raw)
		require.Equal(t, ok, got, raw)
	}

	// A delivery naming a URL that is not allowed is refused without a
	// fetch: a host not AWS's, plain http, no .pem.
	def := b.buildAWS(t)
	for _, u := range []string{
		b.certURL, // loopback, not listed
		strings.Replace(awsCertURL, "https:", "http:", 1),
		strings.Replace(awsCertURL, "sns.us-east-1.amazonaws.com", "sns.us-east-1.amazonaws.com.evil.example", 1),
		strings.Replace(awsCertURL, "sns.us-east-1.amazonaws.com", "s3.amazonaws.com", 1),
		strings.TrimSuffix(awsCertURL, ".pem") + ".crt",
		awsCertURL + "?x=.pem",
	} {
		req := sign(t, signingKey(), "2", u, notification("7d2c-url")).request()
		err := def.Verify(req)
		require.ErrorIs(t, err, providers.ErrInvalidSignature, u)
		require.NotErrorIs(t, err, providers.ErrUnavailable)
		require.ErrorContains(t, err, "SigningCertURL")
	}
	require.Zero(t, b.cs.fetches.Load(), "no fetch for a URL that is not allowed")

	// Redirects are not followed.
	v = b.build(t)
	req := sign(t, signingKey(), "2", b.cs.URL+"/redirect.pem", notification("7d2c-redirect")).request()
	require.ErrorIs(t, v.Verify(req), providers.ErrInvalidSignature)
	// Unknown certificate path.
	req = sign(t, signingKey(), "2", b.cs.URL+"/SimpleNotificationService-404.pem", notification("7d2c-404")).request()
	err = v.Verify(req)
	require.ErrorIs(t, err, providers.ErrInvalidSignature)
	require.NotErrorIs(t, err, providers.ErrUnavailable)
}

// TestCertUnavailable: a certificate that cannot be fetched for network
// reasons (a 5xx, a refused connection, a timeout) leaves the delivery's
// authenticity unknown: ErrUnavailable (503), not a signature error, and
// nothing is cached.
func TestCertUnavailable(t *testing.T) {
	t.Parallel()
	requireUnavailable := func(t *testing.T, err error) {
		t.Helper()
		require.ErrorIs(t, err, providers.ErrUnavailable)
		require.False(t, providers.IsSignatureError(err), "%v", err)
	}

	t.Run("ServerError", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		v := b.buildAWS(t)
		req := sign(t, signingKey(), "2", awsCertURL, notification("e3b0-5xx")).request()
		b.cs.down.Store(true)
		requireUnavailable(t, v.Verify(req))
		b.cs.down.Store(false)
		require.NoError(t, v.Verify(req))
		require.Equal(t, int64(2), b.cs.fetches.Load())
	})

	t.Run("ConnectionRefused", func(t *testing.T) {
		t.Parallel()
		gone := httptest.NewServer(http.NotFoundHandler())
		u, _ := url.Parse(gone.URL)
		gone.Close()
		v, err := sns.New(providers.Config{Secrets: []string{topicArn}, Now: func() time.Time { return providertest.Now },
			HTTPClient: &http.Client{Transport: awsTransport{to: u}}})
		require.NoError(t, err)
		requireUnavailable(t, v.Verify(sign(t, signingKey(), "2", awsCertURL, notification("e3b0-refused")).request()))
	})

	t.Run("Timeout", func(t *testing.T) {
		t.Parallel()
		hang := httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) { <-r.Context().Done() }))
		t.Cleanup(hang.Close)
		u, _ := url.Parse(hang.URL)
		v, err := sns.New(providers.Config{Secrets: []string{topicArn}, Now: func() time.Time { return providertest.Now },
			HTTPClient: &http.Client{Transport: awsTransport{to: u}, Timeout: 50 * time.Millisecond}})
		require.NoError(t, err)
		requireUnavailable(t, v.Verify(sign(t, signingKey(), "2", awsCertURL, notification("e3b0-timeout")).request()))
	})
}

func TestCertExpiry(t *testing.T) {
	t.Parallel()
	b := setup(t)
	// A certificate valid for one more hour.
	const short = "/SimpleNotificationService-short.pem"
	b.cs.put(short, certPEM(t, signingKey(), providertest.Now.Add(-time.Hour), providertest.Now.Add(time.Hour)))
	v := b.build(t)
	req := sign(t, signingKey(), "2", b.cs.URL+short, notification("c0ffee-expiry")).request()
	require.NoError(t, v.Verify(req))
	require.NoError(t, v.Verify(req))
	require.Equal(t, int64(1), b.cs.fetches.Load(), "cached")

	// Two hours later the cached certificate has expired: it is fetched
	// again, and the (still expired) certificate is refused.
	b.setClock(providertest.Now.Add(2 * time.Hour))
	require.ErrorIs(t, v.Verify(req), providers.ErrInvalidSignature)
	require.Equal(t, int64(2), b.cs.fetches.Load())

	// AWS publishes a renewed certificate at the same URL.
	b.cs.put(short, certPEM(t, signingKey(), providertest.Now.Add(time.Hour), providertest.Now.Add(3*time.Hour)))
	require.NoError(t, v.Verify(req))

	// A certificate not yet valid is refused.
	const future = "/SimpleNotificationService-future.pem"
	b.cs.put(future, certPEM(t, signingKey(), providertest.Now.Add(3*time.Hour), providertest.Now.Add(4*time.Hour)))
	require.ErrorIs(t, v.Verify(sign(t, signingKey(), "2", b.cs.URL+future, notification("c0ffee-future")).request()), providers.ErrInvalidSignature)
}

// TestTolerance: no age limit by default (SNS retries under the original
// Timestamp); a source's tolerance bounds Timestamp both ways.
func TestTolerance(t *testing.T) {
	t.Parallel()
	b := setup(t)
	old := sign(t, signingKey(), "2", b.certURL, notification("5eed-old").with("Timestamp", snsTime(providertest.Now.Add(-30*24*time.Hour)))).request()
	badTime := sign(t, signingKey(), "2", b.certURL, notification("5eed-bad").with("Timestamp", "yesterday")).request()
	v := b.build(t)
	require.NoError(t, v.Verify(old))
	require.NoError(t, v.Verify(badTime))
	ev, err := v.Resolve(badTime)
	require.NoError(t, err)
	require.True(t, ev.Time.IsZero())

	w, err := sns.New(providers.Config{Secrets: []string{topicArn}, Tolerance: 2 * time.Hour,
		Settings: providertest.DecodeSettings(map[string]any{"cert_hosts": []string{b.cs.host()}}), Now: b.clock})
	require.NoError(t, err)
	require.ErrorIs(t, w.Verify(old), providers.ErrTimestampTooOld)
	require.ErrorIs(t, w.Verify(badTime), providers.ErrInvalidSignature)
	require.NoError(t, w.Verify(sign(t, signingKey(), "2", b.certURL, notification("5eed-fresh").with("Timestamp", snsTime(providertest.Now.Add(-time.Hour)))).request()))
}

func TestMissingFields(t *testing.T) {
	t.Parallel()
	b := setup(t)
	v := b.build(t)

	// A blank MessageId verifies (it is signed as it is) but has no event id.
	for _, id := range []string{"", " "} {
		req := sign(t, signingKey(), "2", b.certURL, notification(id)).request()
		require.NoError(t, v.Verify(req))
		_, err := v.Resolve(req)
		require.ErrorIs(t, err, providers.ErrNoEventID)
	}
	_, err := v.Resolve(notification("x").without("MessageId").request())
	require.ErrorIs(t, err, providers.ErrNoEventID)

	// No signature: a message without Signature, SignatureVersion or
	// SigningCertURL (raw message delivery has none of them).
	genuine := sign(t, signingKey(), "2", b.certURL, notification("ab12-missing"))
	for _, k := range []string{"Signature", "SignatureVersion", "SigningCertURL"} {
		require.ErrorIs(t, v.Verify(genuine.without(k).request()), providers.ErrNoSignature, k)
	}
	raw := &providers.Request{Body: []byte(`{"order_id":"8841"}`), Header: http.Header{"X-Amz-Sns-Rawdelivery": {"true"}}}
	require.ErrorIs(t, v.Verify(raw), providers.ErrNoSignature)
	// A signed message missing a field every message has.
	for _, k := range []string{"Type", "MessageId", "TopicArn", "Message", "Timestamp"} {
		m := sign(t, signingKey(), "2", b.certURL, notification("ab12-"+k).without(k))
		require.ErrorIs(t, v.Verify(m.request()), providers.ErrInvalidSignature, k)
	}
	// An unknown Type, even signed.
	require.ErrorIs(t, v.Verify(sign(t, signingKey(), "2", b.certURL, notification("ab12-type").with("Type", "Other")).request()), providers.ErrInvalidSignature)
}

func TestParseMessage(t *testing.T) {
	t.Parallel()
	m, err := sns.ParseMessage([]byte(`{"Type":"Notification","Subject":null,"MessageId":"m\u00e9","Message":"a\nb","Other":{"x":[1,2]},"Count":3} ` + "\n"))
	require.NoError(t, err)
	require.Equal(t, sns.Message{"Type": "Notification", "MessageId": "mé", "Message": "a\nb"}, m)
	require.Equal(t, "Message\na\nb\nMessageId\nmé\nType\nNotification\n", m.StringToSign())

	for body, why := range map[string]string{
		``:                                   "empty",
		`[]`:                                 "not an object",
		`"x"`:                                "not an object",
		`null`:                               "not an object",
		`{"Message":"a","Message":"b"}`:      "duplicate key",
		`{"Message":"a","Mess\u0061ge":"b"}`: "duplicate key, escaped",
		`{"x":1,"x":2}`:                      "duplicate unknown key",
		`{"Message":1}`:                      "not a string",
		`{"Message":{"a":"b"}}`:              "not a string",
		`{"Message":"a"}{}`:                  "data after the object",
		`{"Message":"a"} x`:                  "data after the object",
		`{"Message":"a",}`:                   "trailing comma",
		`{"Message":"a"`:                     "truncated",
		"{\"Message\":\"\xff\"}":             "invalid UTF-8",
	} {
		_, err := sns.ParseMessage([]byte(body))
		require.ErrorIs(t, err, providers.ErrMalformed, why)
	}
	_, err = sns.ParseMessage([]byte(`{"a":` + strings.Repeat("[", providers.MaxJSONDepth+1) + strings.Repeat("]", providers.MaxJSONDepth+1) + `}`))
	require.ErrorIs(t, err, providers.ErrTooDeep)

	// Verify answers such bodies as unsigned (401), a body too deep 400.
	v, err := sns.New(providers.Config{Secrets: []string{topicArn}})
	require.NoError(t, err)
	require.ErrorIs(t, v.Verify(&providers.Request{Body: []byte(`{"Message":"a","Message":"b"}`), Header: http.Header{}}), providers.ErrNoSignature)
	err = v.Verify(&providers.Request{Body: []byte(strings.Repeat("[", 100)), Header: http.Header{}})
	require.ErrorIs(t, err, providers.ErrTooDeep)
}

// TestDuplicateKeyReplay: a genuine message with a second Message key
// prepended, which a first-key-wins reader (gjson, the key resolvers) would
// see, is refused rather than verified on the last key.
func TestDuplicateKeyReplay(t *testing.T) {
	t.Parallel()
	b := setup(t)
	v := b.build(t)
	genuine := sign(t, signingKey(), "2", b.certURL, notification("d0d0-dup")).request()
	require.NoError(t, v.Verify(genuine))
	bad := providertest.Clone(genuine)
	bad.Body = append([]byte(`{"Message":"{\"order_id\":\"6666\"}",`), bad.Body[1:]...)
	require.Error(t, v.Verify(bad))
	require.True(t, providers.IsSignatureError(v.Verify(bad)))
}

func TestSettings(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		secrets  []string
		settings map[string]any
		field    string
	}{
		{nil, nil, "secrets: at least one topic ARN"},
		{[]string{"whsec_probe"}, nil, "secrets[0]: want a topic ARN"},
		{[]string{topicArn, "arn:aws:sqs:us-east-1:123456789012:queue"}, nil, "secrets[1]"},
		{[]string{"arn:aws:sns:us-east-1:123456789012"}, nil, "secrets[0]"},
		{[]string{"arn:aws:sns:us-east-1::topic"}, nil, "secrets[0]"},
		{[]string{topicArn + ":0f5d9c9e-4a7b-4a8e-9f5e-3c1e0e6c2b11"}, nil, "a subscription ARN?"},
		{[]string{topicArn}, map[string]any{"cert_hosts": []string{"https://sns.example/"}}, "sns.cert_hosts[0]"},
		{[]string{topicArn}, map[string]any{"cert_hosts": []string{" "}}, "sns.cert_hosts[0]"},
		{[]string{topicArn}, map[string]any{"topic_arns": []string{topicArn}}, "sns"},
	} {
		_, err := sns.New(providers.Config{Secrets: c.secrets, Settings: providertest.DecodeSettings(c.settings)})
		require.ErrorContains(t, err, c.field, "%v %v", c.secrets, c.settings)
	}
	for _, arn := range []string{topicArn, "arn:aws-cn:sns:cn-north-1:123456789012:orders", "arn:aws-us-gov:sns:us-gov-west-1:123456789012:orders.fifo"} {
		_, err := sns.New(providers.Config{Secrets: []string{arn}})
		require.NoError(t, err, arn)
	}
}

func TestDescribe(t *testing.T) {
	t.Parallel()
	p, err := providers.New(sns.Name, providers.Config{Secrets: []string{topicArn}})
	require.NoError(t, err)
	_, signs := p.(providers.Signer)
	require.False(t, signs, "only AWS holds the key")
	_, keyer := p.(providers.ContentKeyer)
	require.False(t, keyer, "MessageId is signed")
	require.Equal(t, providers.Description{DefaultEventID: "json:MessageId", DefaultEventType: "json:Type", IDSigned: true},
		p.(providers.Describer).Describe())
}

func FuzzCertURLAllowed(f *testing.F) {
	f.Add(awsCertURL)
	f.Add("https://sns.cn-north-1.amazonaws.com.cn/SimpleNotificationService-1.pem")
	f.Add("http://127.0.0.1:8080/c.pem")
	f.Add("https://[::1]:443/x.pem")
	f.Add("https://sns.us-east-1.amazonaws.com:443@evil/x.pem")
	f.Add("https://sns.us-east-1.amazonaws.com%2eevil/x.pem")
	v, err := sns.New(providers.Config{Secrets: []string{topicArn},
		Settings: providertest.DecodeSettings(map[string]any{"cert_hosts": []string{"127.0.0.1:8080"}})})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		u, ok := v.CertURLAllowed(raw)
		if !ok {
			return
		}
		h := strings.ToLower(u.Hostname())
		if u.User != nil || u.RawQuery != "" || u.Fragment != "" || !strings.HasSuffix(u.EscapedPath(), ".pem") || len(raw) > 2048 {
			t.Fatalf("%q allowed (%s)", raw, u)
		}
		switch {
		case u.Scheme == "https" && u.Port() == "" && sns.CertHostPattern.MatchString(h) && u.Host == u.Hostname():
		case (u.Scheme == "https" || u.Scheme == "http") && h == "127.0.0.1" && u.Port() == "8080":
		default:
			t.Fatalf("%q allowed (%s)", raw, u)
		}
	})
}

// FuzzVerifyBody fuzzes the body of a genuine delivery: no panics, and a
// body that verifies carries the genuine message's signed fields.
func FuzzVerifyBody(f *testing.F) {
	cs := newCertServer(f)
	v, err := sns.New(providers.Config{Secrets: []string{topicArn, otherTopic},
		Settings: providertest.DecodeSettings(map[string]any{"cert_hosts": []string{cs.host()}}),
		Now:      func() time.Time { return providertest.Now }})
	if err != nil {
		f.Fatal(err)
	}
	genuine := sign(f, signingKey(), "1", cs.URL+certPath, notification("f00d-fuzz"))
	want := sns.Message(genuine).StringToSign()
	req := genuine.request()
	req.Header = http.Header{}
	f.Add(req.Body)
	compact, _ := json.Marshal(map[string]string(genuine))
	f.Add(compact)
	f.Add([]byte(`{"Type":"Notification","Type":"Notification"}`))
	f.Add([]byte(`{}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		r := providertest.Clone(req)
		r.Body = body
		err := v.Verify(r)
		if err == nil {
			m, perr := sns.ParseMessage(body)
			if perr != nil || m.StringToSign() != want {
				t.Fatalf("a body with other signed content verified: %q", body)
			}
			return
		}
		if !providers.IsSignatureError(err) && !errors.Is(err, providers.ErrTooDeep) && !errors.Is(err, providers.ErrUnavailable) {
			t.Fatalf("unexpected error kind: %v", err)
		}
	})
}
