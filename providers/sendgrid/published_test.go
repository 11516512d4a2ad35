package sendgrid_test

import (
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookline/hookline/providers"
	"github.com/hookline/hookline/providers/providertest"
	"github.com/hookline/hookline/providers/sendgrid"
)

// The vectors of the official Node SDK's own test, src/eventwebhook.spec.js
// of @sendgrid/eventwebhook 8.0.0 (as published on npm; gitHead
// b1c831ff33b848e09f9afc644426fd22615f51bd of sendgrid/sendgrid-nodejs):
// real SendGrid deliveries, signed by SendGrid with the key pair whose public
// half is given. The payloads are the spec's JSON.stringify of its events,
// written as the spec writes them (CRLF after each event). Only the data is
// copied.
const (
	publishedKey  = "MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAE83T4O/n84iotIvIW4mdBgQ/7dAfSmpqIM8kF9mN1flpVKS3GRqe62gw+2fNNRaINXvVpiglSI8eNEc6wEA3F+g=="
	publishedSig  = "MEUCIGHQVtGj+Y3LkG9fLcxf3qfI10QysgDWmMOVmxG0u6ZUAiEAyBiXDWzM+uOe5W0JuG+luQAbPIqHh89M15TluLtEZtM="
	publishedTS   = "1600112502"
	publishedBody = `[{"email":"hello@world.com","event":"dropped","reason":"Bounced Address","sg_event_id":"ZHJvcC0xMDk5NDkxOS1MUnpYbF9OSFN0T0doUTRrb2ZTbV9BLTA","sg_message_id":"LRzXl_NHStOGhQ4kofSm_A.filterdrecv-p3mdw1-756b745b58-kmzbl-18-5F5FC76C-9.0","smtp-id":"<LRzXl_NHStOGhQ4kofSm_A@ismtpd0039p1iad1.sendgrid.net>","timestamp":1600112492}]` + "\r\n"

	publishedMultiKey  = "MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAEQ4LIFtWztlsF7skFqOncjD1lun4H5w8XOhyOArHW9RcIx/FfEzx6cikC/yPfUvwaX/JScE7Fc9CJD2afQ9Ok3Q=="
	publishedMultiSig  = "MEYCIQC/I4o6vCgqRYrTljjoVWB/GRWNtxeePlLMHr3x9ETeRQIhAIpV+03nREPTTHWSW0wIOA0EoMPdcNgXa70yCaqDJlu5"
	publishedMultiTS   = "1619651159"
	publishedMultiBody = `[{"email":"invalid@gmail.com","event":"processed","send_at":0,"sg_event_id":"cHJvY2Vzc2VkLTE5OTQyMTEyLXFOd0JMZ1BRUWpXNkRKdktRd1NBYnctMA","sg_message_id":"qNwBLgPQQjW6DJvKQwSAbw.filterdrecv-canary-547b64655b-cw6zx-1-6089EA4A-56.0","smtp-id":"<qNwBLgPQQjW6DJvKQwSAbw@ismtpd0178p1mdw1.sendgrid.net>","timestamp":1619651146},` + "\r\n" +
		`{"email":"invalid@gmail.com","event":"bounce","ip":"167.89.101.76","reason":"552 5.2.2 The email account that you tried to reach is over quota and inactive. Please direct the recipient to https://support.google.com/mail/?p=OverQuotaPerm c17si1130468pgv.34 - gsmtp","sg_event_id":"Ym91bmNlLTAtMTk5NDIxMTItcU53QkxnUFFRalc2REp2S1F3U0Fidy0w","sg_message_id":"qNwBLgPQQjW6DJvKQwSAbw.filterdrecv-canary-547b64655b-cw6zx-1-6089EA4A-56.0","smtp-id":"<qNwBLgPQQjW6DJvKQwSAbw@ismtpd0178p1mdw1.sendgrid.net>","status":"5.2.2","timestamp":1619651147,"tls":1,"type":"blocked"}]` + "\r\n"

	// publishedOtherKey is the spec's "invalid key" (another P-256 key).
	publishedOtherKey = "MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAEqTxd43gyp8IOEto2LdIfjRQrIbsd4SXZkLW6jDutdhXSJCWHw8REntlo7aNDthvj+y7GjUuFDb/R1NGe1OPzpA=="
	// publishedBadSig is the spec's "bad signature".
	publishedBadSig = "MEUCIQCtIHJeH93Y+qpYeWrySphQgpNGNr/U+UyUlBkU6n7RAwIgJTz2C+8a8xonZGi6BpSzoQsbVRamr2nlxFDWYNH3j/0="
)

