// Package reconcile pulls, from a provider's events API, the events that
// the provider failed to deliver to hookline, and stores them through the
// ingest path as deliveries of origin "reconcile".
//
// # A run
//
// A run of a source lists the provider's events created within the
// source's lookback (since = now - lookback), page by page. For each page
// it asks the Store which events hookline has ever accepted (Known, any
// state) and keeps only the others, bodies included: memory follows the
// number of missing events, not the number listed (a 72h lookback of a busy
// Stripe account lists 100k+ events). Checked counts every event listed
// within the lookback. When the listing is complete, the missing events are
// sorted oldest first (provider creation time; events of one
// creation time in the provider's list order where its API lists newest
// first, as Stripe's does, else by id) and stored in
// chunks of StoreChunk; Missing counts the events stored as new, and so
// does hookline_reconciled_total{source}.
//
// Storing starts only after the last page: Stripe and GoCardless list
// newest first, so a run that stored page by page would store a newer
// event before an older one found on a later page. Hence:
//
//   - a provider failure while listing (after the retries below) stores
//     nothing from that run: Result{Checked: events listed so far,
//     Missing: 0} and a *ProviderError; the next run lists again;
//   - a Store failure while storing keeps the chunks stored before it
//     (Missing counts them) and returns the error; they are Known to the
//     next run, which stores the rest, oldest first.
//
// # Provider answers
//
// One page is one GET, retried inside the run on 429, 5xx and network
// errors: at most Config.MaxTries requests a page, waiting Retry-After
// when the answer has one (GoCardless: RateLimit-Reset), otherwise an
// exponential back-off from Config.Backoff, every wait capped at MaxWait
// and ended by the run's context. 401 and 403 fail at once: the API key
// needs read access to events. Other answers fail at once too. The error
// carries the provider's own message, never the API key. The listers
// (stripe.go, gocardless.go, paddle.go) say, at their top, what each
// provider's published API reference specifies.
//
// # One run at a time, across instances
//
// Instances share one Postgres. A run holds a session advisory lock
// (pg_try_advisory_lock on a pooled connection kept for the whole run; the
// key is the FNV-1a 64 hash of "hookline:reconcile:"+source): a second run
// of the same source, here or on another instance, gets ErrRunning. Under
// the lock, the run claims the source's row of hookline_reconcile_runs
// (started_at = now()) and, when it ends, records finished_at, checked,
// missing and error there. A periodic claim succeeds only when the last
// run of the source, on any instance, periodic or on demand, started at
// least Every ago (by the database's clock), so N instances together make
// one periodic run per period. An on-demand run (Runner.Run) always claims.
// sql.go holds every statement.
//
// # Periodic runs
//
// Runner.Start starts one goroutine per source with Every > 0; a source
// without Every calls its provider only through Runner.Run. Each goroutine
// reads when the source's last run started, sleeps until the next is due
// and tries it. A periodic run that fails is logged and retried at the next
// period; a panic (in a lister or the Store) is recovered, logged with its
// stack and recorded as the run's error: nothing in a run stops the
// process.
//
// Internal: no stability promise.
package reconcile
