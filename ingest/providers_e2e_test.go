package ingest_test

// End-to-end tests of every registered provider adapter through the real
// HTTP server into Postgres: a realistic delivery of each provider is signed
// (with the adapter's Signer, or for PayPal, Plaid, SNS and Google Play with the
// test's own keys served on loopback, for SendGrid with the test's own key, for
// the App Store with a test certificate chain), posted, and checked in
// hookline_deliveries, hookline_events and river_job.

import (
	"bytes"
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/hmac"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"log/slog"
	"math/big"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/stretchr/testify/require"

	"github.com/hookline/hookline/ingest"
	"github.com/hookline/hookline/internal/pgtest"
	"github.com/hookline/hookline/providers"
	_ "github.com/hookline/hookline/providers/all"
	"github.com/hookline/hookline/providers/appstore/appstoretest"
	"github.com/hookline/hookline/providers/googleplay"
	"github.com/hookline/hookline/providers/hmacspec"
	"github.com/hookline/hookline/providers/mailgun"
	"github.com/hookline/hookline/providers/meta"
	"github.com/hookline/hookline/providers/paypal"
	"github.com/hookline/hookline/providers/providertest"
	"github.com/hookline/hookline/providers/sendgrid"
	"github.com/hookline/hookline/providers/sns"
	"github.com/hookline/hookline/providers/swsenders"
	"github.com/hookline/hookline/providers/twitch"
	"github.com/hookline/hookline/providers/zoom"
)

// pvCase is one source of the end-to-end server and how to deliver to it.
type pvCase struct {
	source    string // source name; default the provider's name
	provider  string
	secrets   []string
	settings  map[string]any
	tolerance time.Duration
	// eventID and eventType are the source's key-resolver overrides.
	eventID, eventType string
	// delivery builds the unsigned request for id. Its URL, when set, only
	// contributes a query string: the harness points it at the server.
	delivery func(id string) *providers.Request
	// sign signs req at now; nil: the adapter's Signer.
	sign func(t testing.TB, p providers.Provider, req *providers.Request, now time.Time)
	// wantIDs are the event ids the signed req of id resolves to (several
	// for a batch).
	wantIDs func(id string, req *providers.Request) []string
	// items are the exact bytes of each batch item of the delivery of id.
	items    func(id string) [][]byte
	wantType string
	// wantTypes are the batch items' types, in order.
	wantTypes []string
	// tamper breaks the signed request; nil flips a byte in the middle of
	// the body.
	tamper func(req *providers.Request)
	// badStatus is the answer to a tampered delivery (default 401).
	badStatus int
}

func (c *pvCase) name() string {
	if c.source != "" {
		return c.source
	}
	return c.provider
}

func pvJSON(body string, header ...string) *providers.Request {
	h := http.Header{"Content-Type": {"application/json"}}
	for i := 0; i+1 < len(header); i += 2 {
		h.Set(header[i], header[i+1])
	}
	return &providers.Request{Body: []byte(body), Header: h}
}

func pvForm(body string, header ...string) *providers.Request {
	r := pvJSON(body, header...)
	r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	return r
}

func one(id string, _ *providers.Request) []string { return []string{id} }

func sha256Hex(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// ---- PayPal: our own RSA key and certificate, served on loopback ----

const pvPaypalWebhookID = "1JE4291016473214C"

type pvPaypal struct {
	key     *rsa.PrivateKey
	certURL string
	host    string
}

func newPvPaypal(t testing.TB) *pvPaypal {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "messageverificationcerts.paypal.com"},
		NotBefore:    time.Now().Add(-24 * time.Hour),
		NotAfter:     time.Now().Add(365 * 24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/notifications/certs/CERT-360caa42-fca2a594-a5cafa77" {
			http.NotFound(w, r)
			return
		}
		_, _ = w.Write(certPEM)
	}))
	t.Cleanup(srv.Close)
	u, _ := url.Parse(srv.URL)
	return &pvPaypal{key: key, host: u.Host, certURL: srv.URL + "/v1/notifications/certs/CERT-360caa42-fca2a594-a5cafa77"}
}

func (pp *pvPaypal) sign(t testing.TB, _ providers.Provider, req *providers.Request, now time.Time) {
	id := "b2384410-f8d2-11ec-b5e8-" + fmt.Sprintf("%012x", now.UnixNano()&0xffffffffffff)
	ts := now.UTC().Format(time.RFC3339)
	digest := sha256.Sum256([]byte(paypal.SignedString(id, ts, pvPaypalWebhookID, req.Body)))
	sig, err := rsa.SignPKCS1v15(rand.Reader, pp.key, crypto.SHA256, digest[:])
	require.NoError(t, err)
	req.Header.Set(paypal.HeaderTransmissionID, id)
	req.Header.Set(paypal.HeaderTransmissionTime, ts)
	req.Header.Set(paypal.HeaderTransmissionSig, base64.StdEncoding.EncodeToString(sig))
	req.Header.Set(paypal.HeaderCertURL, pp.certURL)
	req.Header.Set(paypal.HeaderAuthAlgo, paypal.AuthAlgo)
}

// ---- Plaid: our own ES256 key behind a loopback /webhook_verification_key/get ----

const (
	pvPlaidClientID = "5f5a4d7e0e2a0c0012345678"
	pvPlaidSecret   = "plaid_sandbox_secret_e2e"
	pvPlaidKid      = "6c5516e1-92dc-479e-a8ff-5a51992e0001"
)

type pvPlaid struct {
	key    *ecdsa.PrivateKey
	keyURL string
}

func newPvPlaid(t testing.TB) *pvPlaid {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			ClientID string `json:"client_id"`
			Secret   string `json:"secret"`
			KeyID    string `json:"key_id"`
		}
		if r.Method != http.MethodPost || json.NewDecoder(r.Body).Decode(&req) != nil ||
			req.ClientID != pvPlaidClientID || req.Secret != pvPlaidSecret || req.KeyID != pvPlaidKid {
			http.Error(w, `{"error_code":"INVALID_WEBHOOK_VERIFICATION_KEY_ID"}`, http.StatusBadRequest)
			return
		}
		pub, _ := key.PublicKey.Bytes() // 0x04 || X || Y
		_ = json.NewEncoder(w).Encode(map[string]any{
			"key": map[string]any{"alg": "ES256", "created_at": 1560466150, "crv": "P-256", "expired_at": nil,
				"kid": pvPlaidKid, "kty": "EC", "use": "sig",
				"x": base64.RawURLEncoding.EncodeToString(pub[1:33]), "y": base64.RawURLEncoding.EncodeToString(pub[33:])},
			"request_id": "RZ6Omi1bzzwDaLo",
		})
	}))
	t.Cleanup(srv.Close)
	return &pvPlaid{key: key, keyURL: srv.URL + "/webhook_verification_key/get"}
}

func (pl *pvPlaid) sign(t testing.TB, _ providers.Provider, req *providers.Request, now time.Time) {
	tok := jwt.NewWithClaims(jwt.SigningMethodES256, jwt.MapClaims{"iat": now.Unix(), "request_body_sha256": sha256Hex(req.Body)})
	tok.Header["kid"] = pvPlaidKid
	s, err := tok.SignedString(pl.key)
	require.NoError(t, err)
	req.Header.Set("Plaid-Verification", s)
}

// ---- SendGrid: our own P-256 key stands in for SendGrid's ----

type pvSendgrid struct {
	key             *ecdsa.PrivateKey
	verificationKey string // the public key, as SendGrid shows it
}

func newPvSendgrid(t testing.TB) *pvSendgrid {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	vk, err := sendgrid.EncodePublicKey(&key.PublicKey)
	require.NoError(t, err)
	return &pvSendgrid{key: key, verificationKey: vk}
}

func (sg *pvSendgrid) sign(t testing.TB, _ providers.Provider, req *providers.Request, now time.Time) {
	require.NoError(t, sendgrid.SignWithKey(req, sg.key, now))
}

// sendgridItems are the events of a SendGrid delivery, their sg_event_ids
// id1, id2 and id3.
func sendgridItems(id string) []string {
	ev := func(n int, event, fields string) string {
		return `{"email":"jon@example.com","event":"` + event + `",` + fields + `"sg_event_id":"` + fmt.Sprintf("%s%d", id, n) +
			`","sg_message_id":"14c5d75ce93.dfd.64b469.filter0001.16648.5515E0B88.0","timestamp":176450399` + fmt.Sprint(n) + `}`
	}
	return []string{ev(1, "processed", `"send_at":0,`), ev(2, "delivered", `"ip":"168.1.1.1","response":"250 OK","tls":1,`),
		ev(3, "open", `"sg_machine_open":false,"useragent":"Mozilla/5.0",`)}
}

