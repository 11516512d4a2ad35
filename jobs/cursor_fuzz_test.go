package jobs_test

import (
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/hookline/hookline/jobs"
)

// FuzzParseEventCursor checks that the events search's cursor parser never
// panics, accepts only keys Postgres can compare (non-empty valid UTF-8
// without NUL), and that what it accepts is what Cursor writes back.
func FuzzParseEventCursor(f *testing.F) {
	f.Add(jobs.EventKey{ReceivedAt: time.UnixMicro(1764504000123456), Source: "stripe", EventID: "evt_1"}.Cursor())
	f.Add(jobs.EventKey{ReceivedAt: time.UnixMicro(-1), Source: "s\u00e9", EventID: "\"quoted\""}.Cursor())
	for _, s := range []string{"", "e1", "WyJlMSJd", "WyJlMSIsMSwiIiwiIl0", "WyJlMSIsMS41LCJzIiwiZSJd", "!!!"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		k, err := jobs.ParseEventCursor(s)
		if err != nil {
			if k != nil {
				t.Fatalf("ParseEventCursor(%q) failed but gave a key", s)
			}
			return
		}
		for _, v := range []string{k.Source, k.EventID} {
			if v == "" || !utf8.ValidString(v) || strings.ContainsRune(v, 0) {
				t.Fatalf("ParseEventCursor(%q) accepted %q, which Postgres cannot compare", s, v)
			}
		}
		again, err := jobs.ParseEventCursor(k.Cursor())
		if err != nil || !again.ReceivedAt.Equal(k.ReceivedAt) || again.Source != k.Source || again.EventID != k.EventID {
			t.Fatalf("ParseEventCursor(%q) = %+v, whose cursor reads back as %+v, %v", s, k, again, err)
		}
	})
}
