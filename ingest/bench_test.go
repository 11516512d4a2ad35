package ingest

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// BenchmarkCommit measures one ingest transaction (store.commit and the
// group committer's store.commitPipelined: delivery
// rows, event upserts, River jobs) for 1 and for 64 deliveries, against the
// test PostgreSQL (fsync off, so this is the CPU and round-trip cost, not
// the disk's). ns/delivery is the figure to compare: group commit pays the
// per-transaction costs once per batch.
func BenchmarkCommit(b *testing.B) {
	st, _ := testStore(b)
	src := testSource(&Source{Name: "stripe", OnDuplicate: OnDuplicateSkip, MaxAttempts: 10})
	body := []byte(`{"id":"evt_x","object":"event","type":"payment_intent.succeeded","data":{"object":{"id":"pi_1","amount":2000,"currency":"usd"}},"pad":"` +
		strings.Repeat("x", 1300) + `"}`)
	headers := map[string][]string{
		"Content-Type":     {"application/json"},
		"Stripe-Signature": {"t=1764504000,v1=5257a869e7ecebeda32affa62cdca3fa51cad7e77a0e56ff536d0ce8e108d8bd"},
		"User-Agent":       {"Stripe/1.0 (+https://stripe.com/docs/webhooks)"},
		"X-Request-Id":     {"0f0e3c1a-6a9e-4d38-9b1b-3b1f8c7e2d11"},
	}
	var seq atomic.Int64
	for _, n := range []int{1, 64} {
		for _, dupPct := range []int{0, 10} {
			if n == 1 && dupPct > 0 {
				continue
			}
			// naive: pgx's transaction (store.commit); pipelined: the group
			// committer's (BEGIN in the first statement's round trip).
			for _, tx := range []string{"naive", "pipelined"} {
				commit := st.commit
				if tx == "pipelined" {
					commit = st.commitPipelined
				}
				b.Run(fmt.Sprintf("deliveries=%d/dup=%d%%/tx=%s", n, dupPct, tx), func(b *testing.B) {
					ctx := context.Background()
					var prev []string
					b.ReportAllocs()
					for b.Loop() {
						ds := make([]*Delivery, n)
						ids := make([]string, 0, n)
						for i := range ds {
							var id string
							if len(prev) > 0 && i*100 < n*dupPct {
								id = prev[i%len(prev)] // a re-delivery of a queued event
							} else {
								id = fmt.Sprintf("evt_bench_%d", seq.Add(1))
							}
							ids = append(ids, id)
							ds[i] = &Delivery{Source: src, ReceivedAt: time.Now(), ContentType: "application/json", Headers: headers,
								Body: body, Events: []DeliveryEvent{{ID: id, Type: "payment_intent.succeeded", Length: -1, Matched: []int{0}}}}
						}
						if _, err := commit(ctx, ds); err != nil {
							b.Fatal(err)
						}
						prev = ids
					}
					b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/delivery")
				})
			}
		}
	}
}
