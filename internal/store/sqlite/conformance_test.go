package sqlite

import (
	"testing"

	"github.com/ordersync/ordersync/internal/store/storetest"
)

// TestConformance runs the storetest suite on SQLite, each case on its own database
// file. Options.Conns has no setting to go to: the handle keeps its fixed pool (Open),
// on which the inbox's simultaneous deliveries take turns.
func TestConformance(t *testing.T) {
	t.Parallel()
	storetest.Run(t, storetest.Harness{New: func(t *testing.T, o storetest.Options) storetest.Stores {
		cfg := Config{TakeoverAfter: o.TakeoverAfter} // 0: journalTestDB takes over at once
		if o.Clock != nil {
			cfg.Now = o.Clock.Now
		}
		db := journalTestDB(t, cfg)
		return storetest.Stores{
			Journal:  db.journalStore(),
			Outbox:   db.Outbox(),
			Enqueue:  outboxEnqueueIn(db),
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
