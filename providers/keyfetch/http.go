package keyfetch

import (
	"fmt"
	"net"
	"net/http"
	"strings"
)

// NoRedirects returns a copy of base (nil: a client with
// DefaultFetchTimeout) that never follows a redirect: an adapter fetches
// keys only from the URLs it allowed, not from wherever they point.
func NoRedirects(base *http.Client) *http.Client {
	if base == nil {
		base = &http.Client{Timeout: DefaultFetchTimeout}
	}
	c := *base
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return &c
}

// IsLoopback reports whether host (without port) is a loopback name or
// address: the only hosts adapters fetch from over plain http (tests, and
// emulators such as LocalStack).
func IsLoopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// HostSet reads a list of hosts (or host:port) an adapter may fetch from,
// lowercased; setting names the list in errors ("paypal.cert_hosts").
func HostSet(setting string, hosts []string) (map[string]bool, error) {
	set := make(map[string]bool, len(hosts))
	for i, h := range hosts {
		h = strings.ToLower(strings.TrimSpace(h))
		if h == "" || strings.ContainsAny(h, "/?#@ ") {
			return nil, fmt.Errorf("%s[%d]: want a host or host:port", setting, i)
		}
		set[h] = true
	}
	return set, nil
}
