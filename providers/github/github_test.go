package github_test

import (
	"crypto/hmac"
	"crypto/sha1" //nolint:gosec // the legacy header under test
	"encoding/hex"
	"testing"
	"time"

	gogithub "github.com/google/go-github/v74/github"
	"github.com/stretchr/testify/require"

	"github.com/hookline/hookline/providers"
	"github.com/hookline/hookline/providers/github"
	"github.com/hookline/hookline/providers/providertest"
)

var (
	_ providers.Provider  = (*github.Verifier)(nil)
	_ providers.Signer    = (*github.Verifier)(nil)
	_ providers.Describer = (*github.Verifier)(nil)
)

const body = `{"ref":"refs/heads/main","before":"0000","after":"1111","repository":{"id":1,"full_name":"octo/hello"}}`

func sample(id string) *providers.Request {
	return providertest.Request(body, github.HeaderDelivery, id, github.HeaderEvent, "push")
}

const hookID = "292430182"

func harness() providertest.Harness {
	return providertest.Harness{
		Provider: github.Name,
		Secrets:  []string{"It's a Secret to Everybody", "another secret"},
		// A delivery as GitHub sends it, with the hook id.
		Delivery: func(id string) *providers.Request {
			req := sample(id)
			req.Header.Set(github.HeaderHookID, hookID)
			return req
		},
		// {X-GitHub-Hook-ID}:{X-GitHub-Delivery}; no delivery id, no id.
		WantID: func(id string) string {
			if id == "" {
				return ""
			}
			return hookID + ":" + id
		},
		WantType:  "push",
		Tolerance: time.Minute, // accepted and ignored
	}
}

func TestConformance(t *testing.T) {
	t.Parallel()
	providertest.Run(t, harness())
}

// TestConformanceLegacy runs the suite on deliveries that carry only the
// legacy X-Hub-Signature (GitHub Enterprise Server before 3.0), the
// adapter's fallback header.
func TestConformanceLegacy(t *testing.T) {
	t.Parallel()
	h := harness()
	h.SignatureHeaders = []string{github.HeaderSignature}
	h.Sign = func(_ testing.TB, secret string, req *providers.Request, _ time.Time) {
		req.Header.Set(github.HeaderSignature, "sha1="+sha1Hex(secret, req.Body))
	}
	providertest.Run(t, h)
}

func build(t *testing.T, secrets ...string) *github.Verifier {
	t.Helper()
	v, err := github.New(providers.Config{Secrets: secrets})
	require.NoError(t, err)
	return v
}

// TestPublishedVector is the example from GitHub's "Validating webhook deliveries".
func TestPublishedVector(t *testing.T) {
	t.Parallel()
	const want = "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"
	v := build(t, "It's a Secret to Everybody")
	req := providertest.Request("Hello, World!")
	require.NoError(t, v.Sign(req, time.Time{}))
	require.Equal(t, want, req.Header.Get(github.HeaderSignature256))
	require.NoError(t, v.Verify(req))
	require.ErrorIs(t, build(t, "It's a secret to everybody").Verify(req), providers.ErrInvalidSignature)
}

// TestGoGitHubOracle checks both directions against go-github's ValidateSignature.
func TestGoGitHubOracle(t *testing.T) {
	t.Parallel()
	secret := "oracle secret"
	v := build(t, secret)

	// We sign, go-github validates.
	req := sample("d1")
	require.NoError(t, v.Sign(req, time.Now()))
	require.NoError(t, gogithub.ValidateSignature(req.Header.Get(github.HeaderSignature256), req.Body, []byte(secret)))

	// go-github validates what we computed independently for sha1 and sha256;
	// we accept both (sha1 only as the fallback).
	for _, sig := range []string{req.Header.Get(github.HeaderSignature256), "sha1=" + sha1Hex(secret, req.Body)} {
		require.NoError(t, gogithub.ValidateSignature(sig, req.Body, []byte(secret)))
	}
	legacy := sample("d1")
	legacy.Header.Set(github.HeaderSignature, "sha1="+sha1Hex(secret, legacy.Body))
	require.NoError(t, v.Verify(legacy))

	// go-github rejects a tampered body, and so do we.
	bad := providertest.Clone(req)
	bad.Body = append(bad.Body, '\n')
	require.Error(t, gogithub.ValidateSignature(bad.Header.Get(github.HeaderSignature256), bad.Body, []byte(secret)))
	require.ErrorIs(t, v.Verify(bad), providers.ErrInvalidSignature)
}

func sha1Hex(secret string, body []byte) string {
	m := hmac.New(sha1.New, []byte(secret))
	m.Write(body)
	return hex.EncodeToString(m.Sum(nil))
}

