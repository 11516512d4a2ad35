package keyfetch

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestHostSet(t *testing.T) {
	set, err := HostSet("acme.cert_hosts", []string{" API.Acme.com ", "localhost:4566"})
	require.NoError(t, err)
	require.Equal(t, map[string]bool{"api.acme.com": true, "localhost:4566": true}, set)
	for _, bad := range []string{"", "https://api.acme.com", "a b", "user@host", "h?x", "h#x"} {
		_, err := HostSet("acme.cert_hosts", []string{"ok.example", bad})
		require.EqualError(t, err, "acme.cert_hosts[1]: want a host or host:port", bad)
	}
}

func TestIsLoopback(t *testing.T) {
	for _, h := range []string{"localhost", "LocalHost", "127.0.0.1", "127.9.9.9", "::1"} {
		require.True(t, IsLoopback(h), h)
	}
	for _, h := range []string{"example.com", "10.0.0.1", "localhost.example.com", "", "::"} {
		require.False(t, IsLoopback(h), h)
	}
}

func TestNoRedirects(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/elsewhere", http.StatusFound)
	}))
	defer srv.Close()
	base := srv.Client()
	c := NoRedirects(base)
	resp, err := c.Get(srv.URL)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusFound, resp.StatusCode)
	require.Nil(t, base.CheckRedirect, "the adapter's client is left as it was")
	require.Equal(t, DefaultFetchTimeout, NoRedirects(nil).Timeout)
	require.Equal(t, time.Duration(0), c.Timeout)
}
