package jobs

import (
	"strconv"
	"strings"
	"testing"
	"time"
)

// FuzzRetryAfter checks that a destination's Retry-After, whatever it
// holds, never panics and asks for a wait between none and maxRetryAfter:
// whole seconds as given (capped), a date relative to now, nothing else.
func FuzzRetryAfter(f *testing.F) {
	for _, s := range []string{"", "0", "1", "120", " 7 ", "-5", "+3", "1.5", "99999999999999999999", "9223372036854775807",
		"Wed, 21 Oct 2015 07:28:00 GMT", "Fri, 31 Dec 9999 23:59:59 GMT", "Monday, 02-Jan-06 15:04:05 MST", "soon", "\x00"} {
		f.Add(s)
	}
	now := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, v string) {
		d := retryAfter(v, now)
		if d < 0 || d > maxRetryAfter {
			t.Fatalf("retryAfter(%q) = %v, outside [0, %v]", v, d, maxRetryAfter)
		}
		if n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64); err == nil {
			want := time.Duration(0)
			if n > 0 {
				want = min(time.Duration(n)*time.Second, maxRetryAfter)
				if n > int64(maxRetryAfter/time.Second) {
					want = maxRetryAfter
				}
			}
			if d != want {
				t.Fatalf("retryAfter(%q) = %v, want %v", v, d, want)
			}
		}
	})
}

// Retry-After in both of its forms: whole seconds (a number too large for
// int64 is a long wait, capped, not "unreadable"), an HTTP date in the
// future or the past; garbage is no wait at all.
func TestRetryAfterForms(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	for v, want := range map[string]time.Duration{
		"5":                             5 * time.Second,
		"99999999999999999999":          maxRetryAfter,
		"+99999999999999999999":         maxRetryAfter,
		"-99999999999999999999":         0,
		"Wed, 02 Dec 2026 12:00:20 GMT": 20 * time.Second,
		"Wed, 02 Dec 2026 11:00:00 GMT": 0,
		"Fri, 31 Dec 9999 23:59:59 GMT": maxRetryAfter,
		"soon":                          0,
		"2.5":                           0,
	} {
		if got := retryAfter(v, now); got != want {
			t.Errorf("retryAfter(%q) = %v, want %v", v, got, want)
		}
	}
}
