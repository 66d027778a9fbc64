package storetest

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/ordersync/ordersync/internal/inbox"
	"github.com/ordersync/ordersync/internal/journal"
	"github.com/ordersync/ordersync/internal/outbox"
)

// runPaging runs the topic of the listings read page by page (`journal list --limit
// 0`, `inbox list`, `outbox list`): each page after the last row of the one before,
// every row once, in the listing's order, filters kept.
func runPaging(t *testing.T, h Harness) {
	t.Helper()
	for _, tc := range []struct {
		name string
		fn   func(t *testing.T, s Stores)
	}{
		{"Journal", testPagingJournal},
		{"Inbox", testPagingInbox},
		{"Outbox", testPagingOutbox},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.fn(t, h.open(t, Options{}, "Journal", "Inbox", "Outbox", "Enqueue"))
		})
	}
}

// pages reads a listing page by page with list(after, size), where after is the
// last row of the previous page (nil first), and returns what each row's id gives.
func pages[T any](t *testing.T, size int, list func(after *T, size int) ([]T, error), id func(T) string) []string {
	t.Helper()
	var ids []string
	var after *T
	for range 1000 {
		page, err := list(after, size)
		if err != nil {
			t.Fatalf("list after %v: %v", after, err)
		}
		if len(page) > size {
			t.Fatalf("a page of %d rows with a limit of %d", len(page), size)
		}
		for _, r := range page {
			ids = append(ids, id(r))
		}
		if len(page) < size {
			return ids
		}
		last := page[len(page)-1]
		after = &last
	}
	t.Fatal("the listing does not end")
	return nil
}

func testPagingJournal(t *testing.T, s Stores) {
	j := s.Journal
	var keys []string
	for i := range 23 {
		// Several sources, so that a filter is kept across pages.
		key := fmt.Sprintf("%s:order:%02d:create", []string{"kaspi", "ozon", "site"}[i%3], i)
		registerNew(t, j, key)
		keys = append(keys, key)
	}
	// Rows updated at the same microsecond order by key: finish a few at once.
	for _, k := range keys[:5] {
		setState(t, j, k, journal.Finish{Status: journal.StatusDone, Result: &journal.Result{Ref: "r"}})
	}
	whole, err := j.List(t.Context(), journal.Filter{Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, op := range whole {
		want = append(want, op.Key)
	}
	if len(want) != len(keys) {
		t.Fatalf("one page lists %d of %d operations", len(want), len(keys))
	}
	for _, size := range []int{1, 4, 5, 23, 50} {
		got := pages(t, size, func(after *journal.Operation, size int) ([]journal.Operation, error) {
			return j.List(t.Context(), journal.Filter{Limit: size, After: after})
		}, func(op journal.Operation) string { return op.Key })
		if !slices.Equal(got, want) {
			t.Fatalf("pages of %d: %v\nwant %v", size, got, want)
		}
	}
	var kaspi []string
	for _, k := range want {
		if k[:5] == "kaspi" {
			kaspi = append(kaspi, k)
		}
	}
	got := pages(t, 2, func(after *journal.Operation, size int) ([]journal.Operation, error) {
		return j.List(t.Context(), journal.Filter{Limit: size, Source: "kaspi", After: after})
	}, func(op journal.Operation) string { return op.Key })
	if !slices.Equal(got, kaspi) {
		t.Fatalf("kaspi pages: %v, want %v", got, kaspi)
	}
}

func testPagingInbox(t *testing.T, s Stores) {
	ib := s.Inbox
	at := time.Now().UTC().Truncate(time.Microsecond)
	for i := range 17 {
		// Several events at one time, from two senders: the order goes on by source,
		// then event id.
		ev := inboxEvent([]string{"site", "crm"}[i%2], fmt.Sprintf("ev-%02d", i), fmt.Sprintf(`{"n":%d}`, i))
		ev.ReceivedAt = at.Add(-time.Duration(i/4) * time.Second)
		receive(t, ib, ev, []inbox.Registration{reg(fmt.Sprintf("site:order:p%02d:create", i), 1)}, okAnswer())
	}
	id := func(r inbox.Record) string { return r.Source + "/" + r.EventID }
	var want []string
	for _, r := range listInbox(t, ib, inbox.Filter{Limit: 1000}) {
		want = append(want, id(r))
	}
	if len(want) != 17 {
		t.Fatalf("one page lists %d of 17 events", len(want))
	}
	for _, size := range []int{1, 3, 4, 17, 40} {
		got := pages(t, size, func(after *inbox.Record, size int) ([]inbox.Record, error) {
			return ib.List(t.Context(), inbox.Filter{Limit: size, After: after})
		}, id)
		if !slices.Equal(got, want) {
			t.Fatalf("pages of %d: %v\nwant %v", size, got, want)
		}
	}
	got := pages(t, 2, func(after *inbox.Record, size int) ([]inbox.Record, error) {
		return ib.List(t.Context(), inbox.Filter{Limit: size, Source: "crm", After: after})
	}, id)
	if len(got) != 8 {
		t.Fatalf("crm pages: %v, want its 8 events", got)
	}
}

func testPagingOutbox(t *testing.T, s Stores) {
	e := &outboxEnv{t: t, s: s.Outbox, enqueue: s.Enqueue, clock: NewRunningClock()}
	for i := range 19 {
		e.put(msg([]string{"crm", "erp"}[i%2], fmt.Sprintf("site:order:%d", i%5), i))
	}
	id := func(r outbox.Record) string { return fmt.Sprint(r.ID) }
	var want []string
	for _, r := range e.list(outbox.ListFilter{Limit: 1000}) {
		want = append(want, id(r))
	}
	if len(want) != 19 {
		t.Fatalf("one page lists %d of 19 events", len(want))
	}
	list := func(f outbox.ListFilter) func(after *outbox.Record, size int) ([]outbox.Record, error) {
		return func(after *outbox.Record, size int) ([]outbox.Record, error) {
			f.Limit = size
			if after != nil {
				f.BeforeID = after.ID
			}
			return s.Outbox.List(t.Context(), f)
		}
	}
	for _, size := range []int{1, 6, 19, 30} {
		if got := pages(t, size, list(outbox.ListFilter{}), id); !slices.Equal(got, want) {
			t.Fatalf("pages of %d: %v\nwant %v", size, got, want)
		}
	}
	if got := pages(t, 3, list(outbox.ListFilter{Destination: "erp"}), id); len(got) != 9 {
		t.Fatalf("erp pages: %v, want its 9 events", got)
	}
}
