package console

import (
	"strings"
	"testing"
	"time"

	"github.com/hookline/hookline/jobs"
)

// FuzzParseWhen checks that a time typed into a filter never panics and,
// when accepted, is a time Postgres and the page can show (years 0 to
// 9999): an overlong "ago" is refused, not wrapped around.
func FuzzParseWhen(f *testing.F) {
	for _, s := range []string{"", "15m", "1h", "7d", "1.5d", "2026-01-02", "2026-01-02 15:04", "2026-01-02T15:04:05Z UTC",
		"1e300d", "Infd", "NaNd", "-1d", "106751d", "106752d", "9999999999h", "0000-01-01", "9999-12-31T23:59:59.999999999Z", "x UTC"} {
		f.Add(s)
	}
	now := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, v string) {
		got, err := parseWhen("since", v, now)
		if err != nil {
			return
		}
		if v == "" {
			if !got.IsZero() {
				t.Fatalf("parseWhen(\"\") = %v, not the zero time", got)
			}
			return
		}
		if y := got.Year(); y < 0 || y > 9999 {
			t.Fatalf("parseWhen(%q) = %v, outside years 0-9999", v, got)
		}
		ago := strings.HasSuffix(strings.TrimSuffix(strings.TrimSuffix(v, " UTC"), " utc"), "d")
		if _, err := time.ParseDuration(v); err == nil {
			ago = true
		}
		if ago && got.After(now) {
			t.Fatalf("parseWhen(%q) = %v: a time ago after now (%v)", v, got, now)
		}
	})
}

// FuzzParseDeadCursor checks that the dead-set page's cursor parser never
// panics, gives only positive item ids, and reads back what deadCursor
// writes for what it accepts.
func FuzzParseDeadCursor(f *testing.F) {
	f.Add(deadCursor(jobs.DeadKey{DeadAt: time.UnixMicro(1764504000123456), ID: 42}))
	for _, s := range []string{"", "ZDE", "ZDEuMS4w", "ZDEuLTEuMQ", "ZDEuMS4x", "!!"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		k, err := parseDeadCursor(s)
		if err != nil {
			return
		}
		if k.ID <= 0 {
			t.Fatalf("parseDeadCursor(%q) gave item id %d", s, k.ID)
		}
		again, err := parseDeadCursor(deadCursor(*k))
		if err != nil || again.ID != k.ID || !again.DeadAt.Equal(k.DeadAt) {
			t.Fatalf("parseDeadCursor(%q) = %+v, whose cursor reads back as %+v, %v", s, k, again, err)
		}
	})
}
