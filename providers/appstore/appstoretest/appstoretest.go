// Package appstoretest signs App Store Server Notifications V2 the way
// Apple does, with a test certificate chain shaped like Apple's: a root
// (P-384), an intermediate (P-384) carrying Apple's intermediate marker
// extension, and a leaf (P-256) carrying Apple's leaf marker extension. Only
// Apple holds the keys of its own chain, so hookline's appstore adapter
// cannot sign; tests (and anything emulating Apple) give the test root to a
// source through `appstore.root_certs` (Chain.RootPEM) and sign with it.
package appstoretest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"time"

	"github.com/hookline/hookline/providers"
	"github.com/hookline/hookline/providers/appstore"
)

// Options shape a test chain. The zero value is a chain like Apple's,
// valid from 2020 to 2045.
type Options struct {
	// NotBefore and NotAfter bound the validity of every certificate; zero:
	// 2020-01-01 and 2045-01-01.
	NotBefore, NotAfter time.Time
	// LeafNotBefore and LeafNotAfter, when set, bound the leaf's instead.
	LeafNotBefore, LeafNotAfter time.Time
	// NoLeafOID and NoIntermediateOID leave out Apple's marker extensions.
	NoLeafOID, NoIntermediateOID bool
	// Name distinguishes the subjects of several chains ("foreign").
	Name string
}

// Chain is a test certificate chain and its keys.
type Chain struct {
	Root, Intermediate, Leaf          *x509.Certificate
	RootKey, IntermediateKey, LeafKey *ecdsa.PrivateKey
}

var marker = []byte{0x05, 0x00} // DER NULL, the value Apple's extensions carry

func newKey(c elliptic.Curve) (*ecdsa.PrivateKey, error) { return ecdsa.GenerateKey(c, rand.Reader) }

func serial() (*big.Int, error) { return rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 63)) }

func issue(tmpl, parent *x509.Certificate, pub *ecdsa.PublicKey, signer *ecdsa.PrivateKey) (*x509.Certificate, error) {
	sn, err := serial()
	if err != nil {
		return nil, err
	}
	tmpl.SerialNumber = sn
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, pub, signer)
	if err != nil {
		return nil, err
	}
	return x509.ParseCertificate(der)
}

func (o Options) bounds() (time.Time, time.Time) {
	nb, na := o.NotBefore, o.NotAfter
	if nb.IsZero() {
		nb = time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)
	}
	if na.IsZero() {
		na = time.Date(2045, 1, 1, 0, 0, 0, 0, time.UTC)
	}
	return nb, na
}

// NewChain makes a root, an intermediate and a leaf as o says.
func NewChain(o Options) (*Chain, error) {
	nb, na := o.bounds()
	name := "hookline test"
	if o.Name != "" {
		name += " " + o.Name
	}
	c := &Chain{}
	var err error
	if c.RootKey, err = newKey(elliptic.P384()); err != nil {
		return nil, err
	}
	root := &x509.Certificate{
		Subject:   pkix.Name{CommonName: name + " root CA (not Apple)", Organization: []string{"hookline"}},
		NotBefore: nb, NotAfter: na,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true, IsCA: true,
	}
	if c.Root, err = issue(root, root, &c.RootKey.PublicKey, c.RootKey); err != nil {
		return nil, err
	}
	if c.IntermediateKey, err = newKey(elliptic.P384()); err != nil {
		return nil, err
	}
	inter := &x509.Certificate{
		Subject:   pkix.Name{CommonName: name + " intermediate CA (not Apple)", Organization: []string{"hookline"}},
		NotBefore: nb, NotAfter: na,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true, IsCA: true, MaxPathLen: 0, MaxPathLenZero: true,
	}
	if !o.NoIntermediateOID {
		inter.ExtraExtensions = []pkix.Extension{{Id: appstore.OIDIntermediate, Value: marker}}
	}
	if c.Intermediate, err = issue(inter, c.Root, &c.IntermediateKey.PublicKey, c.RootKey); err != nil {
		return nil, err
	}
	return c, c.newLeaf(o)
}

