package config

import (
	"strings"
	"testing"
	"time"
)

// FuzzParseDuration checks that parseDuration never panics and accepts
// exactly a Go duration (with time.ParseDuration's value) or a decimal
// number of days (24 times the same number read as hours), never a value
// with surrounding spaces or trailing garbage ("5xd").
func FuzzParseDuration(f *testing.F) {
	for _, s := range []string{
		"30s", "5m", "720h", "1h30m", "30d", "1.5d", "-2d", "+.5d", "5.d", "5xd", "5d ", " 5d", "1e3d",
		"d", ".d", "9999999999999d", "106751d", "106752d", "-106751.99d", "1h1d", "0", "",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, ok := parseDuration(s)
		if !ok {
			if v != 0 {
				t.Fatalf("parseDuration(%q) refused it but gave %v", s, v)
			}
			if _, err := time.ParseDuration(s); err == nil && !daysRE.MatchString(s) {
				t.Fatalf("parseDuration(%q) refused a Go duration", s)
			}
			return
		}
		if strings.TrimSpace(s) != s {
			t.Fatalf("parseDuration(%q) accepted surrounding spaces", s)
		}
		if !daysRE.MatchString(s) {
			g, err := time.ParseDuration(s)
			if err != nil || g != v {
				t.Fatalf("parseDuration(%q) = %v; time.ParseDuration gives %v, %v", s, v, g, err)
			}
			return
		}
		h, err := time.ParseDuration(strings.TrimSuffix(s, "d") + "h")
		if err != nil || v != 24*h {
			t.Fatalf("parseDuration(%q) = %v, not 24 × %v (%v)", s, v, h, err)
		}
	})
}
