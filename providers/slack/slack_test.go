package slack_test

import (
	"net/http"
	"testing"
	"time"

	slackgo "github.com/slack-go/slack"
	"github.com/stretchr/testify/require"

	"github.com/hookline/hookline/providers"
	"github.com/hookline/hookline/providers/providertest"
	"github.com/hookline/hookline/providers/slack"
)

var (
	_ providers.Provider  = (*slack.Verifier)(nil)
	_ providers.Signer    = (*slack.Verifier)(nil)
	_ providers.Responder = (*slack.Verifier)(nil)
	_ providers.Describer = (*slack.Verifier)(nil)
)

func sample(id string) *providers.Request {
	return providertest.Request(`{"token":"XXYYZZ","team_id":"T123ABC456","api_app_id":"A123ABC456","event":{"type":"app_mention","user":"U123ABC456","text":"hi","ts":"1515449522.000016","channel":"C123ABC456","event_ts":"1515449522000016"},"type":"event_callback","event_id":"` + id + `","event_time":1764503900}`)
}

func harness() providertest.Harness {
	return providertest.Harness{
		Provider: slack.Name,
		Secrets:  []string{"8f742231b10e8888abcd99yyyzzz85a5", "second signing secret"},
		Delivery: sample,
		WantType: "app_mention",
		WantTime: time.Unix(1764503900, 0),
		Features: providertest.Features{Timestamp: true},
	}
}

func TestConformance(t *testing.T) {
	t.Parallel()
	providertest.Run(t, harness())
}

func build(t *testing.T, now time.Time, secrets ...string) *slack.Verifier {
	t.Helper()
	v, err := slack.New(providers.Config{Secrets: secrets, Now: func() time.Time { return now }})
	require.NoError(t, err)
	return v
}

// TestPublishedVector is the slash-command example of "Verifying requests from Slack".
func TestPublishedVector(t *testing.T) {
	t.Parallel()
	const (
		secret = "8f742231b10e8888abcd99yyyzzz85a5"
		ts     = "1531420618"
		body   = "token=xyzz0WbapA4vBCDEFasx0q6G&team_id=T1DC2JH3J&team_domain=testteamnow&channel_id=G8PSS9T3V&channel_name=foobar&user_id=U2CERLKJA&user_name=roadrunner&command=%2Fwebhook-collect&text=&response_url=https%3A%2F%2Fhooks.slack.com%2Fcommands%2FT1DC2JH3J%2F397700885554%2F96rGlfmibIGlgcZRskXaIFfN&trigger_id=398738663015.47445629121.803a0bc887a14d10d2c447fce8b6703c"
		want   = "v0=a2114d57b48eac39b9ad189dd8316235a7b4a8d21a10bd27519666489c69b503"
	)
	v := build(t, time.Unix(1531420618, 0).Add(time.Minute), secret)
	req := providertest.Request(body, "Content-Type", "application/x-www-form-urlencoded",
		slack.HeaderTimestamp, ts, slack.HeaderSignature, want)
	require.NoError(t, v.Verify(req))

	ours := providertest.Request(body, "Content-Type", "application/x-www-form-urlencoded")
	require.NoError(t, v.Sign(ours, time.Unix(1531420618, 0)))
	require.Equal(t, want, ours.Header.Get(slack.HeaderSignature))
	require.Equal(t, ts, ours.Header.Get(slack.HeaderTimestamp))

	// A form delivery has no default event id.
	_, err := v.Resolve(req)
	require.ErrorIs(t, err, providers.ErrNoEventID)
	_, _, handled := v.Respond(req)
	require.False(t, handled)

	require.ErrorIs(t, build(t, time.Unix(1531420618, 0).Add(6*time.Minute), secret).Verify(req), providers.ErrTimestampTooOld)
	require.ErrorIs(t, build(t, time.Unix(1531420618, 0).Add(-6*time.Minute), secret).Verify(req), providers.ErrTimestampTooNew)
}

