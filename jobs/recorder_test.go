package jobs_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// orderRecorder is a destination for ordered events that records, per
// ordering key (Hookline-Order-Key), the number of each event forwarded,
// one per attempt in the order the attempts arrived, and counts the
// forwards of a key that began while another of the same key was in
// progress.
type orderRecorder struct {
	URL string

	mu       sync.Mutex
	got      map[string][]int
	inFlight map[string]bool
	attempts map[string]int // per event id, the forwards recorded
	overlaps int
}

// recorderOptions shape an orderRecorder's answers.
type recorderOptions struct {
	// IDFormat reads an event's number from its id (Hookline-Event-Id)
	// with fmt.Sscanf; the number is the format's last verb.
	IDFormat string
	// Hold is how long a forward is in progress.
	Hold time.Duration
	// Before, if set, runs first for every forward, outside the
	// recorder's lock (it may block).
	Before func(n int)
	// Fail, if set, says whether a forward is answered 500; it is called
	// under the recorder's lock, with how many attempts of that event
	// arrived before this one.
	Fail func(n, earlier int) bool
}

// newOrderRecorder starts an orderRecorder, closed when t ends.
func newOrderRecorder(t *testing.T, o recorderOptions) *orderRecorder {
	t.Helper()
	rec := &orderRecorder{got: map[string][]int{}, inFlight: map[string]bool{}, attempts: map[string]int{}}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.Header.Get("Hookline-Event-Id")
		n := eventNumber(id, o.IDFormat)
		if o.Before != nil {
			o.Before(n)
		}
		key := r.Header.Get("Hookline-Order-Key")
		rec.mu.Lock()
		if rec.inFlight[key] {
			rec.overlaps++
		}
		rec.inFlight[key] = true
		fail := o.Fail != nil && o.Fail(n, rec.attempts[id])
		rec.attempts[id]++
		rec.got[key] = append(rec.got[key], n)
		rec.mu.Unlock()
		time.Sleep(o.Hold)
		rec.mu.Lock()
		rec.inFlight[key] = false
		rec.mu.Unlock()
		if fail {
			http.Error(w, "this attempt fails", http.StatusInternalServerError)
		}
	}))
	t.Cleanup(srv.Close)
	rec.URL = srv.URL
	return rec
}

// eventNumber is the last number format reads from id (-1 if none).
func eventNumber(id, format string) int {
	verbs := 0
	for i := 0; i+1 < len(format); i++ {
		if format[i] == '%' && format[i+1] == 'd' {
			verbs++
		}
	}
	nums := make([]int, verbs)
	ptrs := make([]any, verbs)
	for i := range nums {
		nums[i], ptrs[i] = -1, &nums[i]
	}
	_, _ = fmt.Sscanf(id, format, ptrs...)
	if verbs == 0 {
		return -1
	}
	return nums[verbs-1]
}

// forwards returns, per key, the event numbers forwarded, and requires
// that no two forwards of one key were in progress at once.
func (rec *orderRecorder) forwards(t *testing.T) map[string][]int {
	t.Helper()
	rec.mu.Lock()
	defer rec.mu.Unlock()
	require.Zero(t, rec.overlaps, "two forwards of one key were in progress at once")
	out := make(map[string][]int, len(rec.got))
	for k, ns := range rec.got {
		out[k] = slices.Clone(ns)
	}
	return out
}
