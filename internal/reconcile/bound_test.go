package reconcile_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/ordersync/ordersync/internal/eventually"
	"github.com/ordersync/ordersync/internal/onec"
	"github.com/ordersync/ordersync/internal/reconcile"
)

// blockingOneC lists nothing until its caller's context ends.
type blockingOneC struct{ listing chan struct{} }

func (blockingOneC) FindOrders(context.Context, string) ([]onec.Order, error) { return nil, nil }
func (b blockingOneC) ListOrders(ctx context.Context, _ onec.ListQuery) ([]onec.Order, error) {
	close(b.listing)
	<-ctx.Done()
	return nil, ctx.Err()
}

// A period longer than MaxDays is refused before anything is read; a second
// reconciliation of a source while one runs is refused at once; and one whose
// caller goes away (a page's request cancelled by a disconnect) stops.
func TestRunIsBounded(t *testing.T) {
	t.Parallel()
	w := newWorld(t, stores[0].open)
	w.source = "site"
	from := time.Date(2000, 1, 1, 0, 0, 0, 0, almaty)
	_, err := reconcile.Run(w.ctx, reconcile.Params{Source: "site", From: from, To: time.Date(3999, 12, 30, 0, 0, 0, 0, almaty),
		Location: almaty, Journal: w.store, OneC: olderModule{}})
	if !errors.Is(err, reconcile.ErrPeriodTooLong) {
		t.Fatalf("a period of 2000 years: %v, want ErrPeriodTooLong", err)
	}
	if _, err := reconcile.Run(w.ctx, reconcile.Params{Source: "site", From: from, To: from.AddDate(0, 0, reconcile.MaxDays-1),
		Location: almaty, Journal: w.store, OneC: olderModule{}}); errors.Is(err, reconcile.ErrPeriodTooLong) {
		t.Fatalf("a period of %d days refused: %v", reconcile.MaxDays, err)
	}

	ctx, cancel := context.WithCancel(w.ctx)
	slow := blockingOneC{listing: make(chan struct{})}
	done := make(chan error, 1)
	go func() {
		_, err := reconcile.Run(ctx, reconcile.Params{Source: "site", From: periodFrom, To: periodTo, Location: almaty, Journal: w.store, OneC: slow})
		done <- err
	}()
	<-slow.listing
	_, err = reconcile.Run(w.ctx, reconcile.Params{Source: "site", From: periodFrom, To: periodTo, Location: almaty, Journal: w.store, OneC: olderModule{}})
	if !errors.Is(err, reconcile.ErrBusy) {
		t.Fatalf("a second reconciliation of site while one runs: %v, want ErrBusy", err)
	}
	cancel()
	err = <-done
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("the cancelled reconciliation ended with %v, want context.Canceled", err)
	}
	// The source is free again.
	eventually.True(t, "site free to reconcile again", func() bool {
		_, err := reconcile.Run(w.ctx, reconcile.Params{Source: "site", From: periodFrom, To: periodTo, Location: almaty, Journal: w.store, OneC: olderModule{}})
		return !errors.Is(err, reconcile.ErrBusy)
	})
}
