package reconcile

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"slices"
	"time"
)

// bookkeeping bounds the statements that end a run (record it, unlock),
// which run even when the run's context has ended.
const bookkeeping = 10 * time.Second

// run runs src once under its advisory lock. A periodic run starts only
// when the last run of src started at least Every ago; ran reports whether
// it started. Panics of the run are recovered and returned as errors.
func (r *Runner) run(ctx context.Context, src *source, periodic bool) (res Result, ran bool, err error) {
	conn, err := r.pool.Acquire(ctx)
	if err != nil {
		return Result{}, false, fmt.Errorf("reconcile %s: get a database connection: %w", src.cfg.Name, err)
	}
	defer conn.Release()
	locked, err := tryLock(ctx, conn, src.lockKey)
	if err != nil {
		return Result{}, false, fmt.Errorf("reconcile %s: take the run lock: %w", src.cfg.Name, err)
	}
	if !locked {
		return Result{}, false, ErrRunning
	}
	defer func() {
		bctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), bookkeeping)
		defer cancel()
		if uerr := unlock(bctx, conn, src.lockKey); uerr != nil {
			// Closing the session releases its locks; the pool then drops the connection.
			src.logger.Warn("reconcile: could not release the run lock; closing its connection", "err", uerr)
			_ = conn.Conn().Close(bctx)
		}
	}()
	every := time.Duration(0)
	if periodic {
		every = src.cfg.Every
	}
	startedAt, claimed, err := claim(ctx, conn, src.cfg.Name, every)
	if err != nil {
		return Result{}, false, fmt.Errorf("reconcile %s: record the run's start: %w", src.cfg.Name, err)
	}
	if !claimed {
		return Result{}, false, nil
	}
	res, err = r.guarded(ctx, src, periodic)
	bctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), bookkeeping)
	defer cancel()
	if ferr := finish(bctx, conn, src.cfg.Name, startedAt, res, err); ferr != nil {
		src.logger.Warn("reconcile: could not record the run's end in hookline_reconcile_runs", "err", ferr)
	}
	return res, true, err
}

// guarded is reconcile with its panics recovered into an error; res holds
// what the run did before the panic.
func (r *Runner) guarded(ctx context.Context, src *source, periodic bool) (res Result, err error) {
	defer func() {
		if p := recover(); p != nil {
			src.logger.Error("reconcile: run panicked; recovered, the next run tries again", "panic", p, "stack", string(debug.Stack()))
			err = fmt.Errorf("reconcile %s: run panicked: %v; this is a bug, report it with the log's stack", src.cfg.Name, p)
		}
	}()
	err = r.reconcile(ctx, src, periodic, &res)
	return res, err
}

