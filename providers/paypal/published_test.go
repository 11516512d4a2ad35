package paypal_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookline/hookline/providers"
	"github.com/hookline/hookline/providers/paypal"
	"github.com/hookline/hookline/providers/providertest"
)

// TestPublishedVector replays a delivery PayPal published, read on
// 2026-12-02: the fixture of github.com/paypal/PayPal-Java-SDK
// rest-api-sdk/src/test/java/com/paypal/base/ValidateCertTest.java
// (setUp, testValidEndpoint, testInvalidWebhookId) with the certificate
// rest-api-sdk/src/test/resources/testClientCert.crt, commit
// 2a34212256626707c89d9c0d9ac7bcdb5935fa5e. It is a real sandbox delivery:
// the certificate is PayPal's messageverificationcerts.sandbox.paypal.com
// (DigiCert EV, valid 2017-02-18 to 2019-04-26), and the signature is
// PayPal's over "<transmission id>|<time>|<webhook id>|<CRC-32 of the
// body>". Only the data is copied.
//
// The fixture's PAYPAL-CERT-URL (https://api.sandbox.paypal.com/v1/notifications/test,
// which the SDK's test stubs) is served here on loopback at the same path:
// the URL is not part of the signed string.
func TestPublishedVector(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/notifications/test" {
			http.NotFound(w, r)
			return
		}
		_, _ = w.Write([]byte(javaSDKCert))
	}))
	t.Cleanup(srv.Close)
	host := strings.TrimPrefix(srv.URL, "http://")
	now := time.Date(2017, 3, 30, 20, 4, 5, 0, time.UTC)
	build := func(webhookID string) *paypal.Verifier {
		v, err := paypal.New(providers.Config{Source: "published",
			Settings: providertest.DecodeSettings(map[string]any{"webhook_id": webhookID, "cert_hosts": []string{host}}),
			Now:      func() time.Time { return now }})
		require.NoError(t, err)
		return v
	}
	request := func(sig string) *providers.Request {
		return providertest.Request(javaSDKBody,
			paypal.HeaderCertURL, srv.URL+"/v1/notifications/test",
			paypal.HeaderTransmissionID, "071f7d20-1584-11e7-abf0-6b62a8a99ac4",
			paypal.HeaderTransmissionTime, "2017-03-30T20:04:05Z",
			paypal.HeaderAuthAlgo, "SHA256withRSA",
			paypal.HeaderTransmissionSig, sig)
	}

	v := build("96605875FF6516633")
	require.NoError(t, v.Verify(request(javaSDKSig)), "the published delivery must verify")
	require.ErrorIs(t, v.Verify(request("b"+javaSDKSig[1:])), providers.ErrInvalidSignature, "an altered signature must be refused")
	tampered := request(javaSDKSig)
	tampered.Body = []byte(strings.Replace(javaSDKBody, `"value":"100"`, `"value":"101"`, 1))
	require.ErrorIs(t, v.Verify(tampered), providers.ErrInvalidSignature, "an altered body must be refused")
	// testInvalidWebhookId: the same delivery for another webhook id.
	require.ErrorIs(t, build("NotToBeFound").Verify(request(javaSDKSig)), providers.ErrInvalidSignature)
	require.Len(t, javaSDKBody, 1636)
}

const javaSDKSig = "aBjgm5/xljRYu3G64Q0axISrP2xcy7WbW1u4UTCKnQvyprOZ1a1BBmqn2Jdr6ce8E76I3Ti/AL9y4VYSHyGSEaoE6dVQcCDebLbOXLH0fjTAbTc1/rmfdWmsk0DPltW84Y8W8jOHe3CLWDOwg5zmozyt+AceG2x5eOiw7mLSycaEoj/5RG+dOIWXnmWcLEArbG3VFshy0wuhZrKuGa9C/bD4Ku+Y9gK7Bv5I5IuGRVnTGpcFnVG0KxOyJxccLGyBVCIUMY5IZS7LkmJszQ3HZZFDTNihvgJHECSLwLhzUaysIye5G6CbbLdtAmeeb6wiDciEAvr2dFf+SplOR4Lrng=="

