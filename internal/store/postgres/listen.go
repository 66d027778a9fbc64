package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/ordersync/ordersync/internal/outbox"
)

// Listener wakes the relay on NOTIFY ordersync_outbox, which Enqueue and a claim's
// Finish send when events commit. It holds a connection of its own, outside the
// pool, for as long as it listens. Connection poolers in transaction mode break
// LISTEN: there the relay polls only.
type Listener struct {
	db *DB
}

var _ outbox.Listener = (*Listener)(nil)

// Listener is the outbox's LISTEN/NOTIFY listener.
func (db *DB) Listener() *Listener { return &Listener{db: db} }

// Listen opens a dedicated connection (the pool's connection settings, not one of its
// connections), runs LISTEN ordersync_outbox and calls wake once when the LISTEN is in
// place — events committed before it are found at once rather than at the next poll —
// and then on every notification, until ctx ends (nil) or the connection fails (an
// error: the relay listens again after a pause). wake should not block.
//
// NOTIFY reaches every session of the database that listens on the channel, whatever
// its search_path: ordersync instances in several schemas of one database wake each
// other, which costs them an empty claim each.
func (l *Listener) Listen(ctx context.Context, wake func()) error {
	conn, err := pgx.ConnectConfig(ctx, l.db.pool.Config().ConnConfig) // Config returns a copy

	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return fmt.Errorf("postgres: listen: cannot connect to %s: %s", l.db.target, connectErrorCause(err))
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = conn.Close(cctx)
	}()
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{NotifyChannel}.Sanitize()); err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return fmt.Errorf("postgres: listen on %s: %w", NotifyChannel, err)
	}
	wake()
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("postgres: listen on %s: lost the connection to %s: %w", NotifyChannel, l.db.target, err)
		}
		if n.Channel == NotifyChannel {
			wake()
		}
	}
}
