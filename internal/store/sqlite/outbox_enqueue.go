package sqlite

import (
	"context"
	"database/sql"

	"github.com/ordersync/ordersync/internal/outbox"
)

// enqueueTx writes msgs as outbox rows in tx (the caller's transaction), bumping each
// lane's counter, and returns; the caller notifies after its commit.
//
// Placeholder while the SQLite outbox is being written: it refuses any message, so a
// verdict with events fails loudly rather than losing them.
func (db *DB) enqueueTx(ctx context.Context, tx *sql.Tx, msgs []outbox.Message) error {
	if len(msgs) == 0 {
		return nil
	}
	return errOutboxNotReady
}