// sendgridBody lays the events out as SendGrid does: one a line, CRLF.
func sendgridBody(items []string) string { return "[" + strings.Join(items, ",\r\n") + "]\r\n" }

// ---- SNS: our own RSA key and certificate, served on loopback ----

const pvSnsTopic = "arn:aws:sns:us-east-1:123456789012:hookline-e2e"

type pvSns struct {
	key     *rsa.PrivateKey
	certURL string
	host    string
}

func newPvSns(t testing.TB) *pvSns {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "sns.amazonaws.com"},
		NotBefore:    time.Now().Add(-24 * time.Hour),
		NotAfter:     time.Now().Add(365 * 24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	const path = "/SimpleNotificationService-9c6465fa7f48f5cacd23014631ec1136.pem"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != path {
			http.NotFound(w, r)
			return
		}
		_, _ = w.Write(certPEM)
	}))
	t.Cleanup(srv.Close)
	u, _ := url.Parse(srv.URL)
	return &pvSns{key: key, host: u.Host, certURL: srv.URL + path}
}

// snsOrder is the order SNS writes a message's keys in.
var snsOrder = []string{"Type", "MessageId", "Token", "TopicArn", "Subject", "Message", "SubscribeURL", "Timestamp",
	"SignatureVersion", "Signature", "SigningCertURL", "UnsubscribeURL"}

// sign signs the message in req's body as SNS does (SignatureVersion 2) at
// now, and rewrites the body and the x-amz-sns-* headers as SNS sends them.
func (sn *pvSns) sign(t testing.TB, _ providers.Provider, req *providers.Request, now time.Time) {
	m, err := sns.ParseMessage(req.Body)
	require.NoError(t, err)
	m["Timestamp"] = now.UTC().Format("2006-01-02T15:04:05.000Z")
	m["SignatureVersion"], m["SigningCertURL"] = "2", sn.certURL
	digest := sha256.Sum256([]byte(m.StringToSign()))
	sig, err := rsa.SignPKCS1v15(rand.Reader, sn.key, crypto.SHA256, digest[:])
	require.NoError(t, err)
	m["Signature"] = base64.StdEncoding.EncodeToString(sig)
	var lines []string
	for _, k := range snsOrder {
		if v, ok := m[k]; ok {
			kj, _ := json.Marshal(k)
			vj, _ := json.Marshal(v)
			lines = append(lines, "  "+string(kj)+" : "+string(vj))
		}
	}
	req.Body = []byte("{\n" + strings.Join(lines, ",\n") + "\n}")
	req.Header.Set("Content-Type", "text/plain; charset=UTF-8")
	req.Header.Set(sns.HeaderMessageType, m["Type"])
	req.Header.Set(sns.HeaderMessageID, m["MessageId"])
	req.Header.Set(sns.HeaderTopicArn, m["TopicArn"])
}

// ---- Google Play: our own RSA key stands in for Google's, its JWKS on loopback ----

const (
	pvGoogleplayAudience = "https://hooks.example.com/webhooks/googleplay"
	pvGoogleplayAccount  = "rtdn-push@hookline-e2e.iam.gserviceaccount.com"
	pvGoogleplayKid      = "5f2e4c9a0b7d1e3f6a8c0b2d4e6f8a1c3e5d7f9b"
)

type pvGoogleplay struct {
	key     *rsa.PrivateKey
	keysURL string
}

func newPvGoogleplay(t testing.TB) *pvGoogleplay {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	require.NoError(t, err)
	jwks, err := googleplay.JWKS(map[string]*rsa.PublicKey{pvGoogleplayKid: &key.PublicKey})
	require.NoError(t, err)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "public, max-age=21600")
		_, _ = w.Write(jwks)
	}))
	t.Cleanup(srv.Close)
	return &pvGoogleplay{key: key, keysURL: srv.URL + "/oauth2/v3/certs"}
}

// sign sets the ID token Pub/Sub sends with an authenticated push, issued
// at now for the push subscription's audience and service account. The
// token covers nothing of the body.
func (gp *pvGoogleplay) sign(t testing.TB, _ providers.Provider, req *providers.Request, now time.Time) {
	tok, err := googleplay.SignToken(gp.key, pvGoogleplayKid, googleplay.Claims{Issuer: "https://accounts.google.com",
		Audience: pvGoogleplayAudience, Email: pvGoogleplayAccount, EmailVerified: true,
		Subject: "113774264463038321964", AuthorizedParty: "113774264463038321964", IssuedAt: now, Expiry: now.Add(time.Hour)})
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+tok)
}

// googleplayPush is a Pub/Sub push of message id carrying a Google Play
// subscription notification.
func googleplayPush(id string) *providers.Request {
	data := base64.StdEncoding.EncodeToString([]byte(`{"version":"1.0","packageName":"com.example.hookline","eventTimeMillis":"1764503998000",` +
		`"subscriptionNotification":{"version":"1.0","notificationType":4,"purchaseToken":"PURCHASE_TOKEN_` + id + `","subscriptionId":"premium.monthly"}}`))
	return pvJSON(`{"message":{"data":"` + data + `","messageId":"` + id + `","message_id":"` + id +
		`","publishTime":"2026-11-30T11:59:59.123Z","publish_time":"2026-11-30T11:59:59.123Z"},"subscription":"projects/hookline-e2e/subscriptions/play-rtdn"}`)
}

// ---- Adyen: items signed by the test (the adapter's Signer must agree) ----

const (
	pvAdyenKey   = "44782DEF547AAA06C910C43932B1EB0C71FC68D9D0C057550C48EC2ACF6BA056"
	pvAdyenOther = "DFB1EB5485895CFA84146406857104ABB4CBCABDC8AAF103A624C8F6A3EAAB00"
)

// adyenItem is one NotificationRequestItem object, signed with keyHex, laid
// out with spaces as a sender may.
func adyenItem(keyHex, psp, code, success string, value int) string {
	key, _ := hex.DecodeString(keyHex)
	signing := strings.Join([]string{psp, "", "HooklineECOM", "order-" + psp, fmt.Sprint(value), "EUR", code, success}, ":")
	m := hmac.New(sha256.New, key)
	m.Write([]byte(signing))
	sig := base64.StdEncoding.EncodeToString(m.Sum(nil))
	return `{ "additionalData": { "authCode": "065696", "cardSummary": "0004", "hmacSignature": "` + sig + `" },` +
		` "amount": { "currency": "EUR", "value": ` + fmt.Sprint(value) + ` },` +
		` "eventCode": "` + code + `", "eventDate": "2026-11-30T12:00:00+01:00", "merchantAccountCode": "HooklineECOM",` +
		` "merchantReference": "order-` + psp + `", "operations": ["CANCEL", "CAPTURE", "REFUND"], "paymentMethod": "visa",` +
		` "pspReference": "` + psp + `", "reason": "065696:0004:03/2030", "success": "` + success + `" }`
}

func adyenBody(items ...string) string {
	var b strings.Builder
	b.WriteString("{\n  \"live\": \"false\",\n  \"notificationItems\": [\n")
	for i, it := range items {
		if i > 0 {
			b.WriteString(",\n")
		}
		b.WriteString(`    { "NotificationRequestItem": ` + it + ` }`)
	}
	b.WriteString("\n  ]\n}\n")
	return b.String()
}

func adyenItems(id string) []string {
	return []string{
		adyenItem(pvAdyenKey, id+"A", "AUTHORISATION", "true", 2000),
		adyenItem(pvAdyenKey, id+"B", "AUTHORISATION", "false", 1500),
		adyenItem(pvAdyenKey, id+"C", "CAPTURE", "true", 2000),
	}
}

// ---- GoCardless ----

func gocardlessItems(id string) []string {
	ev := func(n int, resource, action, link string) string {
		return `{"id": "` + fmt.Sprintf("%s%d", id, n) + `", "created_at": "2026-11-30T12:00:0` + fmt.Sprint(n) + `.123Z", "resource_type": "` + resource +
			`", "action": "` + action + `", "links": {"` + link + `": "PM00` + fmt.Sprint(n) + `"}, "details": {"origin": "gocardless", "cause": "payment_confirmed",` +
			` "description": "Enough time has passed since the payment was submitted for the banks to return an error, so this payment is now confirmed."}, "metadata": {}}`
	}
	return []string{ev(1, "payments", "confirmed", "payment"), ev(2, "payments", "paid_out", "payment"), ev(3, "mandates", "active", "mandate")}
}

