package app

import (
	"context"
	"errors"
	"fmt"

	"github.com/hookline/hookline/admin"
	"github.com/hookline/hookline/ingest"
	"github.com/hookline/hookline/internal/reconcile"
)

// ingestStore is reconcile's Store over the ingest path: what a run finds
// is stored as deliveries of origin reconcile.
type ingestStore struct{ in *ingest.Server }

func items(events []reconcile.Event) []ingest.Item {
	out := make([]ingest.Item, len(events))
	for i, e := range events {
		out[i] = ingest.Item{Body: e.Body, Type: e.Type}
	}
	return out
}

func (s ingestStore) Known(ctx context.Context, source string, events []reconcile.Event) ([]reconcile.Lookup, error) {
	accepted, refused, err := s.in.Accepted(ctx, source, items(events))
	if err != nil {
		return nil, err
	}
	out := make([]reconcile.Lookup, len(events))
	for i := range out {
		out[i] = reconcile.Lookup{Accepted: accepted[i], Refused: refused[i]}
	}
	return out, nil
}

func (s ingestStore) Store(ctx context.Context, source string, events []reconcile.Event) (int, error) {
	res, err := s.in.StoreItems(ctx, source, items(events), ingest.OriginReconcile)
	n := 0
	for _, r := range res {
		if r.Status == ingest.StatusAccepted {
			n++
		}
	}
	return n, err
}

// buildReconciler builds the reconciliation runner of the sources with a
// reconcile block; nil when none has one.
func (a *App) buildReconciler() error {
	var srcs []reconcile.SourceConfig
	for _, s := range a.Config.Sources {
		if r := s.Reconcile; r != nil {
			srcs = append(srcs, reconcile.SourceConfig{Name: s.Name, Provider: s.Provider, Every: r.Every.D(), Lookback: r.Lookback.D(),
				APIKey: r.APIKey, APIURL: r.APIURL})
		}
	}
	if len(srcs) == 0 {
		return nil
	}
	rec, err := reconcile.New(reconcile.Config{Pool: a.Pool, Store: ingestStore{a.Ingest}, Sources: srcs,
		Registerer: a.Registry, Logger: a.opts.Logger})
	if err != nil {
		return fmt.Errorf("reconcile: %w", err)
	}
	a.reconciler = rec
	return nil
}

// reconcileNow is the admin API's POST /admin/sources/{source}/reconcile:
// reconcile's errors as the admin API's.
func (a *App) reconcileNow(ctx context.Context, source string) (admin.ReconcileResult, error) {
	known := false
	for _, s := range a.Config.Sources {
		known = known || s.Name == source
	}
	if !known {
		return admin.ReconcileResult{}, admin.ErrNoSuchSource
	}
	if a.reconciler == nil {
		return admin.ReconcileResult{}, admin.ErrNotReconciled
	}
	res, err := a.reconciler.Run(ctx, source)
	out := admin.ReconcileResult{Checked: res.Checked, Missing: res.Missing}
	var pe *reconcile.ProviderError
	switch {
	case err == nil:
		return out, nil
	case errors.Is(err, reconcile.ErrNotConfigured):
		return out, admin.ErrNotReconciled
	case errors.Is(err, reconcile.ErrRunning):
		return out, admin.ErrReconcileRunning
	case errors.As(err, &pe):
		return out, &admin.ProviderError{Err: err}
	}
	return out, err
}
