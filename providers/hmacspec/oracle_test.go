package hmacspec_test

import (
	"crypto/hmac"
	"crypto/sha1" //nolint:gosec // the SHA-1 schemes under test
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"encoding/hex"
	"hash"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookline/hookline/providers"
	"github.com/hookline/hookline/providers/hmacspec"
	"github.com/hookline/hookline/providers/providertest"
)

func mac(h func() hash.Hash, key, msg string) []byte {
	m := hmac.New(h, []byte(key))
	m.Write([]byte(msg))
	return m.Sum(nil)
}

func hx(b []byte) string  { return hex.EncodeToString(b) }
func b64(b []byte) string { return base64.StdEncoding.EncodeToString(b) }

// in is what a formula signs: the raw body, the sending time in seconds,
// milliseconds, RFC 3339 and RFC 3339 without a zone, and the URL the
// request was received on.
type in struct {
	key, body, sec, ms, rfc, zoneless, url string
}

// formulas are the signature headers of each provider, recomputed from its
// documentation (the page in Spec.Docs; docs/providers.md says which were
// checked on 2026-12-01 and which are unconfirmed) with crypto/hmac
// directly, independently of the engine: the header name, then the value.
var formulas = map[string]func(i in) []string{
	"airwallex": func(i in) []string {
		return []string{"x-timestamp", i.ms, "x-signature", hx(mac(sha256.New, i.key, i.ms+i.body))}
	},
	"alchemy": func(i in) []string { return []string{"X-Alchemy-Signature", hx(mac(sha256.New, i.key, i.body))} },
	"authorizenet": func(i in) []string {
		return []string{"X-ANET-Signature", "sha512=" + strings.ToUpper(hx(mac(sha512.New, i.key, i.body)))}
	},
	"bitbucket": func(i in) []string {
		return []string{"X-Hub-Signature", "sha256=" + hx(mac(sha256.New, i.key, i.body))}
	},
	"box": func(i in) []string {
		return []string{"BOX-DELIVERY-TIMESTAMP", i.rfc, "BOX-SIGNATURE-PRIMARY", b64(mac(sha256.New, i.key, i.body+i.rfc))}
	},
	"calcom": func(i in) []string { return []string{"X-Cal-Signature-256", hx(mac(sha256.New, i.key, i.body))} },
	"calendly": func(i in) []string {
		return []string{"Calendly-Webhook-Signature", "t=" + i.sec + ",v1=" + hx(mac(sha256.New, i.key, i.sec+"."+i.body))}
	},
	"cashfree": func(i in) []string {
		return []string{"x-webhook-timestamp", i.ms, "x-webhook-signature", b64(mac(sha256.New, i.key, i.ms+i.body))}
	},
	"chargebee": func(i in) []string { return []string{"Authorization", "Basic " + b64([]byte(i.key))} },
	"column":    func(i in) []string { return []string{"Column-Signature", hx(mac(sha256.New, i.key, i.body))} },
	"customerio": func(i in) []string {
		return []string{"X-CIO-Timestamp", i.sec, "X-CIO-Signature", hx(mac(sha256.New, i.key, "v0:"+i.sec+":"+i.body))}
	},
	"docusign": func(i in) []string { return []string{"X-DocuSign-Signature-1", b64(mac(sha256.New, i.key, i.body))} },
	"dwolla": func(i in) []string {
		return []string{"X-Request-Signature-SHA-256", hx(mac(sha256.New, i.key, i.body))}
	},
	"easypost": func(i in) []string {
		return []string{"X-Hmac-Signature", "hmac-sha256-hex=" + hx(mac(sha256.New, i.key, i.body))}
	},
	"elevenlabs": func(i in) []string {
		return []string{"ElevenLabs-Signature", "t=" + i.sec + ",v0=" + hx(mac(sha256.New, i.key, i.sec+"."+i.body))}
	},
	"flutterwave": func(i in) []string { return []string{"verif-hash", i.key} },
	"gitlab":      func(i in) []string { return []string{"X-Gitlab-Token", i.key} },
	"gusto":       func(i in) []string { return []string{"X-Gusto-Signature", hx(mac(sha256.New, i.key, i.body))} },
	"hubspot": func(i in) []string {
		return []string{"X-HubSpot-Request-Timestamp", i.ms, "X-HubSpot-Signature-v3", b64(mac(sha256.New, i.key, "POST"+i.url+i.body+i.ms))}
	},
	"intercom": func(i in) []string { return []string{"X-Hub-Signature", "sha1=" + hx(mac(sha1.New, i.key, i.body))} },
	"line":     func(i in) []string { return []string{"x-line-signature", b64(mac(sha256.New, i.key, i.body))} },
	"linear":   func(i in) []string { return []string{"Linear-Signature", hx(mac(sha256.New, i.key, i.body))} },
	"maxio": func(i in) []string {
		return []string{"X-Chargify-Webhook-Signature-Hmac-Sha-256", hx(mac(sha256.New, i.key, i.body))}
	},
	"moderntreasury": func(i in) []string { return []string{"X-Signature", hx(mac(sha256.New, i.key, i.body))} },
	"monnify":        func(i in) []string { return []string{"monnify-signature", hx(mac(sha512.New, i.key, i.body))} },
	"mux": func(i in) []string {
		return []string{"Mux-Signature", "t=" + i.sec + ",v1=" + hx(mac(sha256.New, i.key, i.sec+"."+i.body))}
	},
	"nmi": func(i in) []string {
		return []string{"Webhook-Signature", "t=n0nce,s=" + hx(mac(sha256.New, i.key, "n0nce."+i.body))}
	},
	"notion": func(i in) []string {
		return []string{"X-Notion-Signature", "sha256=" + hx(mac(sha256.New, i.key, i.body))}
	},
	"onfido": func(i in) []string { return []string{"X-SHA2-Signature", hx(mac(sha256.New, i.key, i.body))} },
	"orb": func(i in) []string {
		return []string{"X-Orb-Timestamp", i.zoneless, "X-Orb-Signature", "v1=" + hx(mac(sha256.New, i.key, "v1:"+i.zoneless+":"+i.body))}
	},
	"paymongo": func(i in) []string {
		return []string{"Paymongo-Signature", "t=" + i.sec + ",te=" + hx(mac(sha256.New, i.key, i.sec+"."+i.body))}
	},
	"paystack": func(i in) []string { return []string{"x-paystack-signature", hx(mac(sha512.New, i.key, i.body))} },
	"persona": func(i in) []string {
		return []string{"Persona-Signature", "t=" + i.sec + ",v1=" + hx(mac(sha256.New, i.key, i.sec+"."+i.body))}
	},
	"postmark": func(i in) []string { return []string{"Authorization", "Basic " + b64([]byte(i.key))} },
	"printify": func(i in) []string {
		return []string{"X-Pfy-Signature", "sha256=" + hx(mac(sha256.New, i.key, i.body))}
	},
	"pusher": func(i in) []string { return []string{"X-Pusher-Signature", hx(mac(sha256.New, i.key, i.body))} },
	"recurly": func(i in) []string {
		return []string{"recurly-signature", i.ms + "," + hx(mac(sha256.New, i.key, i.ms+"."+i.body))}
	},
	"revolut": func(i in) []string {
		return []string{"Revolut-Request-Timestamp", i.ms, "Revolut-Signature", "v1=" + hx(mac(sha256.New, i.key, "v1."+i.ms+"."+i.body))}
	},
	"sanity": func(i in) []string {
		sig := base64.RawURLEncoding.EncodeToString(mac(sha256.New, i.key, i.ms+"."+i.body))
		return []string{"sanity-webhook-signature", "t=" + i.ms + ",v1=" + sig}
	},
	"segment":    func(i in) []string { return []string{"X-Signature", hx(mac(sha1.New, i.key, i.body))} },
	"sentry":     func(i in) []string { return []string{"Sentry-Hook-Signature", hx(mac(sha256.New, i.key, i.body))} },
	"streamchat": func(i in) []string { return []string{"X-Signature", hx(mac(sha256.New, i.key, i.body))} },
	"telegram":   func(i in) []string { return []string{"X-Telegram-Bot-Api-Secret-Token", i.key} },
	"teller": func(i in) []string {
		return []string{"Teller-Signature", "t=" + i.sec + ",v1=" + hx(mac(sha256.New, i.key, i.sec+"."+i.body))}
	},
	"typeform": func(i in) []string {
		return []string{"Typeform-Signature", "sha256=" + b64(mac(sha256.New, i.key, i.body))}
	},
	"vercel": func(i in) []string { return []string{"x-vercel-signature", hx(mac(sha1.New, i.key, i.body))} },
	"webflow": func(i in) []string {
		return []string{"x-webflow-timestamp", i.ms, "x-webflow-signature", hx(mac(sha256.New, i.key, i.ms+":"+i.body))}
	},
	"woocommerce": func(i in) []string { return []string{"X-WC-Webhook-Signature", b64(mac(sha256.New, i.key, i.body))} },
	"workos": func(i in) []string {
		return []string{"WorkOS-Signature", "t=" + i.ms + ", v1=" + hx(mac(sha256.New, i.key, i.ms+"."+i.body))}
	},
	"worldline": func(i in) []string { return []string{"X-GCS-Signature", b64(mac(sha256.New, i.key, i.body))} },
	"zendesk": func(i in) []string {
		return []string{"X-Zendesk-Webhook-Signature-Timestamp", i.rfc, "X-Zendesk-Webhook-Signature", b64(mac(sha256.New, i.key, i.rfc+i.body))}
	},
}