func gocardlessBody(items []string) string {
	return "{\n  \"events\": [\n    " + strings.Join(items, ",\n    ") + "\n  ],\n  \"meta\": {\"webhook_id\": \"WB0001ABCDEF\"}\n}"
}

// ---- Braintree ----

func braintreeXML(id, price string) string {
	return `<?xml version="1.0" encoding="UTF-8"?>
<notification>
  <kind>subscription_charged_successfully</kind>
  <timestamp type="datetime">2026-11-30T12:00:00Z</timestamp>
  <subject>
    <subscription>
      <id>` + id + `</id>
      <status>Active</status>
      <price>` + price + `</price>
      <transactions type="array">
        <transaction><id>txn_` + id + `</id><amount>` + price + `</amount><status>submitted_for_settlement</status></transaction>
      </transactions>
    </subscription>
  </subject>
</notification>
`
}

// pvCases returns every source of the end-to-end server.
// ---- App Store: a test chain shaped like Apple's stands in for Apple's ----

const (
	pvAppstoreBundle = "com.example.hookline"
	pvAppstoreAppID  = 1234567890
)

// appstoreNotification is a decoded App Store Server Notification V2 whose
// notificationUUID is id; the test chain signs it (and its transaction).
func appstoreNotification(t testing.TB, chain *appstoretest.Chain, id string) *providers.Request {
	tx, err := chain.SignJWS([]byte(`{"transactionId":"2000000123456789","originalTransactionId":"2000000123456789","bundleId":"` + pvAppstoreBundle +
		`","productId":"com.example.hookline.pro.monthly","type":"Auto-Renewable Subscription","environment":"Production","signedDate":1764504000000}`))
	require.NoError(t, err)
	return pvJSON(`{"notificationType":"DID_CHANGE_RENEWAL_STATUS","subtype":"AUTO_RENEW_DISABLED","notificationUUID":"` + id + `","version":"2.0",` +
		`"data":{"appAppleId":` + fmt.Sprint(pvAppstoreAppID) + `,"bundleId":"` + pvAppstoreBundle + `","bundleVersion":"42","environment":"Production",` +
		`"signedTransactionInfo":"` + tx + `","status":1}}`)
}

