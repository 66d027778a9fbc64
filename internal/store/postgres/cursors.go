package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/ordersync/ordersync/connectors"
)

// Cursors is the PostgreSQL connectors.CursorStore: one row of connector_cursors per
// connector. Times come back in UTC, at the database's precision (microseconds).
type Cursors struct {
	db *DB
}

var _ connectors.CursorStore = (*Cursors)(nil)

// Cursors is the connectors' cursor store.
func (db *DB) Cursors() connectors.CursorStore { return &Cursors{db: db} }

const cursorColumns = `connector, position, last_poll_at, last_success_at, last_error, orders_seen, unreadable`

// saveCursorSQL writes the whole cursor: a field the caller cleared is cleared.
const saveCursorSQL = `
INSERT INTO connector_cursors (` + cursorColumns + `, updated_at)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
ON CONFLICT (connector) DO UPDATE SET
	position = EXCLUDED.position,
	last_poll_at = EXCLUDED.last_poll_at,
	last_success_at = EXCLUDED.last_success_at,
	last_error = EXCLUDED.last_error,
	orders_seen = EXCLUDED.orders_seen,
	unreadable = EXCLUDED.unreadable,
	updated_at = EXCLUDED.updated_at`

func scanCursor(row pgx.Row) (connectors.Cursor, error) {
	var (
		c        connectors.Cursor
		position *time.Time
	)
	if err := row.Scan(&c.Connector, &position, &c.LastPollAt, &c.LastSuccessAt, &c.LastError, &c.OrdersSeen, &c.Unreadable); err != nil {
		return connectors.Cursor{}, err
	}
	if position != nil {
		c.Position = position.UTC()
	}
	c.LastPollAt = utcPtr(c.LastPollAt)
	c.LastSuccessAt = utcPtr(c.LastSuccessAt)
	return c, nil
}

func utcPtr(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC()
	return &u
}

// Cursor returns the connector's cursor, or the zero Cursor with Connector set when
// it has none yet. One round trip.
func (s *Cursors) Cursor(ctx context.Context, connector string) (connectors.Cursor, error) {
	c, err := scanCursor(s.db.pool.QueryRow(ctx, `SELECT `+cursorColumns+` FROM connector_cursors WHERE connector = $1`, connector))
	if errors.Is(err, pgx.ErrNoRows) {
		return connectors.Cursor{Connector: connector}, nil
	}
	if err != nil {
		return connectors.Cursor{}, fmt.Errorf("postgres: read the cursor of %s: %w", connector, interpretError(err))
	}
	return c, nil
}

// SaveCursor writes the whole cursor, inserting it or replacing the saved one
// (INSERT … ON CONFLICT (connector) DO UPDATE); a zero Position is stored as NULL.
// One round trip.
func (s *Cursors) SaveCursor(ctx context.Context, c connectors.Cursor) error {
	if c.Connector == "" {
		return errors.New("postgres: save cursor: the connector name is required")
	}
	if c.OrdersSeen < 0 || c.Unreadable < 0 {
		return fmt.Errorf("postgres: save the cursor of %s: counts must not be negative (orders seen %d, unreadable %d)",
			c.Connector, c.OrdersSeen, c.Unreadable)
	}
	var position *time.Time
	if !c.Position.IsZero() {
		p := c.Position.UTC()
		position = &p
	}
	_, err := s.db.pool.Exec(ctx, saveCursorSQL, c.Connector, position, utcPtr(c.LastPollAt), utcPtr(c.LastSuccessAt),
		c.LastError, c.OrdersSeen, c.Unreadable, s.db.nowUTC())
	if err != nil {
		return fmt.Errorf("postgres: save the cursor of %s: %w", c.Connector, interpretError(err))
	}
	return nil
}

// Cursors lists every connector's cursor, by name. One round trip.
func (s *Cursors) Cursors(ctx context.Context) ([]connectors.Cursor, error) {
	rows, err := s.db.pool.Query(ctx, `SELECT `+cursorColumns+` FROM connector_cursors ORDER BY connector COLLATE "C"`)
	if err != nil {
		return nil, fmt.Errorf("postgres: list cursors: %w", interpretError(err))
	}
	cs, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (connectors.Cursor, error) { return scanCursor(row) })
	if err != nil {
		return nil, fmt.Errorf("postgres: list cursors: %w", interpretError(err))
	}
	return cs, nil
}