// TestLegacyOnlyWhenSHA256Absent: a valid SHA-1 signature never rescues a bad
// SHA-256 one, and the legacy header must say sha1=.
func TestLegacyOnlyWhenSHA256Absent(t *testing.T) {
	t.Parallel()
	secret := "s"
	v := build(t, secret)
	req := sample("d2")
	req.Header.Set(github.HeaderSignature256, "sha256="+hex.EncodeToString(make([]byte, 32)))
	req.Header.Set(github.HeaderSignature, "sha1="+sha1Hex(secret, req.Body))
	require.ErrorIs(t, v.Verify(req), providers.ErrInvalidSignature)

	req.Header.Del(github.HeaderSignature256)
	require.NoError(t, v.Verify(req))

	// A sha256 value in the legacy header is not accepted there.
	signed := sample("d2")
	require.NoError(t, v.Sign(signed, time.Time{}))
	moved := sample("d2")
	moved.Header.Set(github.HeaderSignature, signed.Header.Get(github.HeaderSignature256))
	require.ErrorIs(t, v.Verify(moved), providers.ErrInvalidSignature)

	require.ErrorIs(t, v.Verify(sample("d2")), providers.ErrNoSignature)
}

func TestResolveComposite(t *testing.T) {
	t.Parallel()
	v := build(t, "s")
	req := sample("72d3162e-cc78-11e3-81ab-4c9367dc0958")
	req.Header.Set(github.HeaderHookID, "292430182")
	ev, err := v.Resolve(req)
	require.NoError(t, err)
	require.Equal(t, providers.Event{ID: "292430182:72d3162e-cc78-11e3-81ab-4c9367dc0958", Type: "push"}, ev)

	// A hook id without a delivery id is not an id.
	req = sample("")
	req.Header.Set(github.HeaderHookID, "292430182")
	_, err = v.Resolve(req)
	require.ErrorIs(t, err, providers.ErrNoEventID)

	// A delivery id without a hook id is not an id either: keyed on the
	// delivery alone, two hooks' copies of one event would be duplicates.
	for _, hook := range []string{"", " "} {
		req = sample("72d3162e-cc78-11e3-81ab-4c9367dc0958")
		if hook != "" {
			req.Header.Set(github.HeaderHookID, hook)
		}
		_, err = v.Resolve(req)
		require.ErrorIs(t, err, providers.ErrNoEventID)
		require.ErrorContains(t, err, github.HeaderHookID)
	}

	// Form bodies resolve the same way: only headers are read.
	form := sample("d3")
	form.Header.Set(github.HeaderHookID, "7")
	form.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	form.Body = []byte("payload=%7B%7D")
	ev, err = v.Resolve(form)
	require.NoError(t, err)
	require.Equal(t, "7:d3", ev.ID)
}

func TestNew(t *testing.T) {
	t.Parallel()
	_, err := github.New(providers.Config{})
	require.Error(t, err)
	_, err = github.New(providers.Config{Secrets: []string{"s"}, Settings: providertest.DecodeSettings(map[string]any{"secret": "x"})})
	require.Error(t, err)
	d := build(t, "s").Describe()
	require.Equal(t, "{header:X-GitHub-Hook-ID}:{header:X-GitHub-Delivery}", d.DefaultEventID)
	require.Equal(t, []string{github.HeaderSignature256}, d.Headers)
	require.Equal(t, []string{github.HeaderSignature}, d.FallbackHeaders)
	require.Zero(t, d.DefaultTolerance)
}

func FuzzParseSignature(f *testing.F) {
	f.Add("sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17", true)
	f.Add("sha1=0123456789abcdef0123456789abcdef01234567", false)
	f.Add("sha256=", true)
	f.Add("=", false)
	f.Fuzz(func(t *testing.T, v string, is256 bool) {
		algo, size := "sha1", 20
		if is256 {
			algo, size = "sha256", 32
		}
		sig, err := github.ParseSignature(v, algo)
		if err == nil && len(sig) != size {
			t.Fatalf("%s signature of %d bytes accepted from %q", algo, len(sig), v)
		}
		if err != nil && sig != nil {
			t.Fatalf("signature returned with error %v", err)
		}
	})
}

// TestContentKey: neither id header is signed; a replay under fresh ones has
// the original's content key, another body another key.
func TestContentKey(t *testing.T) {
	t.Parallel()
	h := harness()
	other := providertest.Request(`{"ref":"refs/heads/dev"}`, github.HeaderDelivery, "evt_other", github.HeaderHookID, hookID, github.HeaderEvent, "push")
	providertest.ContentKeyReplay(t, h, func(r *providers.Request) {
		r.Header.Set(github.HeaderDelivery, "fresh-delivery-guid")
		r.Header.Set(github.HeaderHookID, "1")
	}, other)
	require.False(t, build(t, "s").Describe().IDSigned)
}
