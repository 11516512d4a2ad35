package idem_test

import (
	"context"
	"errors"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/hookline/hookline/idem"
	"github.com/hookline/hookline/internal/pgtest"
)

// BenchmarkClaim measures the claim round trip on a fresh key against the
// test PostgreSQL (fsync off: round trips and CPU, not the disk):
//
//   - ClaimComplete: Claim, then Complete, each in its own statement on the
//     pool, as the external mode (and hookline's HTTP destination) does;
//   - ClaimCompleteTx: both inside one transaction;
//   - Run: Store.Run with an empty transactional function;
//   - Duplicate: Claim on a completed key (the answer a re-delivery gets).
func BenchmarkClaim(b *testing.B) {
	ctx := context.Background()
	pool := pgtest.NewEmptyPool(b)
	if err := idem.CreateTable(ctx, pool, "bench_claims"); err != nil {
		b.Fatal(err)
	}
	store, err := idem.NewStore(pool, &idem.Config{Table: "bench_claims"})
	if err != nil {
		b.Fatal(err)
	}
	var seq atomic.Int64
	opts := func() idem.Options {
		n := strconv.FormatInt(seq.Add(1), 10)
		return idem.Options{Namespace: "bench", Scope: "stripe", Segment: "evt_" + n, Holder: "job:" + n + ":attempt:1"}
	}

	b.Run("ClaimComplete", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			c, err := store.Claim(ctx, pool, opts())
			if err != nil {
				b.Fatal(err)
			}
			if err := c.Complete(ctx, pool); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("ClaimCompleteTx", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
				c, err := store.Claim(ctx, tx, opts())
				if err != nil {
					return err
				}
				return c.Complete(ctx, tx)
			})
			if err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("Run", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			res, err := store.Run(ctx, opts(), func(context.Context, pgx.Tx) error { return nil })
			if err != nil || res.Status != idem.StatusCompleted {
				b.Fatalf("%v %v", res.Status, err)
			}
		}
	})
	b.Run("Duplicate", func(b *testing.B) {
		o := opts()
		c, err := store.Claim(ctx, pool, o)
		if err != nil {
			b.Fatal(err)
		}
		if err := c.Complete(ctx, pool); err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		for b.Loop() {
			var dup *idem.DuplicateError
			if _, err := store.Claim(ctx, pool, o); !errors.As(err, &dup) {
				b.Fatalf("want a duplicate, got %v", err)
			}
		}
	})
}
