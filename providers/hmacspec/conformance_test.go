package hmacspec_test

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookline/hookline/providers"
	"github.com/hookline/hookline/providers/hmacspec"
	"github.com/hookline/hookline/providers/providertest"
)

// secrets returns two valid secrets for s.
func secrets(s *hmacspec.Spec) []string {
	if s.Mode == hmacspec.Basic {
		return []string{"hookline:" + s.Name + "-one", "hookline:" + s.Name + "-two"}
	}
	return []string{s.Name + "_secret_one", s.Name + "_secret_two"}
}

// multiple reports whether s's header can carry several signatures.
func multiple(s *hmacspec.Spec) bool {
	return s.Mode == hmacspec.MAC && (s.Layout == hmacspec.List || s.Layout == hmacspec.Pairs || s.Layout == hmacspec.Leading)
}

// merge appends the signatures of b's header to a's, in s's layout.
func merge(s *hmacspec.Spec) func(a, b http.Header) {
	return func(a, b http.Header) {
		theirs := b.Get(s.Header)
		switch s.Layout {
		case hmacspec.Leading:
			_, sigs, _ := strings.Cut(theirs, ",")
			a.Set(s.Header, a.Get(s.Header)+","+sigs)
		case hmacspec.Pairs:
			var sigs []string
			for _, f := range strings.Split(theirs, ",") {
				if k, _, _ := strings.Cut(f, "="); k != s.TimestampKey {
					sigs = append(sigs, f)
				}
			}
			a.Set(s.Header, a.Get(s.Header)+",unknown=zz,"+strings.Join(sigs, ","))
		default:
			a.Set(s.Header, a.Get(s.Header)+","+theirs)
		}
	}
}

// harness drives s through the conformance suite under its registered name.
func harness(s *hmacspec.Spec) providertest.Harness {
	h := providertest.Harness{
		Provider: s.Name,
		Secrets:  secrets(s),
		Delivery: func(id string) *providers.Request { return s.Sample(id, "") },
		WantID:   func(id string) string { return s.SampleID(id, "") },
		Features: providertest.Features{
			BodyNotSigned:      s.Mode != hmacspec.MAC,
			MultipleSignatures: multiple(s),
		},
	}
	if s.EventType != "" {
		h.WantType = s.Example.Type
	}
	if s.EventTime != "" {
		h.Features.Timestamp = false
	}
	if s.Mode == hmacspec.MAC && s.Unit != hmacspec.Opaque && (s.TimestampHeader != "" || s.TimestampKey != "" || s.Layout == hmacspec.Leading) {
		h.Features.Timestamp = true
		if s.Tolerance == 0 {
			h.Tolerance = 5 * time.Minute // the check a source opts in to
		}
	}
	if h.MultipleSignatures {
		h.MergeSignatures = merge(s)
	}
	return h
}

// TestConformance runs providertest over every entry of the table, each
// under its registered name.
func TestConformance(t *testing.T) {
	t.Parallel()
	for _, s := range hmacspec.Specs {
		t.Run(s.Name, func(t *testing.T) {
			t.Parallel()
			providertest.Run(t, harness(s))
		})
	}
}

// TestContentKeys: every entry whose default id is not signed is a
// providers.ContentKeyer, and a replay under a fresh id is a duplicate.
func TestContentKeys(t *testing.T) {
	t.Parallel()
	for _, s := range hmacspec.Specs {
		h := harness(s)
		p := h.Build(t, h.Secrets[0])
		d := p.(providers.Describer).Describe()
		_, isKeyer := p.(providers.ContentKeyer)
		if d.IDSigned || s.Mode != hmacspec.MAC {
			require.False(t, isKeyer, s.Name)
			continue
		}
		idHeader, ok := strings.CutPrefix(s.EventID, "header:")
		require.True(t, ok, "%s: an unsigned id comes from a header", s.Name)
		t.Run(s.Name, func(t *testing.T) {
			other := s.Sample("evt_other", "")
			other.Body = append(other.Body, ' ')
			providertest.ContentKeyReplay(t, h, func(r *providers.Request) { r.Header.Set(idHeader, "fresh-id") }, other)
		})
	}
}

// TestTable: every entry is valid, registered, described as the table says,
// and its example resolves to the id and type the table promises.
func TestTable(t *testing.T) {
	t.Parallel()
	seen := map[string]bool{}
	for _, s := range hmacspec.Specs {
		require.NoError(t, s.Validate())
		require.False(t, seen[s.Name], "duplicate %s", s.Name)
		seen[s.Name] = true
		require.NotEmpty(t, s.Docs, s.Name)
		require.NotEmpty(t, s.Retries, s.Name)
		require.NotEmpty(t, s.Title, s.Name)
		_, ok := providers.Lookup(s.Name)
		require.True(t, ok, s.Name)
		got, ok := hmacspec.Lookup(s.Name)
		require.True(t, ok)
		require.Same(t, s, got)

		p, err := providers.New(s.Name, providers.Config{Secrets: secrets(s)})
		require.NoError(t, err)
		d := p.(providers.Describer).Describe()
		require.Equal(t, s.EventID, d.DefaultEventID)
		require.Equal(t, s.Header, d.Headers[0])
		ev, err := p.Resolve(s.Sample("evt_table", "custom.type"))
		require.NoError(t, err, s.Name)
		require.Equal(t, s.SampleID("evt_table", "custom.type"), ev.ID, s.Name)
		if s.EventType != "" && !strings.HasPrefix(s.EventType, "header:") || strings.Contains(strings.Join(s.Example.Headers, " "), "${type}") {
			require.Equal(t, "custom.type", ev.Type, s.Name)
		}
		if s.EventTime != "" {
			require.False(t, ev.Time.IsZero(), "%s: the example's time does not parse", s.Name)
		}
	}
}

// TestConcurrentVerify: one Verifier serves many goroutines (a source's
// deliveries run in parallel); its pooled state is never shared between
// two calls, so each answers for its own delivery.
func TestConcurrentVerify(t *testing.T) {
	t.Parallel()
	for _, s := range hmacspec.Specs {
		if s.Mode != hmacspec.MAC {
			continue
		}
		p, err := hmacspec.New(s, providers.Config{Secrets: secrets(s), Now: func() time.Time { return providertest.Now }})
		require.NoError(t, err)
		good := s.Sample("evt_concurrent", "")
		require.NoError(t, p.(providers.Signer).Sign(good, providertest.Now))
		bad := providertest.Clone(good)
		bad.Body[len(bad.Body)/2] ^= 0x01
		var wg sync.WaitGroup
		errs := make(chan error, 16)
		for i := range 8 {
			wg.Go(func() {
				for range 50 {
					if i%2 == 0 && p.Verify(good) != nil {
						errs <- fmt.Errorf("%s: a signed delivery refused", s.Name)
						return
					}
					if i%2 == 1 && p.Verify(bad) == nil {
						errs <- fmt.Errorf("%s: a changed delivery accepted", s.Name)
						return
					}
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
	}
}
