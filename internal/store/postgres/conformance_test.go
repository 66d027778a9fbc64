package postgres

import (
	"testing"

	"github.com/ordersync/ordersync/internal/store/storetest"
)

// conformanceMaxConns bounds the pool of a case that asks for more connections
// (storetest.Options.Conns: the inbox's simultaneous deliveries). A test server allows
// 100 connections by default, to every package and test that runs at the same time,
// so the 100 deliveries run on 32 connections: the rest wait for one, and most of
// those find the event stored (duplicates).
const conformanceMaxConns = 32

// TestConformance runs the storetest suite on PostgreSQL, each case on a fresh schema.
func TestConformance(t *testing.T) {
	t.Parallel()
	storetest.Run(t, storetest.Harness{New: func(t *testing.T, o storetest.Options) storetest.Stores {
		cfg := Config{TakeoverAfter: o.TakeoverAfter} // 0: newDB takes over at once
		if o.Clock != nil {
			cfg.Now = o.Clock.Now
		}
		if o.Conns > 0 {
			cfg.MaxConns = int32(min(o.Conns, conformanceMaxConns))
		}
		db := newDB(t, cfg)
		return storetest.Stores{
			Journal:  db.journalStore(),
			Outbox:   db.Outbox(),
			Enqueue:  enqueueIn(db),
			Inbox:    db.inboxStore(),
			Stock:    db.Stock(),
			Cursors:  db.Cursors(),
			Sessions: db.Sessions(),
			Payouts:  db.Payouts(),
		}
	}})
}

// inboxStore and journalStore are the backend's own stores, for the tests that
// reach past the interfaces DB returns them as.
func (db *DB) inboxStore() *Inbox     { return db.Inbox().(*Inbox) }
func (db *DB) journalStore() *Journal { return db.Journal().(*Journal) }
