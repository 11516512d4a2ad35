package idem_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/hookline/hookline/idem"
	"github.com/hookline/hookline/internal/pgtest"
)

func ExampleStore_Run() {
	ctx := context.Background()
	// In production: pool, err := pgxpool.New(ctx, databaseURL).
	pool, done := examplePool()
	defer done()

	if err := idem.CreateTable(ctx, pool, ""); err != nil {
		panic(err)
	}
	if _, err := pool.Exec(ctx, `CREATE TABLE charges (payment_id text, amount_cents int)`); err != nil {
		panic(err)
	}
	store, err := idem.NewStore(pool, nil)
	if err != nil {
		panic(err)
	}

	// The charge row and the completed claim commit in one transaction.
	charge := func(ctx context.Context, tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `INSERT INTO charges VALUES ($1, $2)`, "pay_123", 9900)
		return err
	}
	opts := idem.Options{Namespace: "hookline", Scope: "charge", Segment: "pay_123", Holder: "job:1:attempt:1"}

	res, err := store.Run(ctx, opts, charge)
	if err != nil {
		panic(err)
	}
	fmt.Println(res.Status, res.Key)

	// The webhook fires again: the work does not run a second time.
	opts.Holder = "job:2:attempt:1"
	res, err = store.Run(ctx, opts, charge)
	if err != nil {
		panic(err)
	}
	fmt.Println(res.Status, res.Code, res.State, "by", res.Holder)

	var charges int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM charges`).Scan(&charges); err != nil {
		panic(err)
	}
	fmt.Println("charges:", charges)

	// Output:
	// completed hookline:charge:pay_123
	// skipped duplicate completed by job:1:attempt:1
	// charges: 1
}

func ExampleStore_RunExternal() {
	ctx := context.Background()
	pool, done := examplePool()
	defer done()

	if err := idem.CreateTable(ctx, pool, ""); err != nil {
		panic(err)
	}
	store, err := idem.NewStore(pool, nil)
	if err != nil {
		panic(err)
	}

	// OnDuplicate Fail: a second send is refused, like an HTTP 409.
	opts := idem.Options{Namespace: "hookline", Scope: "welcome-email", Segment: "user_42", OnDuplicate: idem.Fail}
	send := func(ctx context.Context) error {
		fmt.Println("sending email")
		return nil
	}

	res, err := store.RunExternal(ctx, opts, send)
	fmt.Println(res.Status, err)

	res, err = store.RunExternal(ctx, opts, send)
	fmt.Println(res.Status, res.Code, errors.Is(err, idem.ErrDuplicate))

	// Output:
	// sending email
	// completed <nil>
	// failed duplicate true
}

func ExampleStore_Claim() {
	ctx := context.Background()
	pool, done := examplePool()
	defer done()

	if err := idem.CreateTable(ctx, pool, ""); err != nil {
		panic(err)
	}
	store, err := idem.NewStore(pool, nil)
	if err != nil {
		panic(err)
	}
	opts := idem.Options{Namespace: "hookline", Scope: "reserve", Segment: "order_7", Holder: "worker-a"}

	claim, err := store.Claim(ctx, nil, opts)
	if err != nil {
		panic(err)
	}

	// While worker-a holds the claim, others are told who has it.
	opts.Holder = "worker-b"
	_, err = store.Claim(ctx, nil, opts)
	var dup *idem.DuplicateError
	if errors.As(err, &dup) {
		fmt.Println("duplicate:", dup.State, "held by", dup.Holder)
	}

	// The work failed: release so a retry can claim the key at once.
	if err := claim.Release(ctx, nil); err != nil {
		panic(err)
	}
	retry, err := store.Claim(ctx, nil, opts)
	if err != nil {
		panic(err)
	}
	fmt.Println("retry holds it with a larger token:", retry.Token() > claim.Token())
	if err := retry.Complete(ctx, nil); err != nil {
		panic(err)
	}

	// Output:
	// duplicate: processing held by worker-a
	// retry holds it with a larger token: true
}

func ExampleComposeKey() {
	key, err := idem.ComposeKey("hookline", "stripe.charge", "evt_123")
	fmt.Println(key, err)

	_, err = idem.ComposeKey("hookline", "stripe.charge", "")
	fmt.Println(errors.Is(err, idem.ErrEmptySegment))

	// Output:
	// hookline:stripe.charge:evt_123 <nil>
	// true
}

// examplePool gives an example its own empty database from pgtest, which
// wants a testing.TB; done drops it.
func examplePool() (pool *pgxpool.Pool, done func()) {
	tb, done := pgtest.ExampleTB()
	return pgtest.NewEmptyPool(tb), done
}

// Many claims in one round trip: a worker's concurrent jobs claim together
// and complete together, each claim fenced by its own token.
func ExampleStore_ClaimManySQL() {
	ctx := context.Background()
	pool, done := examplePool()
	defer done()
	if err := idem.CreateTable(ctx, pool, ""); err != nil {
		panic(err)
	}
	store, err := idem.NewStore(pool, nil)
	if err != nil {
		panic(err)
	}
	opts := func(id string) idem.Options {
		return idem.Options{Namespace: "hookline", Scope: "stripe", Segment: id, Holder: "job:" + id}
	}
	// evt_2 is held already: the batch does not take it.
	if _, err := store.Claim(ctx, pool, opts("evt_2")); err != nil {
		panic(err)
	}
	var keys, holders []string
	var leases []int64
	for _, id := range []string{"evt_1", "evt_2", "evt_3"} {
		st, err := store.ClaimStatement(opts(id)) // validated arguments: key, holder, lease (µs)
		if err != nil {
			panic(err)
		}
		keys, holders, leases = append(keys, st.Args[0].(string)), append(holders, st.Args[1].(string)), append(leases, st.Args[2].(int64))
	}
	rows, err := pool.Query(ctx, `WITH c AS (`+store.ClaimManySQL(`SELECT * FROM unnest($1::text[], $2::text[], $3::bigint[])`)+`)
		SELECT key, token, expires_at FROM c ORDER BY key`, keys, holders, leases)
	if err != nil {
		panic(err)
	}
	var claims []*idem.Claim
	for rows.Next() {
		var key string
		var token int64
		var expires time.Time
		if err := rows.Scan(&key, &token, &expires); err != nil {
			panic(err)
		}
		id := strings.TrimPrefix(key, "hookline:stripe:")
		c, err := store.ClaimFromRow(opts(id), token, expires)
		if err != nil {
			panic(err)
		}
		claims = append(claims, c)
		fmt.Println("claimed", key)
	}
	if rows.Err() != nil {
		panic(rows.Err())
	}

	// Complete them together: each completes only under its own token.
	var tokens, windows []int64
	keys = keys[:0]
	for _, c := range claims {
		st := c.CompleteStatement()
		keys, tokens, windows = append(keys, st.Args[0].(string)), append(tokens, st.Args[1].(int64)), append(windows, st.Args[2].(int64))
	}
	var completed int64
	err = pool.QueryRow(ctx, `WITH c AS (`+store.CompleteManySQL(`SELECT * FROM unnest($1::text[], $2::bigint[], $3::bigint[])`)+`)
		SELECT count(*) FROM c`, keys, tokens, windows).Scan(&completed)
	if err != nil {
		panic(err)
	}
	fmt.Println("completed", completed)
	// Output:
	// claimed hookline:stripe:evt_1
	// claimed hookline:stripe:evt_3
	// completed 2
}