func pvCases(t testing.TB) []*pvCase {
	pp := newPvPaypal(t)
	pl := newPvPlaid(t)
	sn := newPvSns(t)
	sg := newPvSendgrid(t)
	as := appstoretest.MustChain(appstoretest.Options{})
	gp := newPvGoogleplay(t)
	svixSign := func(t testing.TB, p providers.Provider, req *providers.Request, now time.Time) {
		require.NoError(t, p.(providers.Signer).Sign(req, now))
		for _, h := range []string{"Id", "Timestamp", "Signature"} {
			req.Header.Set("Svix-"+h, req.Header.Get("Webhook-"+h))
			req.Header.Del("Webhook-" + h)
		}
	}
	return append([]*pvCase{
		{
			provider: "stripe", secrets: []string{"whsec_e2e_stripe"},
			delivery: func(id string) *providers.Request {
				return pvJSON(`{"id":"` + id + `","object":"event","api_version":"2025-08-27.basil","created":1764504000,"data":{"object":{"id":"pi_` + id + `","object":"payment_intent","amount":2000,"amount_received":2000,"currency":"usd","status":"succeeded"}},"livemode":false,"pending_webhooks":1,"request":{"id":null,"idempotency_key":null},"type":"payment_intent.succeeded"}`)
			},
			wantIDs: one, wantType: "payment_intent.succeeded",
		},
		{
			provider: "paypal", settings: map[string]any{"webhook_id": pvPaypalWebhookID, "cert_hosts": []string{pp.host}},
			delivery: func(id string) *providers.Request {
				return pvJSON(`{"id":"` + id + `","event_version":"1.0","create_time":"2026-11-30T11:59:58.123Z","resource_type":"capture","resource_version":"2.0","event_type":"PAYMENT.CAPTURE.COMPLETED","summary":"Payment completed for $ 20.0 USD","resource":{"id":"80F85758S3080410K","status":"COMPLETED","amount":{"value":"20.00","currency_code":"USD"},"final_capture":true},"links":[{"href":"https://api.paypal.com/v1/notifications/webhooks-events/` + id + `","rel":"self","method":"GET"}]}`)
			},
			sign: pp.sign, wantIDs: one, wantType: "PAYMENT.CAPTURE.COMPLETED",
		},
		{
			provider: "appstore",
			settings: map[string]any{"bundle_id": pvAppstoreBundle, "app_apple_id": pvAppstoreAppID, "root_certs": []string{as.RootPEM()}},
			delivery: func(id string) *providers.Request { return appstoreNotification(t, as, id) },
			sign: func(t testing.TB, _ providers.Provider, req *providers.Request, now time.Time) {
				require.NoError(t, as.Sign(req, now))
			},
			wantIDs: one, wantType: "DID_CHANGE_RENEWAL_STATUS.AUTO_RENEW_DISABLED",
		},
		{
			provider: "adyen", secrets: []string{pvAdyenKey},
			delivery: func(id string) *providers.Request { return pvJSON(adyenBody(adyenItems(id)...)) },
			sign: func(t testing.TB, p providers.Provider, req *providers.Request, now time.Time) {
				before := bytes.Clone(req.Body)
				require.NoError(t, p.(providers.Signer).Sign(req, now))
				require.Equal(t, string(before), string(req.Body), "adyen's Signer must produce the signatures the test computed, in place")
			},
			wantIDs: func(id string, _ *providers.Request) []string {
				return []string{id + "A:AUTHORISATION:true", id + "B:AUTHORISATION:false", id + "C:CAPTURE:true"}
			},
			wantTypes: []string{"AUTHORISATION", "AUTHORISATION", "CAPTURE"},
			items: func(id string) [][]byte {
				var out [][]byte
				for _, it := range adyenItems(id) {
					out = append(out, []byte(it))
				}
				return out
			},
			// The HMAC covers pspReference … success: raise an amount.
			tamper: func(req *providers.Request) {
				req.Body = bytes.Replace(req.Body, []byte(`"value": 1500`), []byte(`"value": 150000`), 1)
			},
		},
		{
			provider: "square", secrets: []string{"Ibxx_5AKakO-3qeNVR61Dw"},
			settings: map[string]any{"notification_url": "https://hooks.example.com/webhooks/square"},
			delivery: func(id string) *providers.Request {
				return pvJSON(`{"merchant_id":"MLEFBHHSJGVHD","type":"payment.updated","event_id":"` + id + `","created_at":"2026-11-30T12:00:00.037339943Z","data":{"type":"payment","id":"KkAkhdMsgzn59SM8A89WgKwekxLZY","object":{"payment":{"id":"KkAkhdMsgzn59SM8A89WgKwekxLZY","amount_money":{"amount":2000,"currency":"USD"},"status":"COMPLETED","version":3}}}}`)
			},
			wantIDs: one, wantType: "payment.updated",
		},
		{
			provider: "braintree", secrets: []string{"hk7zqxwp4v2bs5jc:4e7f0a1b9c2d8e3f6a5b4c7d0e9f8a1b"},
			delivery: func(id string) *providers.Request { return pvForm(braintreeXML(id, "20.00")) },
			wantIDs: func(id string, _ *providers.Request) []string {
				return []string{"subscription_charged_successfully:" + id + ":2026-11-30T12:00:00Z"}
			},
			wantType: "subscription_charged_successfully",
			// Another notification under the original signature.
			tamper: func(req *providers.Request) {
				vals, err := url.ParseQuery(string(req.Body))
				if err != nil {
					panic(err)
				}
				raw, _ := base64.StdEncoding.DecodeString(vals.Get("bt_payload"))
				vals.Set("bt_payload", base64.StdEncoding.EncodeToString(bytes.Replace(raw, []byte("20.00"), []byte("0.01"), -1)))
				req.Body = []byte(vals.Encode())
			},
		},
		{
			provider: "paddle", secrets: []string{"pdl_ntfset_01hsdn8d43dt7mezr1ef2jtbaw_hKkRiCGyyRhbFwIUuqiTBgI7gnWoV0Gr"},
			// Paddle's default tolerance is 5 s; the duplicate re-post of the
			// same signed delivery must not go stale on a loaded machine.
			tolerance: time.Minute,
			delivery: func(id string) *providers.Request {
				return pvJSON(`{"event_id":"` + id + `","event_type":"transaction.completed","occurred_at":"2026-11-30T12:00:00.364378Z","notification_id":"ntf_01hv8x2bkc8k3fwm2fk4n2kb0a","data":{"id":"txn_01hv8wptq8987qeep44cyrewp9","status":"completed","customer_id":"ctm_01hv6y1jedq4p1n0yqn5ba3ky4","currency_code":"USD","details":{"totals":{"subtotal":"2000","tax":"0","total":"2000"}}}}`)
			},
			wantIDs: one, wantType: "transaction.completed",
		},
		{
			provider: "gocardless", secrets: []string{"gocardless_e2e_secret"},
			delivery: func(id string) *providers.Request {
				return pvJSON(gocardlessBody(gocardlessItems(id)), "Origin", "https://api.gocardless.com", "User-Agent", "gocardless-webhook-service/1.1")
			},
			wantIDs:   func(id string, _ *providers.Request) []string { return []string{id + "1", id + "2", id + "3"} },
			wantTypes: []string{"payments.confirmed", "payments.paid_out", "mandates.active"},
			items: func(id string) [][]byte {
				var out [][]byte
				for _, it := range gocardlessItems(id) {
					out = append(out, []byte(it))
				}
				return out
			},
			badStatus: 498,
		},
		{
			provider: "checkout", secrets: []string{"0a4c7b2e-checkout-e2e"}, settings: map[string]any{"authorization_key": "cko-auth-e2e"},
			delivery: func(id string) *providers.Request {
				return pvJSON(`{"id":"` + id + `","type":"payment_captured","version":"1.0.33","created_on":"2026-11-30T12:00:00.000Z","data":{"id":"pay_mbabizu24mvu3mela5njyhpit4","action_id":"act_y3oqhf46pyzuxjbcn2giaqnb44","amount":2000,"currency":"USD","response_code":"10000","response_summary":"Approved","processed_on":"2026-11-30T12:00:00Z"},"_links":{"self":{"href":"https://api.checkout.com/workflows/events/` + id + `"}}}`)
			},
			wantIDs: one, wantType: "payment_captured",
		},
		{
			provider: "razorpay", secrets: []string{"razorpay_e2e_secret"},
			delivery: func(id string) *providers.Request {
				return pvJSON(`{"entity":"event","account_id":"acc_BFQ7uQEaa7j2z7","event":"payment.captured","contains":["payment"],"payload":{"payment":{"entity":{"id":"pay_DESlfW9H8K9uqM","entity":"payment","amount":2000,"currency":"INR","status":"captured","order_id":"order_DESlLckIVRkHWj","method":"card","captured":true}}},"created_at":1764504000}`,
					"X-Razorpay-Event-Id", id)
			},
			wantIDs: one, wantType: "payment.captured",
		},
		{
			// Next-gen (signed) mode: secrets, no allow_unsigned.
			provider: "mollie", secrets: []string{"mollie_e2e_signing_secret"},
			delivery: func(id string) *providers.Request { return pvForm("id=" + id) },
			wantIDs:  one,
		},
		{
			provider: "lemonsqueezy", secrets: []string{"lemon_e2e_secret"},
			delivery: func(id string) *providers.Request {
				return pvJSON(`{"meta":{"event_name":"order_created","custom_data":{"customer_id":25}},"data":{"type":"orders","id":"`+id+`","attributes":{"store_id":1,"customer_id":1,"identifier":"104e18a2-d755-4d4b-80c4-a6c1dcbe1c10","order_number":1,"currency":"USD","subtotal":2000,"total":2000,"status":"paid","refunded":false,"created_at":"2026-11-30T11:59:59.000000Z","updated_at":"2026-11-30T12:00:00.000000Z"},"links":{"self":"https://api.lemonsqueezy.com/v1/orders/`+id+`"}}}`,
					"X-Event-Name", "order_created")
			},
			wantIDs: func(id string, _ *providers.Request) []string {
				return []string{"order_created:orders:" + id + ":2026-11-30T12:00:00.000000Z"}
			},
			wantType: "order_created",
		},
		{
			provider: "shopify", secrets: []string{"shpss_e2e_client_secret"},
			delivery: func(id string) *providers.Request {
				return pvJSON(`{"id":820982911946154508,"admin_graphql_api_id":"gid://shopify/Order/820982911946154508","email":"jon@example.com","created_at":"2026-11-30T07:00:00-05:00","currency":"USD","total_price":"20.00","financial_status":"paid","line_items":[{"id":866550311766439020,"title":"IPod Nano - 8GB","quantity":1,"price":"20.00"}]}`,
					"X-Shopify-Topic", "orders/create", "X-Shopify-Event-Id", id, "X-Shopify-Webhook-Id", "b54557e4-bdd9-4b37-8a5f-bf7d70bcd043",
					"X-Shopify-Shop-Domain", "example.myshopify.com", "X-Shopify-API-Version", "2026-10", "X-Shopify-Triggered-At", "2026-11-30T12:00:00.000000Z")
			},
			wantIDs: one, wantType: "orders/create",
		},
		{
			provider: "github", secrets: []string{"It's a Secret to Everybody"},
			delivery: func(id string) *providers.Request {
				return pvJSON(`{"ref":"refs/heads/main","before":"6113728f27ae82c7b1a177c8d03f9e96e0adf246","after":"59b20b8d5c6ff8d09518454d4dd8b7b30f095ab5","repository":{"id":1296269,"full_name":"octocat/Hello-World"},"pusher":{"name":"octocat"},"commits":[]}`,
					"X-GitHub-Event", "push", "X-GitHub-Delivery", id, "X-GitHub-Hook-ID", "292430182",
					"X-GitHub-Hook-Installation-Target-Type", "repository", "X-GitHub-Hook-Installation-Target-ID", "1296269", "User-Agent", "GitHub-Hookshot/044aadd")
			},
			wantIDs:  func(id string, _ *providers.Request) []string { return []string{"292430182:" + id} },
			wantType: "push",
		},
		{
			provider: "standardwebhooks", secrets: []string{"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"},
			delivery: func(id string) *providers.Request {
				return pvJSON(`{"type":"invoice.paid","timestamp":"2026-11-30T12:00:00.000Z","data":{"invoice_id":"inv_2x8Kd","amount":2000,"currency":"USD"}}`, "Webhook-Id", id)
			},
			wantIDs: one, wantType: "invoice.paid",
		},
		{
			provider: "svix", secrets: []string{"whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD"},
			delivery: func(id string) *providers.Request {
				return pvJSON(`{"type":"user.created","timestamp":"2026-11-30T12:00:00.000Z","data":{"id":"user_2x8Kd","email":"jon@example.com","credits":2000}}`, "Webhook-Id", id)
			},
			sign: svixSign, wantIDs: one, wantType: "user.created",
		},
		{
			provider: "slack", secrets: []string{"8f742231b10e8888abcd99yyyzzz85a5"},
			delivery: func(id string) *providers.Request {
				return pvJSON(`{"token":"XXYYZZ","team_id":"T123ABC456","api_app_id":"A123ABC456","event":{"type":"app_mention","user":"U123ABC456","text":"<@U0LAN0Z89> is it everything a river should be?","ts":"1515449522.000016","channel":"C123ABC456","event_ts":"1515449522.000016"},"type":"event_callback","authed_users":["U123ABC456"],"event_id":"` + id + `","event_time":1764504000,"event_context":"4-eyJldCI6ImFwcF9tZW50aW9uIn0"}`)
			},
			wantIDs: one, wantType: "app_mention",
		},
		{
			provider: "twilio", secrets: []string{"12345"},
			delivery: func(id string) *providers.Request {
				return pvForm("AccountSid=AC1234567890abcdef1234567890abcdef&ApiVersion=2010-04-01&From=%2B15017122661&MessageSid=" + id +
					"&MessageStatus=delivered&SmsSid=" + id + "&SmsStatus=delivered&To=%2B15558675310")
			},
			wantIDs:  func(id string, _ *providers.Request) []string { return []string{id + ":delivered"} },
			wantType: "delivered",
		},
		{
			// A JSON body: the Signer adds bodySHA256 to the URL.
			source: "twilio_json", provider: "twilio", secrets: []string{"12345"},
			delivery: func(id string) *providers.Request {
				return pvJSON(`{"specversion":"1.0","type":"com.twilio.messaging.message.delivered","source":"/2010-04-01/Accounts/AC123/Messages/SM123.json","id":"EZ`+id+`","data":{"messageSid":"SM123","messageStatus":"DELIVERED"}}`,
					"I-Twilio-Idempotency-Token", id)
			},
			wantIDs: one,
		},
		{
			provider: "plaid", secrets: []string{pvPlaidSecret},
			settings: map[string]any{"client_id": pvPlaidClientID, "key_url": pl.keyURL},
			delivery: func(id string) *providers.Request {
				return pvJSON(`{"environment":"sandbox","error":null,"item_id":"` + id + `","new_transactions":2000,"webhook_code":"SYNC_UPDATES_AVAILABLE","webhook_type":"TRANSACTIONS","initial_update_complete":true,"historical_update_complete":false}`)
			},
			sign:     pl.sign,
			wantIDs:  func(_ string, req *providers.Request) []string { return []string{sha256Hex(req.Body)} },
			wantType: "TRANSACTIONS.SYNC_UPDATES_AVAILABLE",
		},
		{
			provider: "sendgrid", secrets: []string{sg.verificationKey},
			delivery:  func(id string) *providers.Request { return pvJSON(sendgridBody(sendgridItems(id))) },
			sign:      sg.sign,
			wantIDs:   func(id string, _ *providers.Request) []string { return []string{id + "1", id + "2", id + "3"} },
			wantTypes: []string{"processed", "delivered", "open"},
			items: func(id string) [][]byte {
				var out [][]byte
				for _, it := range sendgridItems(id) {
					out = append(out, []byte(it))
				}
				return out
			},
		},
		{
			provider: "sns", secrets: []string{pvSnsTopic}, settings: map[string]any{"cert_hosts": []string{sn.host}},
			delivery: func(id string) *providers.Request {
				return pvJSON(`{"Type":"Notification","MessageId":"` + id + `","TopicArn":"` + pvSnsTopic + `","Subject":"Order 8841 paid",` +
					`"Message":"{\"order_id\":\"8841\",\"status\":\"paid\",\"amount\":2000}",` +
					`"UnsubscribeURL":"https://sns.us-east-1.amazonaws.com/?Action=Unsubscribe&SubscriptionArn=` + pvSnsTopic + `:0f5d9c9e-4a7b-4a8e-9f5e-3c1e0e6c2b11"}`)
			},
			sign: sn.sign, wantIDs: one, wantType: "Notification",
			// The signature covers the signed fields, not the body bytes:
			// the tamper changes the Message.
			tamper: func(req *providers.Request) {
				tampered := bytes.Replace(req.Body, []byte("8841"), []byte("8842"), 1)
				if bytes.Equal(tampered, req.Body) {
					panic("sns: the Message is not in the body")
				}
				req.Body = tampered
			},
		},
		{
			provider: "googleplay",
			settings: map[string]any{"audience": pvGoogleplayAudience, "service_account": pvGoogleplayAccount,
				"package_name": "com.example.hookline", "keys_url": gp.keysURL},
			delivery: googleplayPush, sign: gp.sign, wantIDs: one, wantType: "subscriptionNotification",
			// The token does not cover the body: a token for another
			// audience is the tamper.
			tamper: func(req *providers.Request) {
				tok, err := googleplay.SignToken(gp.key, pvGoogleplayKid, googleplay.Claims{Issuer: "https://accounts.google.com",
					Audience: pvGoogleplayAudience + "/other", Email: pvGoogleplayAccount, EmailVerified: true,
					IssuedAt: time.Now(), Expiry: time.Now().Add(time.Hour)})
				if err != nil {
					panic(err)
				}
				req.Header.Set("Authorization", "Bearer "+tok)
			},
		},
		{
			provider: "coinbase", secrets: []string{"coinbase_e2e_secret"},
			delivery: func(id string) *providers.Request {
				return pvJSON(`{"attempt_number":1,"event":{"api_version":"2018-03-22","created_at":"2026-11-30T12:00:00Z","data":{"code":"66BEOV2A","name":"The Sovereign Individual","pricing":{"local":{"amount":"20.00","currency":"USD"}}},"id":"` + id + `","resource":"event","type":"charge:confirmed"},"id":"1f3a4d6e-0000-4000-8000-000000000001","scheduled_for":"2026-11-30T12:00:00Z"}`)
			},
			wantIDs: one, wantType: "charge:confirmed",
		},
		{
			provider: "xendit", secrets: []string{"xnd_callback_token_e2e"},
			delivery: func(id string) *providers.Request {
				return pvJSON(`{"event":"payment.succeeded","business_id":"5f27a14a9bf05c73dd040bc8","created":"2026-11-30T12:00:00.000Z","data":{"id":"py-`+id+`","amount":2000,"currency":"IDR","status":"SUCCEEDED"}}`,
					"Webhook-Id", id)
			},
			wantIDs: one, wantType: "payment.succeeded",
			// The token does not cover the body: a wrong token is the tamper.
			tamper: func(req *providers.Request) { req.Header.Set("X-Callback-Token", "xnd_callback_token_e2f") },
		},
		{
			provider: "mercadopago", secrets: []string{"mp_e2e_webhook_secret"},
			delivery: func(id string) *providers.Request {
				r := pvJSON(`{"id":` + id + `,"live_mode":false,"type":"payment","date_created":"2026-11-30T12:00:00Z","user_id":44444,"api_version":"v1","action":"payment.created","data":{"id":"999999999"}}`)
				r.URL = &url.URL{RawQuery: "data.id=999999999&type=payment"}
				return r
			},
			wantIDs: one, wantType: "payment",
			// Only data.id, x-request-id and ts are signed: another payment.
			tamper: func(req *providers.Request) { req.URL.RawQuery = "data.id=999999998&type=payment" },
		},
		{
			provider: "hmac", secrets: []string{"acme_e2e_secret"},
			settings: map[string]any{"header": "X-Acme-Signature", "prefix": "sha256="},
			eventID:  "header:X-Acme-Delivery", eventType: "json:type",
			delivery: func(id string) *providers.Request {
				return pvJSON(`{"type":"order.paid","order":{"id":"ord_1","total":2000}}`, "X-Acme-Delivery", id)
			},
			wantIDs: one, wantType: "order.paid",
		},
	}, pvExampleCases()...)
}

