package appstore

import (
	"crypto/x509"
	"encoding/pem"
	"sync"
)

// AppleRootCAG3PEM is Apple Root CA - G3, the root of the certificate chains
// Apple signs App Store Server Notifications with. It is public: Apple
// publishes it at https://www.apple.com/certificateauthority/AppleRootCA-G3.cer
// (DER), with the SHA-256 fingerprint
//
//	63:34:3A:BF:B8:9A:6A:03:EB:B5:7E:9B:3F:5F:A7:BE:7C:4F:5C:75:6F:30:17:B3:A8:C4:88:C3:65:3E:91:79
//
// (AppleRootCAG3SHA256; roots_test.go asserts it). Subject CN=Apple Root CA
// - G3, OU=Apple Certification Authority, O=Apple Inc., C=US; a P-384 key;
// valid 2014-04-30 to 2039-04-30. Every adapter trusts it; a source adds
// roots with appstore.root_certs.
const AppleRootCAG3PEM = `-----BEGIN CERTIFICATE-----
MIICQzCCAcmgAwIBAgIILcX8iNLFS5UwCgYIKoZIzj0EAwMwZzEbMBkGA1UEAwwS
QXBwbGUgUm9vdCBDQSAtIEczMSYwJAYDVQQLDB1BcHBsZSBDZXJ0aWZpY2F0aW9u
IEF1dGhvcml0eTETMBEGA1UECgwKQXBwbGUgSW5jLjELMAkGA1UEBhMCVVMwHhcN
MTQwNDMwMTgxOTA2WhcNMzkwNDMwMTgxOTA2WjBnMRswGQYDVQQDDBJBcHBsZSBS
b290IENBIC0gRzMxJjAkBgNVBAsMHUFwcGxlIENlcnRpZmljYXRpb24gQXV0aG9y
aXR5MRMwEQYDVQQKDApBcHBsZSBJbmMuMQswCQYDVQQGEwJVUzB2MBAGByqGSM49
AgEGBSuBBAAiA2IABJjpLz1AcqTtkyJygRMc3RCV8cWjTnHcFBbZDuWmBSp3ZHtf
TjjTuxxEtX/1H7YyYl3J6YRbTzBPEVoA/VhYDKX1DyxNB0cTddqXl5dvMVztK517
IDvYuVTZXpmkOlEKMaNCMEAwHQYDVR0OBBYEFLuw3qFYM4iapIqZ3r6966/ayySr
MA8GA1UdEwEB/wQFMAMBAf8wDgYDVR0PAQH/BAQDAgEGMAoGCCqGSM49BAMDA2gA
MGUCMQCD6cHEFl4aXTQY2e3v9GwOAEZLuN+yRhHFD/3meoyhpmvOwgPUnPWTxnS4
at+qIxUCMG1mihDK1A3UT82NQz60imOlM27jbdoXt2QfyFMm+YhidDkLF1vLUagM
6BgD56KyKA==
-----END CERTIFICATE-----
`

// AppleRootCAG3SHA256 is the hex SHA-256 of AppleRootCAG3PEM's DER, Apple's
// published fingerprint.
const AppleRootCAG3SHA256 = "63343abfb89a6a03ebb57e9b3f5fa7be7c4f5c756f3017b3a8c488c3653e9179"

// appleRootG3 is AppleRootCAG3PEM parsed, once.
var appleRootG3 = sync.OnceValue(func() *x509.Certificate {
	block, _ := pem.Decode([]byte(AppleRootCAG3PEM))
	if block == nil {
		panic("appstore: AppleRootCAG3PEM holds no PEM block")
	}
	c, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		panic("appstore: AppleRootCAG3PEM: " + err.Error())
	}
	return c
})

// AppleRootCAG3 returns Apple Root CA - G3 (a fresh copy of the parsed
// certificate's fields is not made: do not modify it).
func AppleRootCAG3() *x509.Certificate { return appleRootG3() }
