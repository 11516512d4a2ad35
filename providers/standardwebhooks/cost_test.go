package standardwebhooks

import (
	"crypto/ed25519"
	"encoding/base64"
	"hash"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookline/hookline/providers"
)

// counters counts the HMACs and ed25519 verifications of the package until
// the test ends. Tests that call it must not run in parallel.
type counters struct{ macs, ed atomic.Int64 }

func count(t *testing.T) *counters {
	t.Helper()
	c := &counters{}
	origMAC, origEd := newMAC, verifyEd25519
	newMAC = func(key []byte) hash.Hash { c.macs.Add(1); return origMAC(key) }
	verifyEd25519 = func(pub ed25519.PublicKey, msg, sig []byte) bool { c.ed.Add(1); return origEd(pub, msg, sig) }
	t.Cleanup(func() { newMAC, verifyEd25519 = origMAC, origEd })
	return c
}

var costNow = time.Unix(1764504000, 0)

// costVerifier has two HMAC secrets and two ed25519 public keys.
func costVerifier(t testing.TB) *Verifier {
	t.Helper()
	secrets := []string{
		"whsec_" + base64.StdEncoding.EncodeToString([]byte("cost-secret-one")),
		"whsec_" + base64.StdEncoding.EncodeToString([]byte("cost-secret-two")),
	}
	for i := range 2 {
		seed := make([]byte, ed25519.SeedSize)
		seed[0] = byte(i + 1)
		pub := ed25519.NewKeyFromSeed(seed).Public().(ed25519.PublicKey)
		secrets = append(secrets, PublicKeyPrefix+base64.StdEncoding.EncodeToString(pub))
	}
	v, err := New(providers.Config{Secrets: secrets, Now: func() time.Time { return costNow }})
	require.NoError(t, err)
	return v
}

// entries returns n wrong entries of version, distinct from each other.
func entries(version string, n int) []string {
	size := 32
	if version == VersionEd25519 {
		size = 64
	}
	out := make([]string, n)
	for i := range out {
		b := make([]byte, size)
		copy(b, strconv.Itoa(i))
		out[i] = version + "," + base64.StdEncoding.EncodeToString(b)
	}
	return out
}

func costRequest(body []byte, sigs []string) *providers.Request {
	return &providers.Request{Body: body, Header: http.Header{
		HeaderID:        {"msg_cost"},
		HeaderTimestamp: {strconv.FormatInt(costNow.Unix(), 10)},
		HeaderSignature: {strings.Join(sigs, " ")},
	}}
}

// TestVerifyCostBounded: one HMAC per whsec_ secret whatever the number of v1
// entries, one ed25519 check per (public key, v1a entry) within the cap, and
// nothing at all beyond the cap.
func TestVerifyCostBounded(t *testing.T) {
	v := costVerifier(t)
	body := []byte(strings.Repeat("x", 1<<20))
	good := SignHeaders(v.keys[1].hmac, "msg_cost", costNow, body)
	c := count(t)

	// The cap, all v1: one HMAC per secret, not one per entry.
	require.ErrorIs(t, v.Verify(costRequest(body, entries(VersionHMAC, MaxSignatures))), providers.ErrInvalidSignature)
	require.EqualValues(t, 2, c.macs.Load())
	require.Zero(t, c.ed.Load())

	// The cap, half of each: two HMACs, 2 keys x 8 entries ed25519 checks.
	c.macs.Store(0)
	mixed := append(entries(VersionHMAC, MaxSignatures/2), entries(VersionEd25519, MaxSignatures/2)...)
	require.ErrorIs(t, v.Verify(costRequest(body, mixed)), providers.ErrInvalidSignature)
	require.EqualValues(t, 2, c.macs.Load())
	require.EqualValues(t, 2*MaxSignatures/2, c.ed.Load())

	// A valid v1 last among the cap verifies, still with one HMAC per secret.
	c.macs.Store(0)
	c.ed.Store(0)
	capped := append(entries(VersionHMAC, MaxSignatures-1), good)
	require.NoError(t, v.Verify(costRequest(body, capped)))
	require.EqualValues(t, 2, c.macs.Load())
	require.Zero(t, c.ed.Load())

	// Beyond the cap (thousands of entries, the valid one among them):
	// refused before any signature is checked.
	for _, n := range []int{MaxSignatures + 1, 5000} {
		c.macs.Store(0)
		c.ed.Store(0)
		many := append(entries(VersionEd25519, n-1), good)
		err := v.Verify(costRequest(body, many))
		require.ErrorIs(t, err, providers.ErrInvalidSignature, "%d entries", n)
		require.Zero(t, c.macs.Load(), "%d entries", n)
		require.Zero(t, c.ed.Load(), "%d entries", n)
	}
	// Unknown versions count towards the cap too.
	c.macs.Store(0)
	unknown := append(strings.Fields(strings.Repeat("v2,AAAA ", MaxSignatures)), good)
	require.ErrorIs(t, v.Verify(costRequest(body, unknown)), providers.ErrInvalidSignature)
	require.Zero(t, c.macs.Load())
}

// BenchmarkVerifyWorstCase is the costliest header within the cap (every
// entry a v1a checked against both public keys) over a 1 MiB body.
func BenchmarkVerifyWorstCase(b *testing.B) {
	v := costVerifier(b)
	req := costRequest([]byte(strings.Repeat("x", 1<<20)), entries(VersionEd25519, MaxSignatures))
	b.SetBytes(int64(len(req.Body)))
	for b.Loop() {
		if v.Verify(req) == nil {
			b.Fatal("verified")
		}
	}
}

// BenchmarkVerifyOverCap: 5000 entries, refused while parsing.
func BenchmarkVerifyOverCap(b *testing.B) {
	v := costVerifier(b)
	req := costRequest([]byte(strings.Repeat("x", 1<<20)), entries(VersionEd25519, 5000))
	for b.Loop() {
		if v.Verify(req) == nil {
			b.Fatal("verified")
		}
	}
}