// ---- Adapters that carry their own example delivery ----

// pvExampleCases are the cases of the adapters whose packages carry a
// realistic delivery: the HMAC engine's table (and Zoom, Twitch, Meta and
// WhatsApp, which run on it), the Standard Webhooks senders, and Mailgun.
func pvExampleCases() []*pvCase {
	var out []*pvCase
	for _, s := range append(append([]*hmacspec.Spec{zoom.Spec, twitch.Spec}, meta.Specs...), hmacspec.Specs...) {
		c := pvSpecCase(s)
		if s.Name == meta.Name { // answers the GET subscription handshake
			c.settings = map[string]any{"verify_token": pvMetaVerifyToken}
		}
		out = append(out, c)
	}
	for _, s := range swsenders.Senders {
		secret := "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
		if s.RawSecret { // the secret's text is the key (Polar)
			secret = s.Name + "_e2e_secret"
		}
		out = append(out, &pvCase{provider: s.Name, secrets: []string{secret},
			delivery: func(id string) *providers.Request { return s.Sample(id, "") },
			wantIDs:  one, wantType: s.ExampleType})
	}
	return append(out, &pvCase{
		provider: mailgun.Name, secrets: []string{"key-e2e-mailgun-signing"},
		// The Signer adds the body's "signature" object.
		delivery: func(id string) *providers.Request {
			return pvJSON(`{"event-data":{"id":"` + id + `","event":"delivered","timestamp":1764504000.123456,"recipient":"jon@example.com","message":{"headers":{"message-id":"20261130120000.1.hookline@example.com"}}}}`)
		},
		wantIDs: one, wantType: "delivered",
		// Mailgun signs the timestamp and token only, not the event data:
		// the tamper changes the signed token inside the body.
		tamper: func(req *providers.Request) {
			sig, err := mailgun.ParseSignature(req)
			if err != nil {
				panic(err)
			}
			tok := []byte(sig.Token)
			tok[len(tok)-1] ^= 0x01
			tampered := bytes.Replace(req.Body, []byte(`"token":"`+sig.Token+`"`), []byte(`"token":"`+string(tok)+`"`), 1)
			if bytes.Equal(tampered, req.Body) {
				panic("mailgun: the signed token is not in the body")
			}
			req.Body = tampered
		},
	})
}

// pvMetaVerifyToken is the meta source's verify_token.
const pvMetaVerifyToken = "hookline-e2e-verify"

