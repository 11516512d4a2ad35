package googleplay

import (
	"context"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"math/big"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/hookline/hookline/providers"
)

// keySet is a fetched key set: its usable keys by kid, and until when it
// may be used.
type keySet struct {
	keys  map[string]*rsa.PublicKey
	until time.Time
}

// setKey is the one key the set is cached under.
const setKey = "jwks"

var (
	// errFetch marks a key set that could not be had; such errors also
	// wrap providers.ErrUnavailable.
	errFetch = errors.New("cannot get Google's keys")
	// errUnknownKid: the key set, refetched, has no key of that kid.
	errUnknownKid = errors.New("no key of Google's key set has the token's kid")
)

// unavailable is a key set fetch that failed: whatever the reason, the
// keys URL is the source's own, so it says nothing about the push.
func unavailable(format string, args ...any) error {
	return fmt.Errorf("%w: %w: "+format, append([]any{providers.ErrUnavailable, errFetch}, args...)...)
}

// publicKey returns the key named kid: from the cached set (fetched when
// none is current), else from a refetched set (Google publishes a new key
// before signing with it). A kid the refetched set lacks is remembered for
// keyfetch's negative TTL: naming it again costs no fetch.
func (v *Verifier) publicKey(kid string) (*rsa.PublicKey, error) {
	set, err := v.sets.Get(setKey, v.fetchSet)
	if err != nil {
		return nil, err
	}
	if k := set.keys[kid]; k != nil {
		return k, nil
	}
	return v.kids.Get(kid, func(now time.Time) (*rsa.PublicKey, time.Time, error) {
		s, until, err := v.fetchSet(now)
		if err != nil {
			return nil, time.Time{}, err
		}
		if k := s.keys[kid]; k != nil {
			return k, until, nil
		}
		return nil, time.Time{}, errUnknownKid
	})
}

// fetchSet fetches the key set at now; concurrent calls share one request.
// It is a keyfetch.Fetcher.
func (v *Verifier) fetchSet(now time.Time) (*keySet, time.Time, error) {
	res, err, _ := v.fetches.Do(setKey, func() (any, error) { return v.fetchKeys(now) })
	if err != nil {
		return nil, time.Time{}, err
	}
	s, _ := res.(*keySet)
	return s, s.until, nil
}

// fetchKeys makes one request for the key set, within the rate limit.
// Every error wraps providers.ErrUnavailable and errFetch.
func (v *Verifier) fetchKeys(now time.Time) (*keySet, error) {
	ctx, cancel := context.WithTimeout(context.Background(), fetchTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, v.keysURL, nil)
	if err != nil {
		return nil, unavailable("%v", err)
	}
	req.Header.Set("Accept", "application/json")
	if err := v.limiter.Wait(ctx); err != nil {
		return nil, fmt.Errorf("%w: %w", errFetch, err) // keyfetch.ErrRateLimited wraps ErrUnavailable
	}
	resp, err := v.client.Do(req)
	if err != nil {
		return nil, unavailable("%v", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return nil, unavailable("googleplay.keys_url answered %d", resp.StatusCode)
	}
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxKeysResponse+1))
	if err != nil {
		return nil, unavailable("%v", err)
	}
	if len(raw) > maxKeysResponse {
		return nil, unavailable("the key set is over %d bytes", maxKeysResponse)
	}
	keys, err := ParseKeySet(raw)
	if err != nil {
		return nil, unavailable("%v", err)
	}
	return &keySet{keys: keys, until: now.Add(cacheTTL(resp.Header.Get("Cache-Control")))}, nil
}

// cacheTTL is how long a key set answered with Cache-Control cc is used:
// its max-age clamped to [1 min, 24 h], else an hour.
func cacheTTL(cc string) time.Duration {
	for _, d := range strings.Split(cc, ",") {
		name, val, _ := strings.Cut(strings.TrimSpace(d), "=")
		if !strings.EqualFold(strings.TrimSpace(name), "max-age") {
			continue
		}
		n, err := strconv.ParseInt(strings.Trim(strings.TrimSpace(val), `"`), 10, 64)
		if err != nil || n < 0 {
			break
		}
		return min(max(time.Duration(min(n, int64(maxKeysTTL/time.Second)))*time.Second, minKeysTTL), maxKeysTTL)
	}
	return keysRefresh
}