// TestSlackGoOracle: slack-go's SecretsVerifier accepts what we sign (it checks
// the real clock, so only fresh timestamps) and rejects what we reject.
func TestSlackGoOracle(t *testing.T) {
	t.Parallel()
	secret := "oracle signing secret"
	v := build(t, time.Now(), secret)
	req := sample("Ev0PV52K21")
	require.NoError(t, v.Sign(req, time.Now()))
	require.NoError(t, v.Verify(req))

	check := func(h http.Header, body []byte) error {
		sv, err := slackgo.NewSecretsVerifier(h, secret)
		if err != nil {
			return err
		}
		if _, err := sv.Write(body); err != nil {
			return err
		}
		return sv.Ensure()
	}
	require.NoError(t, check(req.Header, req.Body))

	tampered := append([]byte{}, req.Body...)
	tampered[10] ^= 1
	require.Error(t, check(req.Header, tampered))
	require.ErrorIs(t, v.Verify(&providers.Request{Body: tampered, Header: req.Header}), providers.ErrInvalidSignature)

	other := build(t, time.Now(), "other secret")
	require.ErrorIs(t, other.Verify(req), providers.ErrInvalidSignature)
}

func TestRespondURLVerification(t *testing.T) {
	t.Parallel()
	v := build(t, providertest.Now, "s")

	req := providertest.Request(`{"token":"Jhj5dZrVaK7ZwHHjRyZWjbDl","challenge":"3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P","type":"url_verification"}`)
	require.NoError(t, v.Sign(req, providertest.Now))
	require.NoError(t, v.Verify(req))
	status, body, handled := v.Respond(req)
	require.True(t, handled)
	require.Equal(t, http.StatusOK, status)
	require.JSONEq(t, `{"challenge":"3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P"}`, string(body))

	// The challenge is re-encoded, not pasted.
	status, body, handled = v.Respond(providertest.Request(`{"type":"url_verification","challenge":"a\"b<\u00e9>"}`))
	require.True(t, handled)
	require.Equal(t, http.StatusOK, status)
	require.JSONEq(t, `{"challenge":"a\"b<é>"}`, string(body))

	for _, b := range []string{string(sample("Ev1").Body), `{"type":"event_callback","challenge":"x"}`, `{"type":["url_verification"]}`, `not json`, ``} {
		_, _, handled := v.Respond(providertest.Request(b))
		require.False(t, handled, b)
	}
}

func TestResolve(t *testing.T) {
	t.Parallel()
	v := build(t, providertest.Now, "s")
	// No inner event: the outer type.
	ev, err := v.Resolve(providertest.Request(`{"type":"app_rate_limited","event_id":"Ev2","event_time":1}`))
	require.NoError(t, err)
	require.Equal(t, providers.Event{ID: "Ev2", Type: "app_rate_limited", Time: time.Unix(1, 0).UTC()}, ev)

	_, err = v.Resolve(providertest.Request(`{"type":"url_verification","challenge":"x"}`))
	require.ErrorIs(t, err, providers.ErrNoEventID)
	_, err = v.Resolve(providertest.Request(`{"event_id":`))
	require.ErrorIs(t, err, providers.ErrMalformed)

	d := v.Describe()
	require.Equal(t, "json:event_id", d.DefaultEventID)
	require.Equal(t, 5*time.Minute, d.DefaultTolerance)
}

func TestVerifyErrors(t *testing.T) {
	t.Parallel()
	v := build(t, providertest.Now, "s")
	req := sample("Ev3")
	require.NoError(t, v.Sign(req, providertest.Now))
	for _, h := range []string{slack.HeaderSignature, slack.HeaderTimestamp} {
		bad := providertest.Clone(req)
		bad.Header.Del(h)
		require.ErrorIs(t, v.Verify(bad), providers.ErrNoSignature, h)
	}
	for _, sig := range []string{"v1=" + req.Header.Get(slack.HeaderSignature)[3:], "V0=" + req.Header.Get(slack.HeaderSignature)[3:], "v0=zz"} {
		bad := providertest.Clone(req)
		bad.Header.Set(slack.HeaderSignature, sig)
		require.ErrorIs(t, v.Verify(bad), providers.ErrInvalidSignature, sig)
	}
	_, err := slack.New(providers.Config{})
	require.Error(t, err)
	_, err = slack.New(providers.Config{Secrets: []string{"s"}, Settings: providertest.DecodeSettings(map[string]any{"token": "x"})})
	require.Error(t, err)
}

func FuzzParseSignature(f *testing.F) {
	f.Add("v0=a2114d57b48eac39b9ad189dd8316235a7b4a8d21a10bd27519666489c69b503")
	f.Add("v0=")
	f.Add("=")
	f.Fuzz(func(t *testing.T, v string) {
		sig, err := slack.ParseSignature(v)
		if err == nil && len(sig) != 32 {
			t.Fatalf("signature of %d bytes accepted from %q", len(sig), v)
		}
		if err != nil && sig != nil {
			t.Fatalf("signature returned with error %v", err)
		}
	})
}