// pvSpecCase is the case of a scheme on the HMAC engine: its Example,
// signed by the adapter, resolving to the id SampleID says (the body's
// hash, recomputed here, for a body:sha256 id) and to its example type.
func pvSpecCase(s *hmacspec.Spec) *pvCase {
	c := &pvCase{provider: s.Name, secrets: []string{s.Name + "_e2e_secret"}, wantType: s.Example.Type,
		delivery: func(id string) *providers.Request { return s.Sample(id, "") },
		wantIDs: func(id string, req *providers.Request) []string {
			if s.EventID == "body:sha256" {
				return []string{sha256Hex(req.Body)}
			}
			return []string{s.SampleID(id, "")}
		},
	}
	// A token or Basic credential covers nothing of the body: the tamper
	// is a wrong credential. The body is changed too, so that the refused
	// delivery cannot be mistaken for a stored one whose body has no id.
	wrong := s.Name + "_e2e_secreT"
	switch s.Mode {
	case hmacspec.Basic:
		c.secrets = []string{"hookline:" + s.Name + "-e2e"}
		wrong = "Basic " + base64.StdEncoding.EncodeToString([]byte("hookline:"+s.Name+"-e2f"))
	case hmacspec.Token:
	default:
		return c
	}
	c.tamper = func(req *providers.Request) {
		req.Header.Set(s.Header, wrong)
		req.Body[len(req.Body)/2] ^= 0x01
	}
	return c
}

// pvOverrideCases are sources whose key resolvers override the provider's.
func pvOverrideCases(cases []*pvCase) []*pvCase {
	by := map[string]*pvCase{}
	for _, c := range cases {
		by[c.name()] = c
	}
	stripe, slack, github := *by["stripe"], *by["slack"], *by["github"]
	stripe.source, stripe.eventID, stripe.eventType = "ovr_header", "header:X-Custom", "json:data.object.status"
	stripe.wantType = "succeeded"
	stripe.wantIDs = func(id string, _ *providers.Request) []string { return []string{"custom-" + id} }
	base := stripe.delivery
	stripe.delivery = func(id string) *providers.Request {
		r := base(id)
		r.Header.Set("X-Custom", "custom-"+id)
		return r
	}
	jsonPath := *by["stripe"]
	jsonPath.source, jsonPath.eventID = "ovr_json", "json:data.object.id"
	jsonPath.wantIDs = func(id string, _ *providers.Request) []string { return []string{"pi_" + id} }
	form := slack
	form.source, form.eventID, form.wantType = "ovr_form", "form:trigger_id", ""
	form.delivery = func(id string) *providers.Request {
		return pvForm("token=gIkuvaNzQIHg97ATvDxqgjtO&team_id=T0001&team_domain=example&channel_id=C2147483705&channel_name=test&user_id=U2147483697&user_name=Steve" +
			"&command=%2Fweather&text=94070&response_url=https%3A%2F%2Fhooks.slack.com%2Fcommands%2F1234%2F5678&trigger_id=" + url.QueryEscape(id) + "&api_app_id=A123456")
	}
	body := github
	body.source, body.eventID = "ovr_body", "body:sha256"
	body.wantIDs = func(_ string, req *providers.Request) []string { return []string{sha256Hex(req.Body)} }
	return []*pvCase{&stripe, &jsonPath, &form, &body}
}

type pvEnv struct {
	pool      *pgxpool.Pool
	base      string
	providers map[string]providers.Provider
}

func newPvEnv(t *testing.T, cases []*pvCase) *pvEnv {
	t.Helper()
	pool := pgtest.NewPool(t)
	rc, err := river.NewClient(riverpgxv5.New(pool), &river.Config{})
	require.NoError(t, err)
	env := &pvEnv{pool: pool, providers: map[string]providers.Provider{}}
	var sources []*ingest.Source
	for _, c := range cases {
		p, err := providers.New(c.provider, providers.Config{Source: c.name(), Secrets: c.secrets, Tolerance: c.tolerance,
			Settings: providertest.DecodeSettings(c.settings)})
		require.NoError(t, err, c.name())
		src := &ingest.Source{Name: c.name(), Provider: p, MaxAttempts: 3}
		if c.eventID != "" {
			src.EventID, err = providers.ParseKeyResolver(c.eventID)
			require.NoError(t, err)
		}
		if c.eventType != "" {
			src.EventType, err = providers.ParseKeyResolver(c.eventType)
			require.NoError(t, err)
		}
		env.providers[c.name()] = p
		sources = append(sources, src)
	}
	srv, err := ingest.New(ingest.Config{Pool: pool, River: rc, IngestRoutes: true, Batch: true,
		Logger: slog.New(slog.DiscardHandler), Sources: sources})
	require.NoError(t, err)
	hs := httptest.NewServer(srv)
	t.Cleanup(func() { hs.Close(); srv.Close() })
	env.base = hs.URL
	return env
}

// signed builds and signs c's delivery of id, addressed to the server.
func (e *pvEnv) signed(t testing.TB, c *pvCase, id string) *providers.Request {
	t.Helper()
	req := c.delivery(id)
	u, err := url.Parse(e.base + "/webhooks/" + c.name())
	require.NoError(t, err)
	if req.URL != nil {
		u.RawQuery = req.URL.RawQuery
	}
	req.URL = u
	p := e.providers[c.name()]
	if c.sign != nil {
		c.sign(t, p, req, time.Now())
	} else {
		s, ok := p.(providers.Signer)
		require.True(t, ok, "%s cannot sign: give the case a sign func", c.provider)
		require.NoError(t, s.Sign(req, time.Now()))
	}
	return req
}

type pvAnswer struct {
	status int
	header http.Header
	raw    []byte
	body   map[string]any
}

// post sends req as it stands: to req.URL, with its headers and exact body.
func (e *pvEnv) post(t testing.TB, req *providers.Request) pvAnswer {
	t.Helper()
	hreq, err := http.NewRequest(http.MethodPost, req.URL.String(), bytes.NewReader(req.Body))
	require.NoError(t, err)
	hreq.Header = req.Header.Clone()
	resp, err := http.DefaultClient.Do(hreq)
	require.NoError(t, err)
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	a := pvAnswer{status: resp.StatusCode, header: resp.Header, raw: raw}
	_ = json.Unmarshal(raw, &a.body)
	return a
}

func (e *pvEnv) count(t testing.TB, query string, args ...any) int {
	t.Helper()
	var n int
	require.NoError(t, e.pool.QueryRow(context.Background(), query, args...).Scan(&n))
	return n
}

// withBody counts the stored deliveries of source whose body is body (the
// subtests share the server, so counts are by content, not by source).
func (e *pvEnv) withBody(t testing.TB, source string, body []byte) int {
	return e.count(t, `SELECT count(*) FROM hookline_deliveries WHERE source = $1 AND body = $2`, source, body)
}

func (e *pvEnv) jobs(t testing.TB, source, id string) int {
	return e.count(t, `SELECT count(*) FROM river_job WHERE kind = 'hookline.event' AND args->>'source' = $1 AND args->>'event_id' = $2`, source, id)
}

type pvStored struct {
	eventType  string
	deliveryID int64
	offset     *int32
	length     *int32
	body       []byte
	deliveries int
}

func (e *pvEnv) stored(t testing.TB, source, id string) pvStored {
	t.Helper()
	var s pvStored
	err := e.pool.QueryRow(context.Background(), `SELECT e.event_type, e.delivery_id, e.item_offset, e.item_length, d.body, e.deliveries
		FROM hookline_events e JOIN hookline_deliveries d ON d.id = e.delivery_id WHERE e.source = $1 AND e.event_id = $2`, source, id).
		Scan(&s.eventType, &s.deliveryID, &s.offset, &s.length, &s.body, &s.deliveries)
	if err == pgx.ErrNoRows {
		require.Failf(t, "event not stored", "%s/%s", source, id)
	}
	require.NoError(t, err)
	return s
}

// wantStatus checks the answer to a delivery of c resolving to ids.
func wantStatus(t testing.TB, c *pvCase, a pvAnswer, status string, ids []string) {
	t.Helper()
	require.Equal(t, http.StatusOK, a.status, "%s: %s", c.name(), a.raw)
	require.Equal(t, status, a.body["status"], "%s: %s", c.name(), a.raw)
	require.Equal(t, c.name(), a.body["source"], string(a.raw))
	if c.items == nil {
		require.Equal(t, ids[0], a.body["event_id"], string(a.raw))
		return
	}
	var evs []any
	for _, id := range ids {
		evs = append(evs, map[string]any{"event_id": id, "status": status})
	}
	require.Equal(t, evs, a.body["events"], string(a.raw))
	require.NotContains(t, a.body, "event_id", "a batch answer lists its events")
}