// JWK is one key of a JSON Web Key Set (RFC 7517), as Google's
// https://www.googleapis.com/oauth2/v3/certs lists it.
type JWK struct {
	Kty string `json:"kty"`
	Alg string `json:"alg,omitempty"`
	Use string `json:"use,omitempty"`
	Kid string `json:"kid"`
	N   string `json:"n"`
	E   string `json:"e"`
}

// ParseKeySet reads a JWKS, {"keys": [...]}, and returns its usable keys by
// kid: RSA keys (kty RSA) of 2048 to 8192 bits, for RS256 signatures (alg
// RS256 or none, use sig or none), with a kid of at most 256 bytes. Other
// keys are skipped, and so is a kid listed twice; at most 64 keys are
// read. A set without a usable key is an error.
func ParseKeySet(raw []byte) (map[string]*rsa.PublicKey, error) {
	var set struct {
		Keys []json.RawMessage `json:"keys"`
	}
	if err := strictObject(raw, &set); err != nil {
		return nil, errors.New("the key set is not a JSON object")
	}
	keys := map[string]*rsa.PublicKey{}
	twice := map[string]bool{}
	for i, k := range set.Keys {
		if i == maxKeys {
			break
		}
		var j JWK
		if json.Unmarshal(k, &j) != nil {
			continue
		}
		pub, err := j.PublicKey()
		if err != nil {
			continue
		}
		if _, dup := keys[j.Kid]; dup || twice[j.Kid] {
			delete(keys, j.Kid)
			twice[j.Kid] = true
			continue
		}
		keys[j.Kid] = pub
	}
	if len(keys) == 0 {
		return nil, errors.New("the key set has no usable RS256 key")
	}
	return keys, nil
}

// PublicKey returns the RSA public key of an RS256 signing JWK.
func (k *JWK) PublicKey() (*rsa.PublicKey, error) {
	switch {
	case k.Kty != "RSA" || (k.Alg != "" && k.Alg != "RS256") || (k.Use != "" && k.Use != "sig"):
		return nil, errors.New("not an RS256 signing key")
	case k.Kid == "" || len(k.Kid) > maxKidBytes:
		return nil, errors.New("no kid, or one over 256 bytes")
	}
	n, err1 := rawURL.DecodeString(strings.TrimRight(k.N, "="))
	e, err2 := rawURL.DecodeString(strings.TrimRight(k.E, "="))
	if err1 != nil || err2 != nil || len(e) == 0 || len(e) > 4 {
		return nil, errors.New("n and e are not base64url integers")
	}
	pub := &rsa.PublicKey{N: new(big.Int).SetBytes(n)}
	ev := new(big.Int).SetBytes(e).Int64()
	if bits := pub.N.BitLen(); bits < 2048 || bits > 8192 || ev < 3 || ev%2 == 0 || ev > math.MaxInt32 {
		return nil, errors.New("not an RSA key of 2048 to 8192 bits with an odd exponent")
	}
	pub.E = int(ev)
	return pub, nil
}

// JWKS returns the key set of keys (kid → key) as Google serves it, for
// tests and tools that stand in for Google's key endpoint.
func JWKS(keys map[string]*rsa.PublicKey) ([]byte, error) {
	out := struct {
		Keys []JWK `json:"keys"`
	}{Keys: []JWK{}}
	for _, kid := range slices.Sorted(maps.Keys(keys)) {
		pub := keys[kid]
		out.Keys = append(out.Keys, JWK{Kty: "RSA", Alg: "RS256", Use: "sig", Kid: kid,
			N: base64.RawURLEncoding.EncodeToString(pub.N.Bytes()),
			E: base64.RawURLEncoding.EncodeToString(big.NewInt(int64(pub.E)).Bytes())})
	}
	return json.Marshal(out)
}
