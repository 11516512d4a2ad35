package keyfetch

import (
	"context"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"

	"github.com/hookline/hookline/providers"
)

// Defaults of Certs.
const (
	// DefaultMaxCertBytes bounds a certificate URL's answer.
	DefaultMaxCertBytes = 64 << 10
	// DefaultFetchTimeout bounds one fetch, the wait for its turn included.
	DefaultFetchTimeout = 10 * time.Second
)

// ErrCertificate marks a certificate that could not be had. Errors that say
// nothing about the certificate (the rate limit, a network error, a 408, 429
// or 5xx answer) wrap providers.ErrUnavailable too; the others are answers
// about the URL the delivery named, which the adapter turns into an invalid
// signature.
var ErrCertificate = errors.New("cannot get the signing certificate")

// CertsOptions configure Certs. Zero fields take the defaults.
type CertsOptions struct {
	// Name names the certificates in errors ("PayPal's").
	Name string
	// Client makes the fetches. Default: a client with DefaultFetchTimeout.
	// Certs uses a copy that never follows redirects.
	Client *http.Client
	// Now is the adapter's clock. Default time.Now.
	Now func() time.Time
	// MaxEntries bounds the certificates kept. Default DefaultMaxEntries.
	MaxEntries int
	// MaxBytes bounds an answer. Default DefaultMaxCertBytes.
	MaxBytes int
}

// Certs fetches the X.509 certificates that deliveries name by URL (PayPal's
// PAYPAL-CERT-URL, SNS's SigningCertURL), each holding the RSA key that
// checks the delivery's signature. The adapter decides which URLs may be
// fetched; Certs bounds the rest: a certificate is kept until its NotAfter
// (a Cache: negative answers remembered, one fetch per URL at a time), the
// fetches go through a Limiter, redirects are not followed, and an answer
// is read up to MaxBytes. Safe for concurrent use.
type Certs struct {
	name     string
	client   *http.Client
	now      func() time.Time
	maxBytes int
	cache    *Cache[Cert]
	limiter  *Limiter
}

// Cert is what Certs keeps of a fetched certificate.
type Cert struct {
	Key                 *rsa.PublicKey
	NotBefore, NotAfter time.Time
}

// NewCerts returns an empty Certs.
func NewCerts(o CertsOptions) *Certs {
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.MaxEntries <= 0 {
		o.MaxEntries = DefaultMaxEntries
	}
	if o.MaxBytes <= 0 {
		o.MaxBytes = DefaultMaxCertBytes
	}
	return &Certs{
		name:     o.Name,
		client:   NoRedirects(o.Client),
		now:      o.Now,
		maxBytes: o.MaxBytes,
		cache:    NewCache[Cert](Options{MaxEntries: o.MaxEntries, Now: o.Now}),
		limiter:  NewDefaultLimiter(),
	}
}

// PublicKey returns the key of the certificate at u if it is current now:
// from the cache, or fetched. A certificate not yet valid stays cached (it
// becomes usable at its NotBefore); one past its NotAfter is never kept, so
// a renewed certificate at the same URL is picked up.
func (c *Certs) PublicKey(u *url.URL) (*rsa.PublicKey, error) {
	cert, err := c.cache.Get(u.String(), func(time.Time) (Cert, time.Time, error) {
		cert, err := c.fetch(u)
		return cert, cert.NotAfter, err
	})
	if err != nil {
		return nil, err
	}
	now := c.now()
	if now.Before(cert.NotBefore) || now.After(cert.NotAfter) {
		return nil, c.errorf("the certificate is not valid now")
	}
	return cert.Key, nil
}

func (c *Certs) errorf(format string, args ...any) error {
	return fmt.Errorf("%w (%s): "+format, append([]any{ErrCertificate, c.name}, args...)...)
}

// unavailable is a fetch that failed for reasons that say nothing about the
// certificate.
func (c *Certs) unavailable(format string, args ...any) error {
	return fmt.Errorf("%w: %w", providers.ErrUnavailable, c.errorf(format, args...))
}

// fetch gets the certificate at u.
func (c *Certs) fetch(u *url.URL) (Cert, error) {
	ctx, cancel := context.WithTimeout(context.Background(), DefaultFetchTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return Cert{}, c.errorf("%v", err)
	}
	if err := c.limiter.Wait(ctx); err != nil {
		return Cert{}, fmt.Errorf("%w (%s): %w", ErrCertificate, c.name, err) // ErrRateLimited wraps ErrUnavailable
	}
	resp, err := c.client.Do(req)
	if err != nil {
		return Cert{}, c.unavailable("%v", err)
	}
	defer resp.Body.Close()
	if Transient(resp.StatusCode) {
		return Cert{}, c.unavailable("%s answered %d", u.Host, resp.StatusCode)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return Cert{}, c.errorf("%s answered %d", u.Host, resp.StatusCode)
	}
	raw, err := io.ReadAll(io.LimitReader(resp.Body, int64(c.maxBytes)+1))
	if err != nil {
		return Cert{}, c.unavailable("%v", err)
	}
	return c.parse(raw)
}

// parse reads a certificate URL's answer: at most maxBytes, a certificate
// (see ParseCertificate) holding an RSA key. Its validity period is not
// checked here. Errors wrap ErrCertificate, never providers.ErrUnavailable.
func (c *Certs) parse(raw []byte) (Cert, error) {
	if len(raw) > c.maxBytes {
		return Cert{}, c.errorf("the answer is over %d bytes", c.maxBytes)
	}
	x, err := ParseCertificate(raw)
	if err != nil {
		return Cert{}, c.errorf("%v", err)
	}
	pub, ok := x.PublicKey.(*rsa.PublicKey)
	if !ok {
		return Cert{}, c.errorf("the certificate key is not RSA")
	}
	return Cert{Key: pub, NotBefore: x.NotBefore, NotAfter: x.NotAfter}, nil
}

// ParseCertificate returns the first certificate of a PEM bundle (the leaf,
// as PayPal and SNS serve it) or of a DER certificate.
func ParseCertificate(raw []byte) (*x509.Certificate, error) {
	rest := raw
	for {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			break
		}
		if block.Type == "CERTIFICATE" {
			x, err := x509.ParseCertificate(block.Bytes)
			if err != nil {
				return nil, errors.New("unparseable certificate")
			}
			return x, nil
		}
	}
	x, err := x509.ParseCertificate(raw)
	if err != nil {
		return nil, errors.New("no certificate in the answer")
	}
	return x, nil
}