// javaSDKBody is the fixture's requestBody (a BILLING.PLAN.CREATED event),
// byte for byte, split for reading only.
const javaSDKBody = `{"id":"WH-2MW4820926242972J-6SG447389E205703U","event_version":"1.0","create_time":"2017-03-30T20:04` +
	`:05.613Z","resource_type":"plan","event_type":"BILLING.PLAN.CREATED","summary":"A billing plan was c` +
	`reated","resource":{"merchant_preferences":{"setup_fee":{"currency":"USD","value":"1"},"return_url":` +
	`"https://www.mta.org/wp-content/plugins/AMS/api/Paypal/paypal/rest-api-sdk-php/sample/billing/Execut` +
	`eAgreement.php?success=true","cancel_url":"https://www.mta.org/wp-content/plugins/AMS/api/Paypal/pay` +
	`pal/rest-api-sdk-php/sample/billing/ExecuteAgreement.php?success=false","auto_bill_amount":"YES","in` +
	`itial_fail_amount_action":"CONTINUE","max_fail_attempts":"0"},"update_time":"2017-03-30T20:04:05.587` +
	`Z","create_time":"2017-03-30T20:04:05.587Z","name":"T-Shirt of the Month Club Plan","description":"T` +
	`emplate creation.","links":[{"href":"api.sandbox.paypal.com/v1/payments/billing-plans/P-2U911356NH68` +
	`3973BEDIWKUY","rel":"self","method":"GET"}],"payment_definitions":[{"name":"Regular Payments","type"` +
	`:"REGULAR","frequency":"Month","frequency_interval":"2","amount":{"currency":"USD","value":"100"},"c` +
	`ycles":"12","charge_models":[{"type":"SHIPPING","amount":{"currency":"USD","value":"10"},"id":"CHM-6` +
	`H655806YS685182XEDIWKUY"}],"id":"PD-5N450756VM995270VEDIWKUY"}],"id":"P-2U911356NH683973BEDIWKUY","s` +
	`tate":"CREATED","type":"FIXED"},"links":[{"href":"https://api.sandbox.paypal.com/v1/notifications/we` +
	`bhooks-events/WH-2MW4820926242972J-6SG447389E205703U","rel":"self","method":"GET"},{"href":"https://` +
	`api.sandbox.paypal.com/v1/notifications/webhooks-events/WH-2MW4820926242972J-6SG447389E205703U/resen` +
	`d","rel":"resend","method":"POST"}]}`

