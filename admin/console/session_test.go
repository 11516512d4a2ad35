package console

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A session is valid until its expiry, only under the key of the token that
// issued it, and only as issued; its CSRF token is its own.
func TestSessions(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 2, 15, 4, 5, 0, time.UTC)
	s := newSessions("token-a", time.Hour)
	s.now = func() time.Time { return now }
	v, exp := s.issue()
	require.Equal(t, now.Add(time.Hour), exp)
	require.True(t, s.valid(v))
	w, _ := s.issue()
	require.NotEqual(t, v, w, "each login gets its own session")
	require.NotEqual(t, s.csrf(v), s.csrf(w), "and its own CSRF token")

	// Any instance with the same token accepts it: nothing is stored.
	other := newSessions("token-a", time.Hour)
	other.now = s.now
	require.True(t, other.valid(v))
	require.Equal(t, s.csrf(v), other.csrf(v))
	// A new token ends every session.
	rotated := newSessions("token-b", time.Hour)
	rotated.now = s.now
	require.False(t, rotated.valid(v))

	now = exp.Add(-time.Second)
	require.True(t, s.valid(v))
	now = exp
	require.False(t, s.valid(v), "expired")
	now = exp.Add(-time.Hour)

	parts := strings.Split(v, ".")
	for name, bad := range map[string]string{
		"empty":         "",
		"no mac":        strings.Join(parts[:3], "."),
		"later expiry":  parts[0] + ".9999999999." + parts[2] + "." + parts[3],
		"other nonce":   parts[0] + "." + parts[1] + ".AAAAAAAAAAAAAAAAAAAAAA." + parts[3],
		"other version": "v2." + strings.Join(parts[1:], "."),
		"the csrf":      s.csrf(v),
		"the token":     "token-a",
		"extra part":    v + ".x",
	} {
		require.False(t, s.valid(bad), name)
	}

	require.True(t, s.tokenOK("token-a"))
	for _, bad := range []string{"", "token-", "token-a ", "token-b", "TOKEN-A"} {
		require.False(t, s.tokenOK(bad), bad)
	}
}

func TestLocalPath(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"/admin/ui/":                    "/admin/ui/",
		"/admin/ui/events?state=dead":   "/admin/ui/events?state=dead",
		"/admin/ui/events/a%2Fb/c":      "/admin/ui/events/a%2Fb/c",
		"":                              "",
		"/admin/ui":                     "",
		"/admin/dead":                   "",
		"//evil.example/admin/ui/":      "",
		"https://evil.example/admin/ui": "",
		"/admin/ui/\\evil":              "",
		"/admin/ui/x\r\nSet-Cookie: a":  "",
		"javascript:alert(1)":           "",
		// Dot segments (also escaped) would take the browser out of the
		// console; so would a prefix that is only one once unescaped.
		"/admin/ui/../../evil":              "",
		"/admin/ui/./x":                     "",
		"/admin/ui/%2e%2E/%2e%2e/evil":      "",
		"/admin/ui/x/..":                    "",
		"/%61dmin/ui/x":                     "",
		"/admin%2Fui/x":                     "",
		"/admin/ui/event?id=..&source=shop": "/admin/ui/event?id=..&source=shop",
		"/admin/ui/events/shop/..x":         "/admin/ui/events/shop/..x",
	} {
		require.Equal(t, want, localPath(in), in)
	}
}

func TestNiceCeilAndSeconds(t *testing.T) {
	t.Parallel()
	for n, want := range map[int]int{0: 1, 1: 1, 2: 2, 3: 5, 7: 10, 10: 10, 11: 20, 99: 100, 101: 200, 480: 500} {
		require.Equal(t, want, niceCeil(n), n)
	}
	for s, want := range map[float64]string{0: "0 s", -3: "0 s", 42.4: "42 s", 185: "3 min 5 s", 7800: "2 h 10 min"} {
		require.Equal(t, want, seconds(s), s)
	}
}

func TestParseWhen(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 2, 15, 4, 5, 0, time.UTC)
	for in, want := range map[string]time.Time{
		"2026-01-02 10:49:46 UTC":   time.Date(2026, 1, 2, 10, 49, 46, 0, time.UTC), // as a time's hover title says it
		"2026-01-02 10:49 utc":      time.Date(2026, 1, 2, 10, 49, 0, 0, time.UTC),
		"2026-01-02T10:49:00+05:30": time.Date(2026, 1, 2, 5, 19, 0, 0, time.UTC), // as the script sends a local time
		"1h":                        now.Add(-time.Hour),
		"2026-01-02":                time.Date(2026, 1, 2, 0, 0, 0, 0, time.UTC),
	} {
		got, err := parseWhen("since", in, now)
		require.NoError(t, err, in)
		require.True(t, want.Equal(got), "%s: %v", in, got)
	}
	for _, bad := range []string{"2026-01-02 10:49:46 EST", "yesterday", " UTC"} {
		_, err := parseWhen("since", bad, now)
		require.Error(t, err, bad)
	}
}

func TestEventURL(t *testing.T) {
	t.Parallel()
	for in, want := range map[[2]string]string{
		{"shop", "evt_1"}:  "/admin/ui/events/shop/evt_1",
		{"shop", "a/b c"}:  "/admin/ui/events/shop/a%2Fb%20c",
		{"shop", ".."}:     "/admin/ui/event?id=..&source=shop",
		{"shop", "."}:      "/admin/ui/event?id=.&source=shop",
		{"shop", "..."}:    "/admin/ui/events/shop/...",
		{"shop", "%2e%2E"}: "/admin/ui/events/shop/%252e%252E",
	} {
		require.Equal(t, want, eventURL(in[0], in[1]), in)
	}
}
