package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ordersync/ordersync/internal/eventually"
	"github.com/ordersync/ordersync/internal/inbox"
	"github.com/ordersync/ordersync/internal/journal"
	"github.com/ordersync/ordersync/internal/order"
)

// TestInboxGroupCommit: deliveries that arrive while the inbox writers are busy are
// stored together, and each keeps the outcome it would have had alone: new events
// with their operations, a registration whose key is saved with another payload
// (a conflict recorded, nothing overwritten), one registering the same key
// IfAbsent, and five deliveries of one event stored once. With the batch statement
// failing, the same deliveries are stored one by one with the same result.
func TestInboxGroupCommit(t *testing.T) {
	for _, fail := range []bool{false, true} {
		t.Run(fmt.Sprintf("batch fails=%v", fail), func(t *testing.T) {
			t.Parallel()
			db := newDB(t, Config{MaxConns: 24})
			ctx := context.Background()
			saved := "site:order:X-1:create"
			if _, err := db.journalStore().Register(ctx, journal.NewOperation{Key: saved, Kind: order.KindCreate, Source: "site",
				ExternalID: "site:X-1", Payload: json.RawMessage(`{"n":1}`)}); err != nil {
				t.Fatal(err)
			}

			// The writers' stores wait until every delivery is taken or queued; batch
			// sizes are recorded.
			release := make(chan struct{})
			var releaseOnce sync.Once
			defer releaseOnce.Do(func() { close(release) }) // before the DB closes, even on a failure
			var (
				mu    sync.Mutex
				sizes []int
				taken int // deliveries the writers hold: in the batches they store and kept back
			)
			db.groupStore = func(size, keptBack int) {
				mu.Lock()
				sizes = append(sizes, size)
				taken += size + keptBack
				mu.Unlock()
				<-release
			}
			if fail {
				db.groupFail = func(int) error { return errors.New("injected batch failure") }
			} else {
				db.groupFellBack = func(size int, err error) {
					t.Errorf("a batch of %d was stored one by one: %v", size, err)
				}
			}

			// Advisory locks are shared by the whole database, so the two subtests,
			// which run at once in schemas of their own, use sources of their own.
			source := fmt.Sprintf("site-%v", fail)
			inboxEv := func(id, body string) inbox.Event {
				ev := inboxEv(id, body)
				ev.Source = source
				return ev
			}
			type delivery struct {
				ev   inbox.Event
				regs []inbox.Registration
			}
			var ds []delivery
			for i := range 60 {
				id := fmt.Sprintf("N-%d", i)
				ds = append(ds, delivery{inboxEv(id, `{"id":"`+id+`"}`), []inbox.Registration{inboxReg("site:order:"+id+":create", i)}})
			}
			ifAbsent := inboxReg(saved, 3)
			ifAbsent.IfAbsent = true
			ds = append(ds,
				delivery{inboxEv("C-1", `{"c":1}`), []inbox.Registration{inboxReg(saved, 2)}},
				delivery{inboxEv("A-1", `{"a":1}`), []inbox.Registration{ifAbsent}},
				delivery{inboxEv("M-1", `{"m":1}`), []inbox.Registration{inboxReg("site:order:zz:create", 1), inboxReg("site:order:aa:create", 1)}},
			)
			for range 5 {
				ds = append(ds, delivery{inboxEv("D-1", `{"d":1}`), []inbox.Registration{inboxReg("site:order:D-1:create", 1)}})
			}

			receipts := make([]inbox.Receipt, len(ds))
			errs := make([]error, len(ds))
			var wg sync.WaitGroup
			for i, d := range ds {
				wg.Go(func() { receipts[i], errs[i] = db.inboxStore().Receive(ctx, d.ev, d.regs, inboxOK) })
			}
			eventually.True(t, fmt.Sprintf("a store started and all %d deliveries held or queued", len(ds)), func() bool {
				g := db.inboxGroup()
				mu.Lock()
				started, held := len(sizes), taken
				mu.Unlock()
				return started > 0 && held+len(g.requests) == len(ds)
			})
			releaseOnce.Do(func() { close(release) })
			wg.Wait()

			outcomes := map[string][]inbox.Outcome{}
			for i, d := range ds {
				if errs[i] != nil {
					t.Fatalf("receive %s: %v", d.ev.ID, errs[i])
				}
				outcomes[d.ev.ID] = append(outcomes[d.ev.ID], receipts[i].Outcome)
			}
			for id, got := range outcomes {
				if id == "D-1" {
					continue
				}
				if !slices.Equal(got, []inbox.Outcome{inbox.Processed}) {
					t.Errorf("%s: outcomes %v, want one processed", id, got)
				}
			}
			processed := 0
			for _, o := range outcomes["D-1"] {
				switch o {
				case inbox.Processed:
					processed++
				case inbox.Duplicate, inbox.InProgress:
				default:
					t.Errorf("D-1: outcome %s", o)
				}
			}
			if processed != 1 {
				t.Errorf("D-1: %d of 5 deliveries processed, want 1 (%v)", processed, outcomes["D-1"])
			}

			// 60 new, C-1, A-1, M-1, D-1; operations: X-1, 60, zz, aa, D-1.
			wantCounts(t, db, "after the grouped deliveries", 64, 64)
			for i := range 60 {
				var ops []string
				id := fmt.Sprintf("N-%d", i)
				if err := db.Pool().QueryRow(ctx, `SELECT operations FROM inbox_events WHERE event_id = $1`, id).Scan(&ops); err != nil {
					t.Fatal(err)
				}
				if !slices.Equal(ops, []string{"site:order:" + id + ":create"}) {
					t.Fatalf("%s registered %v", id, ops)
				}
			}
			var (
				mOps   []string
				answer string
			)
			if err := db.Pool().QueryRow(ctx, `SELECT operations, convert_from(answer_body, 'UTF8') FROM inbox_events WHERE event_id = 'M-1'`).Scan(&mOps, &answer); err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(mOps, []string{"site:order:zz:create", "site:order:aa:create"}) || answer != string(inboxOK.Body) {
				t.Fatalf("M-1 stored operations %v and answer %s; want them in the order registered, and %s", mOps, answer, inboxOK.Body)
			}
			op, err := db.journalStore().Get(ctx, saved)
			if err != nil {
				t.Fatal(err)
			}
			if string(op.Payload) != `{"n": 1}` && string(op.Payload) != `{"n":1}` {
				t.Fatalf("%s payload %s: overwritten", saved, op.Payload)
			}
			if n := count(t, db, `SELECT count(*) FROM operation_conflicts WHERE operation_key = $1`, saved); n != 1 {
				t.Fatalf("%s: %d conflict rows, want 1 (C-1's payload; A-1 registered IfAbsent)", saved, n)
			}
			if n := count(t, db, `SELECT count(*) FROM operation_conflicts WHERE payload_sha256 = $1`, order.SHA256Hex(json.RawMessage(`{"n":2}`))); n != 1 {
				t.Fatalf("C-1's payload recorded %d times, want 1", n)
			}

			mu.Lock()
			defer mu.Unlock()
			if !fail && slices.Max(sizes) < 2 {
				t.Fatalf("batch sizes %v: nothing was grouped", sizes)
			}
		})
	}
}

