package reconcile

import (
	"testing"
	"time"
)

// FuzzParseRetryAfter checks that a provider API's Retry-After (or
// RateLimit-Reset), whatever it holds, never panics and never asks for a
// negative wait, nor for more than MaxWait when it is a number of seconds.
func FuzzParseRetryAfter(f *testing.F) {
	for _, s := range []string{"", "0", "3", " 60 ", "-1", "1.5", "99999999999999999999", "9223372036854775807",
		"Wed, 21 Oct 2015 07:28:00 GMT", "Fri, 31 Dec 9999 23:59:59 GMT", "later"} {
		f.Add(s)
	}
	now := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, v string) {
		d, ok := parseRetryAfter(v, now)
		if !ok {
			if d != 0 {
				t.Fatalf("parseRetryAfter(%q) refused it but gave %v", v, d)
			}
			return
		}
		if d < 0 {
			t.Fatalf("parseRetryAfter(%q) = %v, a negative wait", v, d)
		}
		if _, err := time.Parse(time.RFC1123, v); err != nil && d > MaxWait {
			if _, err := time.Parse(time.RFC850, v); err != nil {
				if _, err := time.Parse(time.ANSIC, v); err != nil {
					t.Fatalf("parseRetryAfter(%q) = %v, more than MaxWait (%v) for a number of seconds", v, d, MaxWait)
				}
			}
		}
	})
}