func TestPublishedVectors(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name, key, sig, ts, body string
		ids, types               []string
	}{
		{"single", publishedKey, publishedSig, publishedTS, publishedBody,
			[]string{"ZHJvcC0xMDk5NDkxOS1MUnpYbF9OSFN0T0doUTRrb2ZTbV9BLTA"}, []string{"dropped"}},
		{"multiple", publishedMultiKey, publishedMultiSig, publishedMultiTS, publishedMultiBody,
			[]string{"cHJvY2Vzc2VkLTE5OTQyMTEyLXFOd0JMZ1BRUWpXNkRKdktRd1NBYnctMA", "Ym91bmNlLTAtMTk5NDIxMTItcU53QkxnUFFRalc2REp2S1F3U0Fidy0w"}, []string{"processed", "bounce"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			n, err := strconv.ParseInt(c.ts, 10, 64)
			require.NoError(t, err)
			at := time.Unix(n, 0)
			build := func(key string, now time.Time) *sendgrid.Verifier {
				v, err := sendgrid.New(providers.Config{Secrets: []string{key}, Now: func() time.Time { return now }})
				require.NoError(t, err)
				return v
			}
			req := func(body, sig, ts string) *providers.Request {
				return providertest.Request(body, sendgrid.HeaderSignature, sig, sendgrid.HeaderTimestamp, ts)
			}

			v := build(c.key, at.Add(30*time.Second))
			genuine := req(c.body, c.sig, c.ts)
			require.NoError(t, v.Verify(genuine), "SendGrid's published delivery must verify")
			items, err := v.Split(genuine)
			require.NoError(t, err)
			require.Len(t, items, len(c.ids))
			for i, it := range items {
				require.Equal(t, c.ids[i], it.Event.ID)
				require.Equal(t, c.types[i], it.Event.Type)
				require.Equal(t, it.Body, genuine.Body[it.Offset:it.Offset+len(it.Body)])
			}

			// The spec's rejections: another key, another payload, another
			// signature, a timestamp that is not one.
			require.ErrorIs(t, build(publishedOtherKey, at).Verify(req(c.body, c.sig, c.ts)), providers.ErrInvalidSignature)
			require.ErrorIs(t, v.Verify(req("payload", c.sig, c.ts)), providers.ErrInvalidSignature)
			require.ErrorIs(t, v.Verify(req(c.body, publishedBadSig, c.ts)), providers.ErrInvalidSignature)
			require.ErrorIs(t, v.Verify(req(c.body, c.sig, "timestamp")), providers.ErrInvalidSignature)
			// And the body without its trailing CRLF is another body.
			require.ErrorIs(t, v.Verify(req(c.body[:len(c.body)-2], c.sig, c.ts)), providers.ErrInvalidSignature)

			// Today, the same delivery verifies (no default window), and is
			// stale under a source's 24h tolerance.
			require.NoError(t, build(c.key, providertest.Now).Verify(req(c.body, c.sig, c.ts)))
			windowed, err := sendgrid.New(providers.Config{Secrets: []string{c.key}, Tolerance: 24 * time.Hour,
				Now: func() time.Time { return providertest.Now }})
			require.NoError(t, err)
			require.ErrorIs(t, windowed.Verify(req(c.body, c.sig, c.ts)), providers.ErrTimestampTooOld)
		})
	}
}
