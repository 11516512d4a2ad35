package appstore_test

import (
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/pem"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookline/hookline/providers/appstore"
)

// TestAppleRootCAG3Fingerprint: the embedded root is the one Apple
// publishes, whose SHA-256 fingerprint is
// 63:34:3A:BF:B8:9A:6A:03:EB:B5:7E:9B:3F:5F:A7:BE:7C:4F:5C:75:6F:30:17:B3:A8:C4:88:C3:65:3E:91:79.
func TestAppleRootCAG3Fingerprint(t *testing.T) {
	t.Parallel()
	block, rest := pem.Decode([]byte(appstore.AppleRootCAG3PEM))
	require.NotNil(t, block)
	require.Empty(t, rest)
	require.Equal(t, "CERTIFICATE", block.Type)
	sum := sha256.Sum256(block.Bytes)
	require.Equal(t, "63343abfb89a6a03ebb57e9b3f5fa7be7c4f5c756f3017b3a8c488c3653e9179", hex.EncodeToString(sum[:]))
	require.Equal(t, appstore.AppleRootCAG3SHA256, hex.EncodeToString(sum[:]))

	root := appstore.AppleRootCAG3()
	require.Equal(t, block.Bytes, root.Raw)
	require.Equal(t, "Apple Root CA - G3", root.Subject.CommonName)
	require.Equal(t, root.RawSubject, root.RawIssuer)
	require.NoError(t, root.CheckSignatureFrom(root), "self-signed")
	require.True(t, root.IsCA)
	require.Equal(t, time.Date(2039, 4, 30, 18, 19, 6, 0, time.UTC), root.NotAfter)
}

// Apple's real certificates, from the tests of Apple's App Store Server
// Library for Node.js (@apple/app-store-server-library 3.1.0,
// dist/tests/unit-tests/jws_verification.test.js: REAL_APPLE_INTERMEDIATE_BASE64_ENCODED
// and REAL_APPLE_SIGNING_CERTIFICATE_BASE64_ENCODED, checked there at
// EFFECTIVE_DATE, 1761962975000 ms): Apple Worldwide Developer Relations
// Certification Authority G6, and a leaf it issued, "Prod ECC Mac App Store
// and iTunes Store Receipt Signing". Public certificates; no key.
const (
	realAppleIntermediate = "MIIDFjCCApygAwIBAgIUIsGhRwp0c2nvU4YSycafPTjzbNcwCgYIKoZIzj0EAwMwZzEbMBkGA1UEAwwSQXBwbGUgUm9vdCBDQSAtIEczMSYwJAYDVQQLDB1BcHBsZSBDZXJ0aWZpY2F0aW9uIEF1dGhvcml0eTETMBEGA1UECgwKQXBwbGUgSW5jLjELMAkGA1UEBhMCVVMwHhcNMjEwMzE3MjAzNzEwWhcNMzYwMzE5MDAwMDAwWjB1MUQwQgYDVQQDDDtBcHBsZSBXb3JsZHdpZGUgRGV2ZWxvcGVyIFJlbGF0aW9ucyBDZXJ0aWZpY2F0aW9uIEF1dGhvcml0eTELMAkGA1UECwwCRzYxEzARBgNVBAoMCkFwcGxlIEluYy4xCzAJBgNVBAYTAlVTMHYwEAYHKoZIzj0CAQYFK4EEACIDYgAEbsQKC94PrlWmZXnXgtxzdVJL8T0SGYngDRGpngn3N6PT8JMEb7FDi4bBmPhCnZ3/sq6PF/cGcKXWsL5vOteRhyJ45x3ASP7cOB+aao90fcpxSv/EZFbniAbNgZGhIhpIo4H6MIH3MBIGA1UdEwEB/wQIMAYBAf8CAQAwHwYDVR0jBBgwFoAUu7DeoVgziJqkipnevr3rr9rLJKswRgYIKwYBBQUHAQEEOjA4MDYGCCsGAQUFBzABhipodHRwOi8vb2NzcC5hcHBsZS5jb20vb2NzcDAzLWFwcGxlcm9vdGNhZzMwNwYDVR0fBDAwLjAsoCqgKIYmaHR0cDovL2NybC5hcHBsZS5jb20vYXBwbGVyb290Y2FnMy5jcmwwHQYDVR0OBBYEFD8vlCNR01DJmig97bB85c+lkGKZMA4GA1UdDwEB/wQEAwIBBjAQBgoqhkiG92NkBgIBBAIFADAKBggqhkjOPQQDAwNoADBlAjBAXhSq5IyKogMCPtw490BaB677CaEGJXufQB/EqZGd6CSjiCtOnuMTbXVXmxxcxfkCMQDTSPxarZXvNrkxU3TkUMI33yzvFVVRT4wxWJC994OsdcZ4+RGNsYDyR5gmdr0nDGg="
	realAppleLeaf         = "MIIEMTCCA7agAwIBAgIQR8KHzdn554Z/UoradNx9tzAKBggqhkjOPQQDAzB1MUQwQgYDVQQDDDtBcHBsZSBXb3JsZHdpZGUgRGV2ZWxvcGVyIFJlbGF0aW9ucyBDZXJ0aWZpY2F0aW9uIEF1dGhvcml0eTELMAkGA1UECwwCRzYxEzARBgNVBAoMCkFwcGxlIEluYy4xCzAJBgNVBAYTAlVTMB4XDTI1MDkxOTE5NDQ1MVoXDTI3MTAxMzE3NDcyM1owgZIxQDA+BgNVBAMMN1Byb2QgRUNDIE1hYyBBcHAgU3RvcmUgYW5kIGlUdW5lcyBTdG9yZSBSZWNlaXB0IFNpZ25pbmcxLDAqBgNVBAsMI0FwcGxlIFdvcmxkd2lkZSBEZXZlbG9wZXIgUmVsYXRpb25zMRMwEQYDVQQKDApBcHBsZSBJbmMuMQswCQYDVQQGEwJVUzBZMBMGByqGSM49AgEGCCqGSM49AwEHA0IABNnVvhcv7iT+7Ex5tBMBgrQspHzIsXRi0Yxfek7lv8wEmj/bHiWtNwJqc2BoHzsQiEjP7KFIIKg4Y8y0/nynuAmjggIIMIICBDAMBgNVHRMBAf8EAjAAMB8GA1UdIwQYMBaAFD8vlCNR01DJmig97bB85c+lkGKZMHAGCCsGAQUFBwEBBGQwYjAtBggrBgEFBQcwAoYhaHR0cDovL2NlcnRzLmFwcGxlLmNvbS93d2RyZzYuZGVyMDEGCCsGAQUFBzABhiVodHRwOi8vb2NzcC5hcHBsZS5jb20vb2NzcDAzLXd3ZHJnNjAyMIIBHgYDVR0gBIIBFTCCAREwggENBgoqhkiG92NkBQYBMIH+MIHDBggrBgEFBQcCAjCBtgyBs1JlbGlhbmNlIG9uIHRoaXMgY2VydGlmaWNhdGUgYnkgYW55IHBhcnR5IGFzc3VtZXMgYWNjZXB0YW5jZSBvZiB0aGUgdGhlbiBhcHBsaWNhYmxlIHN0YW5kYXJkIHRlcm1zIGFuZCBjb25kaXRpb25zIG9mIHVzZSwgY2VydGlmaWNhdGUgcG9saWN5IGFuZCBjZXJ0aWZpY2F0aW9uIHByYWN0aWNlIHN0YXRlbWVudHMuMDYGCCsGAQUFBwIBFipodHRwOi8vd3d3LmFwcGxlLmNvbS9jZXJ0aWZpY2F0ZWF1dGhvcml0eS8wHQYDVR0OBBYEFIFioG4wMMVA1ku9zJmGNPAVn3eqMA4GA1UdDwEB/wQEAwIHgDAQBgoqhkiG92NkBgsBBAIFADAKBggqhkjOPQQDAwNpADBmAjEA+qXnREC7hXIWVLsLxznjRpIzPf7VHz9V/CTm8+LJlrQepnmcPvGLNcX6XPnlcgLAAjEA5IjNZKgg5pQ79knF4IbTXdKv8vutIDMXDmjPVT3dGvFtsGRwXOywR2kZCdSrfeot"
	realAppleEffective    = 1761962975000
)