// newLeaf issues c a new leaf under its intermediate.
func (c *Chain) newLeaf(o Options) error {
	nb, na := o.bounds()
	if !o.LeafNotBefore.IsZero() {
		nb = o.LeafNotBefore
	}
	if !o.LeafNotAfter.IsZero() {
		na = o.LeafNotAfter
	}
	key, err := newKey(elliptic.P256())
	if err != nil {
		return err
	}
	leaf := &x509.Certificate{
		Subject:   pkix.Name{CommonName: "hookline test App Store signing (not Apple)", Organization: []string{"hookline"}},
		NotBefore: nb, NotAfter: na,
		KeyUsage:              x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
	}
	if !o.NoLeafOID {
		leaf.ExtraExtensions = []pkix.Extension{{Id: appstore.OIDLeaf, Value: marker}}
	}
	if c.Leaf, err = issue(leaf, c.Intermediate, &key.PublicKey, c.IntermediateKey); err != nil {
		return err
	}
	c.LeafKey = key
	return nil
}

// WithLeaf returns a chain with c's root and intermediate and a new leaf
// shaped by o's leaf fields (LeafNotBefore, LeafNotAfter, NoLeafOID).
func (c *Chain) WithLeaf(o Options) (*Chain, error) {
	d := *c
	return &d, d.newLeaf(o)
}

// MustChain is NewChain for tests: it panics on error.
func MustChain(o Options) *Chain {
	c, err := NewChain(o)
	if err != nil {
		panic(err)
	}
	return c
}

// RootPEM is the root in PEM, for appstore.root_certs.
func (c *Chain) RootPEM() string {
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Root.Raw}))
}

// X5C is the chain as a JWS header carries it: leaf, intermediate, root,
// each the standard base64 of its DER.
func (c *Chain) X5C() []string {
	out := make([]string, 0, 3)
	for _, cert := range []*x509.Certificate{c.Leaf, c.Intermediate, c.Root} {
		out = append(out, base64.StdEncoding.EncodeToString(cert.Raw))
	}
	return out
}

// SignJWS signs payload as a compact JWS, {"alg":"ES256","x5c":[…]}, with
// c's leaf key.
func (c *Chain) SignJWS(payload []byte) (string, error) {
	return SignJWS(c.LeafKey, c.X5C(), payload)
}

// SignJWS signs payload with key as a compact ES256 JWS whose header
// carries x5c (any number of entries: tests make bad chains with it).
func SignJWS(key *ecdsa.PrivateKey, x5c []string, payload []byte) (string, error) {
	hdr, err := json.Marshal(struct {
		Alg string   `json:"alg"`
		X5C []string `json:"x5c"`
	}{appstore.Alg, x5c})
	if err != nil {
		return "", err
	}
	input := base64.RawURLEncoding.EncodeToString(hdr) + "." + base64.RawURLEncoding.EncodeToString(payload)
	return SignInput(key, input)
}

// SignInput signs a JWS signing input ("<header>.<payload>", base64url)
// with key and returns the compact JWS.
func SignInput(key *ecdsa.PrivateKey, input string) (string, error) {
	if key == nil || key.Curve != elliptic.P256() {
		return "", errors.New("appstoretest: ES256 needs a P-256 key")
	}
	digest := sha256.Sum256([]byte(input))
	r, s, err := ecdsa.Sign(rand.Reader, key, digest[:])
	if err != nil {
		return "", err
	}
	sig := make([]byte, 64)
	r.FillBytes(sig[:32])
	s.FillBytes(sig[32:])
	return input + "." + base64.RawURLEncoding.EncodeToString(sig), nil
}

// Body is the body Apple POSTs for a signed payload.
func Body(jws string) []byte {
	b, _ := json.Marshal(map[string]string{"signedPayload": jws})
	return b
}

// WithSignedDate returns the JSON object payload with its signedDate set
// to at (Unix milliseconds). Its keys come out sorted.
func WithSignedDate(payload []byte, at time.Time) ([]byte, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(payload, &m); err != nil || m == nil {
		return nil, fmt.Errorf("appstoretest: the payload is not a JSON object")
	}
	m["signedDate"] = json.RawMessage(fmt.Sprint(at.UnixMilli()))
	return json.Marshal(m)
}

// Sign turns r into the notification Apple would send: r's body is the
// decoded payload (a JSON object); its signedDate is set to now, it is
// signed with c's leaf key, and the body becomes {"signedPayload": …}.
func (c *Chain) Sign(r *providers.Request, now time.Time) error {
	payload, err := WithSignedDate(r.Body, now)
	if err != nil {
		return err
	}
	jws, err := c.SignJWS(payload)
	if err != nil {
		return err
	}
	r.Body = Body(jws)
	if r.Header != nil {
		r.Header.Set("Content-Type", "application/json")
	}
	return nil
}