// reconcile lists src's events within the lookback, keeps those the Store
// does not know, then stores them oldest first (see the package doc). res
// counts as the run goes.
func (r *Runner) reconcile(ctx context.Context, src *source, periodic bool, res *Result) error {
	name := src.cfg.Name
	start := time.Now()
	// Whole seconds: Stripe's created[gte] is in seconds, and an event the
	// API lists as within the lookback must count as checked.
	since := start.Add(-src.cfg.Lookback).Truncate(time.Second)
	trigger := "on demand"
	if periodic {
		trigger = "periodic"
	}
	src.logger.Info("reconcile run started", "since", since.UTC().Format(time.RFC3339), "trigger", trigger)
	var missing []Event
	seen := map[string]bool{}  // ids in missing
	listed := map[string]int{} // ids in missing: their place in the listing
	pages := 0
	err := src.lister.list(ctx, since, func(page []Event) error {
		pages++
		page = slices.DeleteFunc(page, func(e Event) bool { return e.Created.Before(since) })
		res.Checked += len(page)
		if len(page) == 0 {
			return nil
		}
		known, err := r.store.Known(ctx, name, page)
		if err != nil {
			return fmt.Errorf("reconcile %s: ask the store which events it knows: %w", name, err)
		}
		if len(known) != len(page) {
			return fmt.Errorf("reconcile %s: the store answered %d known flags for %d events", name, len(known), len(page))
		}
		for i, ev := range page {
			if err := known[i].Refused; err != nil {
				res.Skipped++
				src.logger.Warn("reconcile: skipped an event hookline cannot store; a webhook carrying it would be refused too",
					"event_id", ev.ID, "error", err.Error())
				continue
			}
			if !known[i].Accepted && !seen[ev.ID] {
				seen[ev.ID] = true
				listed[ev.ID] = res.Checked - len(page) + i
				missing = append(missing, ev)
			}
		}
		src.logger.Debug("reconcile page", "page", pages, "checked", res.Checked, "missing", len(missing))
		return nil
	})
	if err != nil {
		return r.failed(src, periodic, *res, start, "listing", err)
	}
	// Oldest first. Events of one creation time keep the provider's order
	// where its list says it (newest first: the later listed is the older),
	// else go by id.
	tie := func(a, b Event) int { return cmp.Compare(a.ID, b.ID) }
	if nf, ok := src.lister.(newestFirst); ok && nf.newestFirst() {
		tie = func(a, b Event) int { return cmp.Compare(listed[b.ID], listed[a.ID]) }
	}
	slices.SortStableFunc(missing, func(a, b Event) int {
		return cmp.Or(a.Created.Compare(b.Created), tie(a, b))
	})
	for chunk := range slices.Chunk(missing, StoreChunk) {
		n, err := r.store.Store(ctx, name, chunk)
		res.Missing += n
		r.counter.WithLabelValues(name).Add(float64(n))
		if err != nil {
			err = fmt.Errorf("reconcile %s: store missing events: %w (stored %d of %d; the next run stores the rest)", name, err, res.Missing, len(missing))
			return r.failed(src, periodic, *res, start, "storing", err)
		}
	}
	src.logger.Info("reconcile run finished", "checked", res.Checked, "missing", res.Missing, "skipped", res.Skipped,
		"pages", pages, "duration", time.Since(start).Round(time.Millisecond))
	return nil
}

// failed logs a failed run and returns err, with a *ProviderError told
// when the source retries.
func (r *Runner) failed(src *source, periodic bool, res Result, start time.Time, phase string, err error) error {
	var pe *ProviderError
	if errors.As(err, &pe) {
		pe.Source = src.cfg.Name
		pe.periodic = src.cfg.Every > 0
	}
	level := "warn"
	if pe == nil && !errors.Is(err, context.Canceled) {
		level = "error"
	}
	args := []any{"phase", phase, "checked", res.Checked, "missing", res.Missing,
		"duration", time.Since(start).Round(time.Millisecond), "periodic", periodic, "err", err}
	if level == "warn" {
		src.logger.Warn("reconcile run failed", args...)
	} else {
		src.logger.Error("reconcile run failed", args...)
	}
	return err
}

// loop runs src's periodic runs until ctx ends.
func (r *Runner) loop(ctx context.Context, src *source) {
	defer r.wg.Done()
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		}
		timer.Reset(r.tick(ctx, src))
	}
}

// tick tries a periodic run of src when it is due and returns how long to
// wait before the next try. It never panics.
func (r *Runner) tick(ctx context.Context, src *source) (wait time.Duration) {
	every := src.cfg.Every
	floor := min(every/4, time.Second) // no busy loop when the database errs or another instance runs
	defer func() {
		if p := recover(); p != nil {
			src.logger.Error("reconcile: periodic run panicked; recovered", "panic", p, "stack", string(debug.Stack()))
			wait = every
		}
		wait = max(wait, floor)
	}()
	remaining, err := untilDue(ctx, r.pool, src.cfg.Name, every)
	if err != nil {
		if ctx.Err() == nil {
			src.logger.Warn("reconcile: cannot read the last run; trying again", "err", err)
		}
		return every
	}
	if remaining > 0 {
		return remaining
	}
	_, ran, err := r.run(ctx, src, true)
	switch {
	case errors.Is(err, ErrRunning):
		// Possibly a long on-demand run: look again a while later.
		src.logger.Debug("reconcile: periodic run skipped: another run is in progress")
		return min(every/4, time.Minute)
	case err != nil && !ran && ctx.Err() == nil:
		src.logger.Warn("reconcile: periodic run could not start", "err", err)
	}
	// The next try reads when the last run started (this one, or another
	// instance's).
	return 0
}
