//go:build !race

// The race detector makes sync.Pool drop values at random, so allocation
// counts are only meaningful without it.

package hmacspec_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookline/hookline/providers"
	"github.com/hookline/hookline/providers/hmacspec"
	"github.com/hookline/hookline/providers/providertest"
)

// TestVerifyAllocatesNothing: verifying a signed delivery of any MAC entry
// allocates nothing (the signatures are decoded into, and the HMACs
// computed with, pooled state), except that a template signing {url}
// writes the request URL out (one allocation) when no url setting names it.
func TestVerifyAllocatesNothing(t *testing.T) {
	for _, s := range hmacspec.Specs {
		if s.Mode != hmacspec.MAC {
			continue
		}
		p, err := hmacspec.New(s, providers.Config{Secrets: secrets(s), Now: func() time.Time { return providertest.Now }})
		require.NoError(t, err)
		req := s.Sample("evt_alloc", "")
		require.NoError(t, p.(providers.Signer).Sign(req, providertest.Now))
		require.NoError(t, p.Verify(req), s.Name)
		want := 0.0
		if strings.Contains(s.Template, hmacspec.PURL) {
			want = 1
		}
		got := testing.AllocsPerRun(100, func() { _ = p.Verify(req) })
		require.LessOrEqual(t, got, want, "%s: allocations per Verify", s.Name)
	}
}