// TestDocFormulas: for every entry, a delivery signed by the documented
// formula (computed above without the engine) verifies, and the engine's
// own Signer writes the same header (where the formula is deterministic).
// This is a doc formula, the weakest oracle: the formula is our reading of
// the page in Spec.Docs. Where the provider published a test vector, it is
// recomputed as well (published_test.go).
func TestDocFormulas(t *testing.T) {
	t.Parallel()
	now := providertest.Now.Add(-30 * time.Second)
	for _, s := range hmacspec.Specs {
		t.Run(s.Name, func(t *testing.T) {
			f, ok := formulas[s.Name]
			require.True(t, ok, "no documented formula for %s", s.Name)
			key := secrets(s)[0]
			req := s.Sample("evt_formula", "")
			i := in{key: key, body: string(req.Body), sec: strconv.FormatInt(now.Unix(), 10), ms: strconv.FormatInt(now.UnixMilli(), 10),
				rfc: now.UTC().Format(time.RFC3339), zoneless: now.UTC().Format("2006-01-02T15:04:05.999999999"), url: req.URL.String()}
			hdr := f(i)
			for j := 0; j+1 < len(hdr); j += 2 {
				req.Header.Set(hdr[j], hdr[j+1])
			}
			p, err := providers.New(s.Name, providers.Config{Secrets: []string{key}, Now: func() time.Time { return providertest.Now }})
			require.NoError(t, err)
			require.NoError(t, p.Verify(req))

			bad := providertest.Clone(req)
			bad.Header.Set(hdr[len(hdr)-2], hdr[len(hdr)-1]+"0")
			require.Error(t, p.Verify(bad))

			if s.Unit == hmacspec.Opaque || s.AnyCase || s.Name == "workos" {
				return // a random nonce, upper-case hex, WorkOS's ", " (Sign writes ",")
			}
			ours := s.Sample("evt_formula", "")
			require.NoError(t, p.(providers.Signer).Sign(ours, now))
			require.Equal(t, hdr[len(hdr)-1], ours.Header.Get(hdr[len(hdr)-2]))
		})
	}
}

// TestPayMongoLiveMode: a live-mode delivery carries its signature in li=
// and an empty te=.
func TestPayMongoLiveMode(t *testing.T) {
	t.Parallel()
	s, _ := hmacspec.Lookup("paymongo")
	p, err := providers.New(s.Name, providers.Config{Secrets: []string{"sk"}, Now: func() time.Time { return providertest.Now }})
	require.NoError(t, err)
	req := s.Sample("evt_live", "")
	ts := strconv.FormatInt(providertest.Now.Unix(), 10)
	req.Header.Set("Paymongo-Signature", "t="+ts+",te=,li="+hx(mac(sha256.New, "sk", ts+"."+string(req.Body))))
	require.NoError(t, p.Verify(req))
}
