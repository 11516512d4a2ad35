package sns_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookline/hookline/providers"
	"github.com/hookline/hookline/providers/sns"
)

// validatorVectors is testdata/validator_vectors.json: messages recorded by
// testdata/validator/gen.mjs with AWS's message validator for Node.js
// (sns-validator), each with the validator's verdict.
type validatorVectors struct {
	Validator struct {
		Package, Version string
	}
	Time        int64
	TopicArn    string
	CertURL     string
	Certificate string
	Vectors     []struct {
		Name, Kind       string
		SignatureVersion string
		Headers          map[string]string
		Body             string
		Valid            bool
		Error            string
		NoFetch          bool
	}
}

// TestValidatorVectors replays every recorded vector through the adapter,
// its certificate served from a test server in place of SNS (the recorded
// SigningCertURL, on SNS's host, is mapped to it), at the time it was
// recorded: hookline's verdict must be the validator's. The validator runs
// with its default host pattern; the source lists the vector's topic, so the
// verdict is the signature's. Where the validator refused a certificate URL
// without fetching it, hookline must not fetch it either.
func TestValidatorVectors(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile(filepath.Join("testdata", "validator_vectors.json"))
	require.NoError(t, err)
	var vv validatorVectors
	require.NoError(t, json.Unmarshal(raw, &vv))
	require.Equal(t, "sns-validator", vv.Validator.Package)
	require.NotEmpty(t, vv.Validator.Version)
	require.NotEmpty(t, vv.Vectors)

	certURL, err := url.Parse(vv.CertURL)
	require.NoError(t, err)
	var fetches atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fetches.Add(1)
		if r.URL.Path != certURL.Path {
			http.NotFound(w, r)
			return
		}
		_, _ = w.Write([]byte(vv.Certificate))
	}))
	t.Cleanup(srv.Close)
	to, _ := url.Parse(srv.URL)
	at := time.Unix(vv.Time, 0)

	kinds := map[string]int{}
	for _, vec := range vv.Vectors {
		kinds[vec.Kind]++
		t.Run(vec.Name, func(t *testing.T) {
			secrets := []string{vv.TopicArn}
			if m, err := sns.ParseMessage([]byte(vec.Body)); err == nil && sns.ValidTopicArn(m["TopicArn"]) && m["TopicArn"] != vv.TopicArn {
				secrets = append(secrets, m["TopicArn"])
			}
			// A fresh adapter per vector: each fetches (or not) on its own.
			v, err := sns.New(providers.Config{Source: "validator", Secrets: secrets, Now: func() time.Time { return at },
				HTTPClient: &http.Client{Transport: awsTransport{to: to}}})
			require.NoError(t, err)
			req := &providers.Request{Body: []byte(vec.Body), Header: http.Header{}}
			for k, val := range vec.Headers {
				req.Header.Set(k, val)
			}
			before := fetches.Load()
			err = v.Verify(req)
			require.Equal(t, vec.Valid, err == nil, "validator: valid=%v %q; hookline: %v", vec.Valid, vec.Error, err)
			if err != nil {
				require.True(t, providers.IsSignatureError(err), "%v", err)
				require.NotErrorIs(t, err, providers.ErrUnavailable)
			}
			if vec.NoFetch {
				require.Equal(t, before, fetches.Load(), "the validator refused this URL without fetching it")
			}
			if vec.Valid {
				ev, err := v.Resolve(req)
				require.NoError(t, err)
				m, _ := sns.ParseMessage(req.Body)
				require.Equal(t, providers.Event{ID: m["MessageId"], Type: m["Type"], Time: ev.Time}, ev)
				require.True(t, ev.Time.Equal(at), "the message's Timestamp is the recording time")
			}
		})
	}
	// Every kind the generator writes is there, genuine SignatureVersion 1
	// and 2 messages among them.
	for _, k := range []string{"genuine", "tampered", "unsigned-field", "bad-cert-url", "unknown-cert"} {
		require.Positive(t, kinds[k], k)
	}
	versions := map[string]bool{}
	for _, vec := range vv.Vectors {
		if vec.Kind == "genuine" {
			require.True(t, vec.Valid)
			versions[vec.SignatureVersion] = true
		}
	}
	require.Equal(t, map[string]bool{"1": true, "2": true}, versions)
}
