package appstore

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/x509"
	"encoding/asn1"
	"encoding/base64"
	"errors"
	"fmt"
	"time"
)

// The marker extensions Apple's library requires (their presence; any value,
// critical or not): the leaf's, on App Store receipt-signing certificates,
// and the intermediate's, on Apple Worldwide Developer Relations
// Certification Authority G6.
var (
	OIDLeaf         = asn1.ObjectIdentifier{1, 2, 840, 113635, 100, 6, 11, 1}
	OIDIntermediate = asn1.ObjectIdentifier{1, 2, 840, 113635, 100, 6, 2, 1}
)

// MaxSkew is the slack allowed around each certificate's validity period,
// as in Apple's library (MAX_SKEW, 60 s).
const MaxSkew = time.Minute

// errChain marks a chain that does not verify; Verify wraps it in
// providers.ErrInvalidSignature.
var errChain = errors.New("the x5c certificate chain does not verify")

func chainErr(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{errChain}, args...)...)
}

// ParseCert decodes x5c entry i: standard base64 (padded) of a DER
// certificate of at most MaxCertBytes.
func ParseCert(b64 string, i int) (*x509.Certificate, error) {
	if len(b64) > maxCertBase64 {
		return nil, chainErr("x5c[%d] is over %d bytes", i, MaxCertBytes)
	}
	der, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		return nil, chainErr("x5c[%d] is not base64", i)
	}
	c, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, chainErr("x5c[%d] is not a certificate", i)
	}
	return c, nil
}

func hasExtension(c *x509.Certificate, oid asn1.ObjectIdentifier) bool {
	for _, e := range c.Extensions {
		if e.Id.Equal(oid) {
			return true
		}
	}
	return false
}

// validAt reports whether c is valid at t, give or take MaxSkew.
func validAt(c *x509.Certificate, t time.Time) bool {
	return !c.NotBefore.After(t.Add(MaxSkew)) && !c.NotAfter.Before(t.Add(-MaxSkew))
}

// VerifyChain checks leaf and intermediate (x5c[0] and x5c[1]) as Apple's
// library does (verifyCertificateChainWithoutCaching), and returns the
// leaf's key:
//
//   - the intermediate is signed by one of roots and names it as issuer
//     (RawIssuer equal to the root's RawSubject);
//   - the leaf is signed by the intermediate and names it as issuer;
//   - the intermediate is a CA (basic constraints), and so is the root;
//   - the leaf carries OIDLeaf, the intermediate OIDIntermediate;
//   - the leaf, the intermediate and the root are valid at at (give or take
//     MaxSkew).
//
// Besides, hookline refuses a leaf or intermediate with a critical
// extension it does not know (RFC 5280), signatures with SHA-1 or MD5 (Go's
// CheckSignatureFrom), a CA whose key usage excludes certificate signing,
// and a leaf key that is not ECDSA P-256 (Alg). No revocation is checked
// (no OCSP: hookline makes no network call to verify).
func VerifyChain(roots []*x509.Certificate, leaf, intermediate *x509.Certificate, at time.Time) (*ecdsa.PublicKey, error) {
	// The issuing root: one valid at at when several roots could be (the
	// same key under two certificates).
	var root *x509.Certificate
	for _, r := range roots {
		if bytes.Equal(intermediate.RawIssuer, r.RawSubject) && intermediate.CheckSignatureFrom(r) == nil &&
			(root == nil || !validAt(root, at)) {
			root = r
		}
	}
	if root == nil {
		return nil, chainErr("the intermediate is not issued by a trusted root (Apple Root CA - G3, or appstore.root_certs)")
	}
	if !intermediate.BasicConstraintsValid || !intermediate.IsCA {
		return nil, chainErr("the intermediate is not a CA")
	}
	if !bytes.Equal(leaf.RawIssuer, intermediate.RawSubject) || leaf.CheckSignatureFrom(intermediate) != nil {
		return nil, chainErr("the leaf is not issued by the intermediate")
	}
	for _, c := range []struct {
		cert *x509.Certificate
		name string
	}{{leaf, "leaf"}, {intermediate, "intermediate"}} {
		if len(c.cert.UnhandledCriticalExtensions) > 0 {
			return nil, chainErr("the %s has a critical extension hookline does not know", c.name)
		}
	}
	if !hasExtension(leaf, OIDLeaf) {
		return nil, chainErr("the leaf lacks Apple's marker extension %s", OIDLeaf)
	}
	if !hasExtension(intermediate, OIDIntermediate) {
		return nil, chainErr("the intermediate lacks Apple's marker extension %s", OIDIntermediate)
	}
	for _, c := range []struct {
		cert *x509.Certificate
		name string
	}{{leaf, "leaf"}, {intermediate, "intermediate"}, {root, "root"}} {
		if !validAt(c.cert, at) {
			return nil, chainErr("the %s is not valid at the notification's signedDate (%s)", c.name, at.UTC().Format(time.RFC3339))
		}
	}
	pub, ok := leaf.PublicKey.(*ecdsa.PublicKey)
	if !ok || pub.Curve != elliptic.P256() {
		return nil, chainErr("the leaf's key is not ECDSA P-256 (%s)", Alg)
	}
	return pub, nil
}