// TestRealAppleChain: Apple's real chain verifies against the embedded
// root, marker extensions and all (as it does in the library's own test),
// and not outside its leaf's validity.
func TestRealAppleChain(t *testing.T) {
	t.Parallel()
	leaf, err := appstore.ParseCert(realAppleLeaf, 0)
	require.NoError(t, err)
	inter, err := appstore.ParseCert(realAppleIntermediate, 1)
	require.NoError(t, err)
	roots := []*x509.Certificate{appstore.AppleRootCAG3()}
	at := time.UnixMilli(realAppleEffective)
	pub, err := appstore.VerifyChain(roots, leaf, inter, at)
	require.NoError(t, err)
	require.Equal(t, leaf.PublicKey, pub)

	_, err = appstore.VerifyChain(roots, leaf, inter, leaf.NotAfter.Add(2*time.Minute))
	require.ErrorContains(t, err, "leaf is not valid")
	_, err = appstore.VerifyChain(roots, leaf, inter, leaf.NotBefore.Add(-2*time.Minute))
	require.ErrorContains(t, err, "leaf is not valid")
	// Swapped, or with no trusted root, it does not verify.
	_, err = appstore.VerifyChain(roots, inter, leaf, at)
	require.Error(t, err)
	_, err = appstore.VerifyChain(nil, leaf, inter, at)
	require.ErrorContains(t, err, "trusted root")

	der, err := base64.StdEncoding.DecodeString(realAppleIntermediate)
	require.NoError(t, err)
	require.LessOrEqual(t, len(der), appstore.MaxCertBytes)
	der, err = base64.StdEncoding.DecodeString(realAppleLeaf)
	require.NoError(t, err)
	require.LessOrEqual(t, len(der), appstore.MaxCertBytes)
}