func TestProvidersEndToEnd(t *testing.T) {
	t.Parallel()
	cases := pvCases(t)
	overrides := pvOverrideCases(cases)
	env := newPvEnv(t, append(slices.Clone(cases), overrides...))

	t.Run("EveryProviderHasACase", func(t *testing.T) {
		covered := map[string]bool{}
		for _, c := range cases {
			covered[c.provider] = true
		}
		for _, name := range providers.Names() {
			require.True(t, covered[name], "provider %s has no end-to-end case", name)
		}
	})

	var mu sync.Mutex
	seq := 0
	newID := func(c *pvCase) string {
		mu.Lock()
		defer mu.Unlock()
		seq++
		switch c.provider {
		case "mercadopago":
			return fmt.Sprint(12345678900 + seq)
		case "lemonsqueezy":
			return fmt.Sprint(1000 + seq)
		case "mollie":
			return fmt.Sprintf("tr_WDqYK6vl%02d", seq)
		case "twilio":
			return fmt.Sprintf("SM%032x", seq)
		case "gocardless":
			return fmt.Sprintf("EV%08X", seq)
		case "adyen":
			return fmt.Sprintf("88%012d", seq)
		case "github":
			return fmt.Sprintf("72d3162e-cc78-11e3-81ab-%012x", seq)
		case "standardwebhooks", "svix":
			return fmt.Sprintf("msg_2xX%020d", seq)
		case "twitch":
			return fmt.Sprintf("e76c6bd4-55c9-4987-8304-%012x", seq)
		case "slack":
			return fmt.Sprintf("Ev%08X", seq)
		}
		if _, ok := swsenders.Lookup(c.provider); ok {
			return fmt.Sprintf("msg_2xX%020d", seq)
		}
		return fmt.Sprintf("evt_1Qe2e%08d", seq)
	}

	for _, c := range append(slices.Clone(cases), overrides...) {
		t.Run(c.name(), func(t *testing.T) {
			t.Parallel()
			id := newID(c)
			req := env.signed(t, c, id)
			ids := c.wantIDs(id, req)

			// Accepted, stored byte for byte, resolved as expected, one job per event.
			a := env.post(t, req)
			wantStatus(t, c, a, "accepted", ids)
			var items [][]byte
			if c.items != nil {
				items = c.items(id)
				require.Len(t, items, len(ids))
			}
			var deliveryID int64
			for i, eid := range ids {
				s := env.stored(t, c.name(), eid)
				require.Equal(t, string(req.Body), string(s.body), "the delivery body is stored byte for byte")
				wantType := c.wantType
				if c.wantTypes != nil {
					wantType = c.wantTypes[i]
				}
				require.Equal(t, wantType, s.eventType, "event type of %s", eid)
				if i == 0 {
					deliveryID = s.deliveryID
				}
				require.Equal(t, deliveryID, s.deliveryID, "every item of a batch points at its one delivery")
				if items == nil {
					require.Nil(t, s.offset)
				} else {
					require.NotNil(t, s.offset)
					require.NotNil(t, s.length)
					got := s.body[*s.offset : *s.offset+*s.length]
					require.Equal(t, string(items[i]), string(got), "item %d is its exact bytes in the body", i)
				}
				require.Equal(t, 1, env.jobs(t, c.name(), eid), "one River job for %s", eid)
			}
			require.Equal(t, len(ids), env.count(t, `SELECT count(*) FROM hookline_events WHERE source = $1 AND event_id = ANY($2)`, c.name(), ids))

			// The same delivery again: a duplicate, no second job.
			a = env.post(t, req)
			wantStatus(t, c, a, "duplicate", ids)
			for _, eid := range ids {
				require.Equal(t, 1, env.jobs(t, c.name(), eid))
				require.Equal(t, 2, env.stored(t, c.name(), eid).deliveries)
			}

			// Tampered: rejected, nothing stored.
			bad := providertest.Clone(env.signed(t, c, newID(c)))
			if c.tamper != nil {
				c.tamper(bad)
			} else {
				bad.Body[len(bad.Body)/2] ^= 0x01
			}
			want := http.StatusUnauthorized
			if c.badStatus != 0 {
				want = c.badStatus
			}
			a = env.post(t, bad)
			require.Equal(t, want, a.status, "tampered %s delivery: %s", c.name(), a.raw)
			require.NotEmpty(t, a.body["error"])
			for _, s := range c.secrets {
				require.NotContains(t, string(a.raw), s)
			}
			require.Zero(t, env.withBody(t, c.name(), bad.Body), "a rejected delivery is not stored")
		})
	}

	t.Run("SlackURLVerification", func(t *testing.T) {
		t.Parallel()
		req := &providers.Request{Header: http.Header{"Content-Type": {"application/json"}},
			Body: []byte(`{"token":"Jhj5dZrVaK7ZwHHjRyZWjbDl","challenge":"3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P","type":"url_verification"}`)}
		req.URL, _ = url.Parse(env.base + "/webhooks/slack")
		require.NoError(t, env.providers["slack"].(providers.Signer).Sign(req, time.Now()))
		a := env.post(t, req)
		require.Equal(t, http.StatusOK, a.status, string(a.raw))
		require.Equal(t, map[string]any{"challenge": "3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P"}, a.body)
		require.Zero(t, env.withBody(t, "slack", req.Body), "url_verification is not stored")
		require.Zero(t, env.count(t, `SELECT count(*) FROM hookline_events WHERE source = 'slack' AND event_id = ''`))
		require.Zero(t, env.count(t, `SELECT count(*) FROM river_job WHERE args->>'source' = 'slack' AND args->>'event_id' = ''`))

		// Unsigned, the handshake is refused like any other delivery.
		req.Header.Del("X-Slack-Signature")
		a = env.post(t, req)
		require.Equal(t, http.StatusUnauthorized, a.status, string(a.raw))
		require.NotContains(t, string(a.raw), "3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P")
	})

	t.Run("TwitchCallbackVerification", func(t *testing.T) {
		t.Parallel()
		const challenge = "pogchamp-kappa-360noscope-vohiyo"
		const msgID = "e76c6bd4-55c9-4987-8304-da1588d8988b"
		req := pvJSON(`{"challenge":"`+challenge+`","subscription":{"id":"f1c2a387-161a-49f9-a165-0f21d7a4e1c4","status":"webhook_callback_verification_pending","type":"channel.follow","version":"2","cost":1,"condition":{"broadcaster_user_id":"12826"},"transport":{"method":"webhook","callback":"https://example.com/webhooks/callback"},"created_at":"2026-11-30T12:00:00.634234626Z"}}`,
			twitch.HeaderID, msgID, twitch.HeaderType, "webhook_callback_verification")
		req.URL, _ = url.Parse(env.base + "/webhooks/twitch")
		require.NoError(t, env.providers["twitch"].(providers.Signer).Sign(req, time.Now()))
		a := env.post(t, req)
		require.Equal(t, http.StatusOK, a.status, string(a.raw))
		require.Equal(t, "text/plain", a.header.Get("Content-Type"))
		require.Equal(t, []byte(challenge), a.raw, "the challenge, byte for byte, and nothing else")
		require.Zero(t, env.withBody(t, "twitch", req.Body), "the verification is not stored")
		require.Zero(t, env.count(t, `SELECT count(*) FROM hookline_events WHERE source = 'twitch' AND event_id = $1`, msgID))
		require.Zero(t, env.count(t, `SELECT count(*) FROM river_job WHERE args->>'source' = 'twitch' AND args->>'event_id' = $1`, msgID))

		// Unsigned, the handshake is refused like any other delivery.
		req.Header.Del(twitch.HeaderSignature)
		a = env.post(t, req)
		require.Equal(t, http.StatusUnauthorized, a.status, string(a.raw))
		require.NotContains(t, string(a.raw), challenge)
	})

	t.Run("ZoomURLValidation", func(t *testing.T) {
		t.Parallel()
		const plain = "qgg8vlvZRS6UYooatFL8Aw"
		req := pvJSON(`{"payload":{"plainToken":"` + plain + `"},"event_ts":1764504000000,"event":"endpoint.url_validation"}`)
		req.URL, _ = url.Parse(env.base + "/webhooks/zoom")
		require.NoError(t, env.providers["zoom"].(providers.Signer).Sign(req, time.Now()))
		a := env.post(t, req)
		require.Equal(t, http.StatusOK, a.status, string(a.raw))
		require.Equal(t, "application/json", a.header.Get("Content-Type"))
		m := hmac.New(sha256.New, []byte("zoom_e2e_secret"))
		m.Write([]byte(plain))
		require.Equal(t, map[string]any{"plainToken": plain, "encryptedToken": hex.EncodeToString(m.Sum(nil))}, a.body)
		require.Zero(t, env.withBody(t, "zoom", req.Body), "the validation is not stored")
	})

	t.Run("ZoomValidationNotStoredUnsignedRefused", func(t *testing.T) {
		t.Parallel()
		const plain = "Zm9vYmFyLXBsYWluLXRva2Vu"
		req := pvJSON(`{"payload":{"plainToken":"` + plain + `"},"event_ts":1764504000001,"event":"endpoint.url_validation"}`)
		req.URL, _ = url.Parse(env.base + "/webhooks/zoom")
		require.NoError(t, env.providers["zoom"].(providers.Signer).Sign(req, time.Now()))
		a := env.post(t, req)
		require.Equal(t, http.StatusOK, a.status, string(a.raw))
		require.Zero(t, env.count(t, `SELECT count(*) FROM hookline_events WHERE source = 'zoom' AND event_id LIKE 'endpoint.url_validation%'`))
		require.Zero(t, env.count(t, `SELECT count(*) FROM river_job WHERE args->>'source' = 'zoom' AND args->>'event_id' LIKE 'endpoint.url_validation%'`))

		// Unsigned, the validation is refused and the token not hashed.
		req.Header.Del("X-Zm-Signature")
		a = env.post(t, req)
		require.Equal(t, http.StatusUnauthorized, a.status, string(a.raw))
		require.NotContains(t, string(a.raw), "encryptedToken")
	})

	t.Run("MetaSubscriptionHandshake", func(t *testing.T) {
		t.Parallel()
		get := func(source, query string) (int, string, string) {
			resp, err := http.Get(env.base + "/webhooks/" + source + "?" + query)
			require.NoError(t, err)
			defer resp.Body.Close()
			raw, err := io.ReadAll(resp.Body)
			require.NoError(t, err)
			return resp.StatusCode, resp.Header.Get("Content-Type"), string(raw)
		}
		before := env.count(t, `SELECT count(*) FROM hookline_deliveries WHERE source = 'meta' AND body = ''`)
		status, ct, body := get("meta", "hub.mode=subscribe&hub.verify_token="+pvMetaVerifyToken+"&hub.challenge=1158201444")
		require.Equal(t, http.StatusOK, status, body)
		require.True(t, strings.HasPrefix(ct, "text/plain"), ct)
		require.Equal(t, "1158201444", body, "the challenge, and nothing else")

		status, _, body = get("meta", "hub.mode=subscribe&hub.verify_token=wrong&hub.challenge=1158201444")
		require.Equal(t, http.StatusForbidden, status)
		require.NotContains(t, body, "1158201444")

		// WhatsApp's source configures no verify_token: its GET is not answered.
		status, _, body = get("whatsapp", "hub.mode=subscribe&hub.verify_token=x&hub.challenge=1158201444")
		require.Equal(t, http.StatusMethodNotAllowed, status)
		require.NotContains(t, body, "1158201444")
		require.Equal(t, before, env.count(t, `SELECT count(*) FROM hookline_deliveries WHERE source = 'meta' AND body = ''`), "a GET is never stored")
	})

	t.Run("AdyenOneBadItemRejectsTheBatch", func(t *testing.T) {
		t.Parallel()
		for name, bad := range map[string]string{
			"wrong key": adyenItem(pvAdyenOther, "9900000000000B", "AUTHORISATION", "true", 2000),
			"unsigned": strings.Replace(adyenItem(pvAdyenKey, "9900000000000B", "AUTHORISATION", "true", 2000),
				`"hmacSignature"`, `"hmacSignatureX"`, 1),
		} {
			body := adyenBody(
				adyenItem(pvAdyenKey, "9900000000000A", "AUTHORISATION", "true", 2000),
				bad,
				adyenItem(pvAdyenKey, "9900000000000C", "AUTHORISATION", "true", 2000))
			req := pvJSON(body)
			req.URL, _ = url.Parse(env.base + "/webhooks/adyen")
			a := env.post(t, req)
			require.Equal(t, http.StatusUnauthorized, a.status, "%s: %s", name, a.raw)
			require.Zero(t, env.withBody(t, "adyen", req.Body), "%s: nothing stored", name)
		}
		require.Zero(t, env.count(t, `SELECT count(*) FROM hookline_events WHERE event_id LIKE '99000000000000%'`), "no item stored")
		require.Zero(t, env.count(t, `SELECT count(*) FROM river_job WHERE args->>'event_id' LIKE '99000000000000%'`))
	})

	t.Run("BatchMixesNewAndDuplicateItems", func(t *testing.T) {
		t.Parallel()
		its := gocardlessItems("EVMIX")
		first := pvJSON(gocardlessBody(its[:2]))
		first.URL, _ = url.Parse(env.base + "/webhooks/gocardless")
		require.NoError(t, env.providers["gocardless"].(providers.Signer).Sign(first, time.Now()))
		a := env.post(t, first)
		require.Equal(t, http.StatusOK, a.status, string(a.raw))
		require.Equal(t, "accepted", a.body["status"])

		second := pvJSON(gocardlessBody(its[1:]))
		second.URL = first.URL
		require.NoError(t, env.providers["gocardless"].(providers.Signer).Sign(second, time.Now()))
		a = env.post(t, second)
		require.Equal(t, http.StatusOK, a.status, string(a.raw))
		require.Equal(t, "accepted", a.body["status"], "accepted when any item is new")
		require.Equal(t, []any{
			map[string]any{"event_id": "EVMIX2", "status": "duplicate"},
			map[string]any{"event_id": "EVMIX3", "status": "accepted"},
		}, a.body["events"])
		require.Equal(t, 1, env.jobs(t, "gocardless", "EVMIX2"))
		require.Equal(t, 1, env.jobs(t, "gocardless", "EVMIX3"))
		// The new item points into the second delivery, at its own bytes.
		s := env.stored(t, "gocardless", "EVMIX3")
		require.Equal(t, its[2], string(s.body[*s.offset:*s.offset+*s.length]))
	})

	t.Run("ResolverYieldingEmptyIs400", func(t *testing.T) {
		t.Parallel()
		byName := map[string]*pvCase{}
		for _, c := range append(slices.Clone(cases), overrides...) {
			byName[c.name()] = c
		}
		check := func(name string, req *providers.Request) {
			t.Helper()
			req.URL, _ = url.Parse(env.base + "/webhooks/" + name)
			require.NoError(t, env.providers[name].(providers.Signer).Sign(req, time.Now()))
			a := env.post(t, req)
			require.Equal(t, http.StatusBadRequest, a.status, "%s: %s", name, a.raw)
			require.NotEmpty(t, a.body["error"])
			require.Zero(t, env.withBody(t, name, req.Body))
		}
		// header:X-Custom, header absent (the body's own id is not used).
		req := byName["ovr_header"].delivery("evt_no_custom")
		req.Header.Del("X-Custom")
		check("ovr_header", req)
		// json:data.object.id, path absent.
		check("ovr_json", pvJSON(`{"id":"evt_no_object","object":"event","type":"customer.deleted","data":{}}`))
		// json: path present but null.
		check("ovr_json", pvJSON(`{"id":"evt_null_object","object":"event","type":"customer.deleted","data":{"object":{"id":null}}}`))
		// form:trigger_id, empty field.
		check("ovr_form", pvForm("token=x&team_id=T0001&command=%2Fweather&text=&trigger_id="))
		// hmac: header:X-Acme-Delivery, absent.
		check("hmac", pvJSON(`{"type":"order.paid"}`))
		// Provider defaults yielding nothing: stripe without id, github without delivery.
		check("stripe", pvJSON(`{"object":"event","type":"charge.succeeded"}`))
		check("github", pvJSON(`{"zen":"Keep it logically awesome."}`, "X-GitHub-Event", "ping", "X-GitHub-Hook-ID", "1"))
		// github with a delivery but no hook id: half of a composite id is no id.
		check("github", pvJSON(`{"zen":"Half an id."}`, "X-GitHub-Event", "ping", "X-GitHub-Delivery", "72d3162e-cc78-11e3-81ab-4c9367dc0958"))
		// Slack slash commands carry no event id unless a resolver is configured.
		check("slack", pvForm("token=x&team_id=T0001&command=%2Fweather&text=94070&trigger_id=13345224609.738474920.8088930838d88f008e0"))
	})
}