// javaSDKCert is testClientCert.crt of the Java SDK's test resources.
const javaSDKCert = `-----BEGIN CERTIFICATE-----
MIIILDCCBxSgAwIBAgIQDEd6EXcAnHmtnx4u7tJZlTANBgkqhkiG9w0BAQsFADB1
MQswCQYDVQQGEwJVUzEVMBMGA1UEChMMRGlnaUNlcnQgSW5jMRkwFwYDVQQLExB3
d3cuZGlnaWNlcnQuY29tMTQwMgYDVQQDEytEaWdpQ2VydCBTSEEyIEV4dGVuZGVk
IFZhbGlkYXRpb24gU2VydmVyIENBMB4XDTE3MDIxODAwMDAwMFoXDTE5MDQyNjEy
MDAwMFowggElMR0wGwYDVQQPDBRQcml2YXRlIE9yZ2FuaXphdGlvbjETMBEGCysG
AQQBgjc8AgEDEwJVUzEZMBcGCysGAQQBgjc8AgECEwhEZWxhd2FyZTEQMA4GA1UE
BRMHMzAxNDI2NzEWMBQGA1UECRMNMjIxMSBOIDFzdCBTdDEOMAwGA1UEERMFOTUx
MzExCzAJBgNVBAYTAlVTMRMwEQYDVQQIEwpDYWxpZm9ybmlhMREwDwYDVQQHEwhT
YW4gSm9zZTEVMBMGA1UEChMMUGF5UGFsLCBJbmMuMRgwFgYDVQQLEw9QYXJ0bmVy
IFN1cHBvcnQxNDAyBgNVBAMTK21lc3NhZ2V2ZXJpZmljYXRpb25jZXJ0cy5zYW5k
Ym94LnBheXBhbC5jb20wggEiMA0GCSqGSIb3DQEBAQUAA4IBDwAwggEKAoIBAQDT
AsLQcHFGG0mvLNAlu3FJ/6QUr1EbUSBYnqF/oRbirzJRWbT3JWpFr2palaFNnfpC
wLB/KY+UX3xDLB5Ic38piG6FzRe1TiZcxhdIbOY21OvVVFatXfM62lzwX3RASpbV
A1cbCoDBSbgyplSPINVd8Gyf+qtJxbW7M6cVuZae1Nx0mA63SfNnRpBwOvYAUkCr
uCCjIVLqRuWbRzn0wvayVMWasw047rHhtFmaYBwJ1L4sn5NL+HDQ5wSMb1EE46v/
aGGdv7bcHhc4Re0C1pFW032MVb85eRD7OtvD2hZM2O5JwiwHMBXzxEjrIbGCA6be
3acmzYKxYLZHYt6KlQDBAgMBAAGjggQEMIIEADAfBgNVHSMEGDAWgBQ901Cl1qCt
7vNKYApl0yHU+PjWDzAdBgNVHQ4EFgQUgPw27mYvKgltHUaTXExjogwMhv8wNgYD
VR0RBC8wLYIrbWVzc2FnZXZlcmlmaWNhdGlvbmNlcnRzLnNhbmRib3gucGF5cGFs
LmNvbTAOBgNVHQ8BAf8EBAMCBaAwHQYDVR0lBBYwFAYIKwYBBQUHAwEGCCsGAQUF
BwMCMHUGA1UdHwRuMGwwNKAyoDCGLmh0dHA6Ly9jcmwzLmRpZ2ljZXJ0LmNvbS9z
aGEyLWV2LXNlcnZlci1nMS5jcmwwNKAyoDCGLmh0dHA6Ly9jcmw0LmRpZ2ljZXJ0
LmNvbS9zaGEyLWV2LXNlcnZlci1nMS5jcmwwSwYDVR0gBEQwQjA3BglghkgBhv1s
AgEwKjAoBggrBgEFBQcCARYcaHR0cHM6Ly93d3cuZGlnaWNlcnQuY29tL0NQUzAH
BgVngQwBATCBiAYIKwYBBQUHAQEEfDB6MCQGCCsGAQUFBzABhhhodHRwOi8vb2Nz
cC5kaWdpY2VydC5jb20wUgYIKwYBBQUHMAKGRmh0dHA6Ly9jYWNlcnRzLmRpZ2lj
ZXJ0LmNvbS9EaWdpQ2VydFNIQTJFeHRlbmRlZFZhbGlkYXRpb25TZXJ2ZXJDQS5j
cnQwDAYDVR0TAQH/BAIwADCCAfgGCisGAQQB1nkCBAIEggHoBIIB5AHiAHYApLkJ
kLQYWBSHuxOizGdwCjw1mAT5G9+443fNDsgN3BAAAAFaTqxLiAAABAMARzBFAiEA
pDFqvEjdtugwxjKvZqJ1Y1A1F1UX9EIvZL5Ar02YSe4CIBEf0EzZiic7u3IzI8BU
y0oFKh11VL1YIBAZfIj744o/AHYAVhQGmi/XwuzT9eG9RLI+x0Z2ubyZEVzA75SY
VdaJ0N0AAAFaTqxM2wAABAMARzBFAiEAn3lwWc95wltvaOnBaM09VQN9xhHHkwec
w5+tdHhSimgCIC1BaJ0RodgykU0ii2QzuzEoR8ci6qF+Pj6j1GE5wvU4AHcA7ku9
t3XOYLrhQmkfq+GeZqMPfl+wctiDAMR7iXqo/csAAAFaTqxOhwAABAMASDBGAiEA
/+kyQku3N/kwrubEfHSM4h20mZTvrAoRZovA5qwpVLICIQDyOQQu9r6kets5tO0b
YDXmaVWypOdS/ocseU11p5vBYAB3ALvZ37wfinG1k5Qjl6qSe0c4V5UKq1LoGpCW
ZDaOHtGFAAABWk6sTEUAAAQDAEgwRgIhALIDDduHsT0LymHxdrOWzzEaDLhVSl5i
vHAgWBcdl5AAAiEAgIYoXQHtSAiPyH4METNmAZAhiwo9uwTavdrjLsFJ2nowDQYJ
KoZIhvcNAQELBQADggEBAMxgCr0MTAbu7aE8ryfK3q8grN4rJOzBBzh8tSKYW4PU
FhAc6ZaW2/PNV+H8oYOP3nB28neglNjR/XZCyd7IRJoxSfwzUZhOBAzTFP0sp5Cu
GZN24j2SrxcKCaq3mszLmwgiRzuDUnRFdI2OHep6EcDelfURGz8w6eTaLw7m3FZr
gJSmmAOntirVZeVPLou74ykxWUm0kEi/OxNQWlgAlAHUcGZHpcupddK/dNRmCFSw
RBeiGwaLsz2SXYNvTs4it8cisAxTwBD1iqyXEKRSx6HpsmIOznwENimrR8Cz3jtz
QJmshPGmEbrpkKaJ7/DJO5EuMKFF6jYKjKiORugFKfU=
-----END CERTIFICATE-----
`
