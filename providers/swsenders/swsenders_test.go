package swsenders_test

import (
	"encoding/base64"
	"net/http"
	"strconv"
	"testing"
	"time"

	swlib "github.com/standard-webhooks/standard-webhooks/libraries/go"
	"github.com/stretchr/testify/require"

	"github.com/hookline/hookline/providers"
	"github.com/hookline/hookline/providers/providertest"
	"github.com/hookline/hookline/providers/standardwebhooks"
	"github.com/hookline/hookline/providers/swsenders"
)

var _ providers.Signer = (*swsenders.Verifier)(nil)

// secretsOf returns two secrets in the sender's format: `whsec_` + base64,
// or (Polar) the text the sender hands out.
func secretsOf(s *swsenders.Sender) []string {
	if s.RawSecret {
		return []string{"polar_whs_hookline_one", "polar_whs_hookline_two"}
	}
	return []string{
		"whsec_" + base64.StdEncoding.EncodeToString([]byte(s.Name+" secret one")),
		"whsec_" + base64.StdEncoding.EncodeToString([]byte(s.Name+" secret two")),
	}
}

// libSecret is the secret the reference library takes for one of ours.
func libSecret(s *swsenders.Sender, secret string) string {
	if s.RawSecret {
		return "whsec_" + base64.StdEncoding.EncodeToString([]byte(secret))
	}
	return secret
}

func harness(s *swsenders.Sender) providertest.Harness {
	return providertest.Harness{
		Provider: s.Name,
		Secrets:  secretsOf(s),
		Delivery: func(id string) *providers.Request { return s.Sample(id, "") },
		WantType: s.ExampleType,
		MergeSignatures: func(a, b http.Header) {
			a.Set(standardwebhooks.HeaderSignature, a.Get(standardwebhooks.HeaderSignature)+" v2,c29tZXRoaW5n "+b.Get(standardwebhooks.HeaderSignature))
		},
		Features: providertest.Features{Timestamp: true, MultipleSignatures: true},
	}
}

// TestConformance runs the suite under every sender's registered name.
func TestConformance(t *testing.T) {
	t.Parallel()
	for _, s := range swsenders.Senders {
		t.Run(s.Name, func(t *testing.T) {
			t.Parallel()
			providertest.Run(t, harness(s))
		})
	}
}

// TestReferenceLibraryOracle: for every sender, the Standard Webhooks
// reference library (github.com/standard-webhooks/standard-webhooks/
// libraries/go) accepts what the adapter signs, and the adapter accepts
// what the library signs, with the secret as the sender hands it out.
func TestReferenceLibraryOracle(t *testing.T) {
	t.Parallel()
	for _, s := range swsenders.Senders {
		t.Run(s.Name, func(t *testing.T) {
			secret := secretsOf(s)[0]
			wh, err := swlib.NewWebhook(libSecret(s, secret))
			require.NoError(t, err)
			now := time.Now()
			p, err := providers.New(s.Name, providers.Config{Secrets: []string{secret}, Now: func() time.Time { return now }})
			require.NoError(t, err)

			req := s.Sample("msg_oracle", "")
			sig, err := wh.Sign("msg_oracle", now, req.Body)
			require.NoError(t, err)
			req.Header.Set(standardwebhooks.HeaderTimestamp, strconv.FormatInt(now.Unix(), 10))
			req.Header.Set(standardwebhooks.HeaderSignature, sig)
			require.NoError(t, p.Verify(req))

			ours := s.Sample("msg_ours", "")
			require.NoError(t, p.(providers.Signer).Sign(ours, now))
			require.NoError(t, wh.Verify(ours.Body, ours.Header))

			ev, err := p.Resolve(ours)
			require.NoError(t, err)
			require.Equal(t, "msg_ours", ev.ID)
			require.Equal(t, s.ExampleType, ev.Type)
			if s.EventTime != "" {
				require.False(t, ev.Time.IsZero(), "the example's time")
			}
		})
	}
}

// TestPolarRawSecret: Polar signs with its secret's text, so a delivery
// signed with the text verifies and one signed with the text's base64
// decoding (what a whsec_ secret would mean) does not.
func TestPolarRawSecret(t *testing.T) {
	t.Parallel()
	s, ok := swsenders.Lookup("polar")
	require.True(t, ok)
	p, err := providers.New("polar", providers.Config{Secrets: []string{"polar_whs_text"}, Now: func() time.Time { return providertest.Now }})
	require.NoError(t, err)
	req := s.Sample("msg_1", "")
	key := []byte("polar_whs_text")
	standardwebhooks.SetHeaders(req.Header, key, "msg_1", providertest.Now, req.Body)
	require.NoError(t, p.Verify(req))
	_, err = providers.New("clerk", providers.Config{Secrets: []string{"not base64!"}})
	require.Error(t, err)
}

func TestDescribe(t *testing.T) {
	t.Parallel()
	for _, s := range swsenders.Senders {
		p, err := providers.New(s.Name, providers.Config{Secrets: secretsOf(s)})
		require.NoError(t, err)
		d := p.(providers.Describer).Describe()
		require.True(t, d.IDSigned)
		require.Equal(t, "header:webhook-id", d.DefaultEventID)
		require.NotEmpty(t, s.Docs)
		require.Equal(t, s, p.(*swsenders.Verifier).Sender())
	}
}
