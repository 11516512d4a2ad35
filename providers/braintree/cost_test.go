package braintree

import (
	"encoding/hex"
	"hash"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hookline/hookline/providers"
)

// countMACs makes every MAC of the package count into the returned counter
// until the test ends. Tests that call it must not run in parallel.
func countMACs(t *testing.T) *atomic.Int64 {
	t.Helper()
	var n atomic.Int64
	orig := newMAC
	newMAC = func(key []byte) hash.Hash { n.Add(1); return orig(key) }
	t.Cleanup(func() { newMAC = orig })
	return &n
}

func costVerifier(t testing.TB) *Verifier {
	t.Helper()
	v, err := New(providers.Config{Secrets: []string{"pub_a:priv_a", "pub_b:priv_b"}})
	require.NoError(t, err)
	return v
}

// costRequest is a signed delivery whose bt_signature holds pairs, joined by "&".
func costRequest(payload string, pairs []string) *providers.Request {
	form := url.Values{PayloadField: {payload}, SignatureField: {strings.Join(pairs, "&")}}
	req := &providers.Request{Body: []byte(form.Encode()), Header: map[string][]string{"Content-Type": {"application/x-www-form-urlencoded"}}}
	return req
}

// wrongPairs returns n pairs naming public key pub, each with a wrong MAC.
func wrongPairs(pub string, n int) []string {
	out := make([]string, n)
	for i := range out {
		sig := strings.Repeat("0", 40-len(strconv.Itoa(i))) + strconv.Itoa(i)
		out[i] = pub + "|" + sig
	}
	return out
}

// TestVerifyCostBounded: whatever bt_signature lists, Verify computes at most
// two MACs per configured key, and none for a value beyond the cap.
func TestVerifyCostBounded(t *testing.T) {
	v := costVerifier(t)
	payload := strings.Repeat("QUJD", 256<<10) // 1 MiB of valid base64
	good := "pub_b|" + hex.EncodeToString(mac(v.keys[1].macKey, []byte(payload), false))
	n := countMACs(t)

	// The cap, every entry naming a configured key with a wrong MAC: two
	// MACs per key (with and without the final newline), not two per pair.
	pairs := append(wrongPairs("pub_a", MaxSignaturePairs/2), wrongPairs("pub_b", MaxSignaturePairs/2)...)
	require.ErrorIs(t, v.Verify(costRequest(payload, pairs)), providers.ErrInvalidSignature)
	require.EqualValues(t, 4, n.Load())

	// The right MAC last among the cap: still at most two MACs per key.
	n.Store(0)
	pairs[len(pairs)-1] = good
	require.NoError(t, v.Verify(costRequest(payload, pairs)))
	require.LessOrEqual(t, n.Load(), int64(4))

	// The right MAC first: one MAC.
	n.Store(0)
	require.NoError(t, v.Verify(costRequest(payload, []string{good})))
	require.EqualValues(t, 1, n.Load())

	// Beyond the cap, even with the right MAC among them: refused before
	// any MAC is computed. ~8000 pairs fill a 1 MiB form.
	for _, count := range []int{MaxSignaturePairs + 1, 8000} {
		n.Store(0)
		many := append(wrongPairs("pub_a", count-1), good)
		err := v.Verify(costRequest("QUJD", many))
		require.ErrorIs(t, err, providers.ErrInvalidSignature, "%d pairs", count)
		require.Contains(t, err.Error(), "more than 16 entries")
		require.Zero(t, n.Load(), "%d pairs", count)
	}

	// Pairs for unknown public keys cost nothing.
	n.Store(0)
	require.ErrorIs(t, v.Verify(costRequest(payload, wrongPairs("pub_other", MaxSignaturePairs))), providers.ErrInvalidSignature)
	require.Zero(t, n.Load())
}

// BenchmarkVerifyManyPairs is the worst delivery a sender can build: a 1 MiB
// payload and bt_signature at the cap, every pair naming a configured key.
func BenchmarkVerifyManyPairs(b *testing.B) {
	v := costVerifier(b)
	payload := strings.Repeat("QUJD", 256<<10)
	req := costRequest(payload, append(wrongPairs("pub_a", MaxSignaturePairs/2), wrongPairs("pub_b", MaxSignaturePairs/2)...))
	b.SetBytes(int64(len(req.Body)))
	for b.Loop() {
		if v.Verify(req) == nil {
			b.Fatal("verified")
		}
	}
}

// BenchmarkVerifyOverCap: bt_signature beyond the cap in a 1 MiB form.
func BenchmarkVerifyOverCap(b *testing.B) {
	v := costVerifier(b)
	req := costRequest(strings.Repeat("QUJD", 1024), wrongPairs("pub_a", 8000))
	b.SetBytes(int64(len(req.Body)))
	for b.Loop() {
		if v.Verify(req) == nil {
			b.Fatal("verified")
		}
	}
}