// The burst under test: one operation claimed (its 1C call under way), four deal
// updates that wake it and 36 new orders in one burst. No delivery waits for the
// claim: every one is processed and every new order registered; the wakes take
// effect when the claim ends.
func TestInboxBurstBesideAClaimedRow(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := newDB(t, Config{MaxConns: 24})
	key := "bitrix24:deal:held:create"
	c := wakeBehindClaim(t, db, key)

	const updates, orders = 4, 36
	var wg sync.WaitGroup
	outcomes := make([]inbox.Outcome, updates+orders)
	errs := make([]error, updates+orders)
	for i := range updates + orders {
		wg.Go(func() {
			if i < updates {
				wake := inboxReg(key, 2+i)
				wake.IfAbsent, wake.Wake = true, true
				r, err := db.inboxStore().Receive(ctx, inboxEv(fmt.Sprintf("deal-update-%d", i), `{}`), []inbox.Registration{wake}, inboxOK)
				outcomes[i], errs[i] = r.Outcome, err
				return
			}
			id := fmt.Sprintf("burst-%d", i)
			r, err := db.inboxStore().Receive(ctx, inboxEv(id, `{}`), []inbox.Registration{inboxReg("site:order:"+id+":create", 1)}, inboxOK)
			outcomes[i], errs[i] = r.Outcome, err
		})
	}
	wg.Wait()
	for i := range outcomes {
		if errs[i] != nil || outcomes[i] != inbox.Processed {
			t.Fatalf("delivery %d beside the claimed row: %s (%v), want processed", i, outcomes[i], errs[i])
		}
	}
	ops, err := db.journalStore().List(ctx, journal.Filter{Source: "site", Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	registered := 0
	for _, op := range ops {
		if strings.HasPrefix(op.Key, "site:order:burst-") {
			registered++
		}
	}
	if registered != orders {
		t.Fatalf("%d new orders registered, want %d", registered, orders)
	}
	if err := c.Finish(ctx, journal.Finish{Status: journal.StatusPending, NextAttemptAt: time.Now().Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	if op, _ := db.journalStore().Get(ctx, key); op.NextAttemptAt.After(time.Now().Add(time.Minute)) {
		t.Fatalf("after the claim ended %s is due at %v: the updates' wake was lost", key, op.NextAttemptAt)
	}
}
