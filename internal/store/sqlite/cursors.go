package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/ordersync/ordersync/connectors"
)

// Cursors is the SQLite connectors.CursorStore: one row of connector_cursors per
// connector. Times come back in UTC, to the microsecond.
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
VALUES (?, ?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (connector) DO UPDATE SET
	position = excluded.position,
	last_poll_at = excluded.last_poll_at,
	last_success_at = excluded.last_success_at,
	last_error = excluded.last_error,
	orders_seen = excluded.orders_seen,
	unreadable = excluded.unreadable,
	updated_at = excluded.updated_at`

func scanCursor(row rowScanner) (connectors.Cursor, error) {
	var (
		c                            connectors.Cursor
		position, lastPoll, lastSucc sql.NullInt64
	)
	if err := row.Scan(&c.Connector, &position, &lastPoll, &lastSucc, &c.LastError, &c.OrdersSeen, &c.Unreadable); err != nil {
		return connectors.Cursor{}, err
	}
	if position.Valid {
		c.Position = fromTS(position.Int64)
	}
	c.LastPollAt = nullTS(lastPoll)
	c.LastSuccessAt = nullTS(lastSucc)
	return c, nil
}

// tsPtr stores an optional time: nil is NULL.
func tsPtr(t *time.Time) *int64 {
	if t == nil {
		return nil
	}
	us := ts(*t)
	return &us
}

// Cursor returns the connector's cursor, or the zero Cursor with Connector set when
// it has none yet.
func (s *Cursors) Cursor(ctx context.Context, connector string) (connectors.Cursor, error) {
	c, err := scanCursor(s.db.sql.QueryRowContext(ctx, `SELECT `+cursorColumns+` FROM connector_cursors WHERE connector = ?`, connector))
	if errors.Is(err, sql.ErrNoRows) {
		return connectors.Cursor{Connector: connector}, nil
	}
	if err != nil {
		return connectors.Cursor{}, fmt.Errorf("sqlite: read the cursor of %s: %w", connector, err)
	}
	return c, nil
}

// SaveCursor writes the whole cursor, inserting it or replacing the saved one
// (INSERT … ON CONFLICT (connector) DO UPDATE); a zero Position is stored as NULL.
func (s *Cursors) SaveCursor(ctx context.Context, c connectors.Cursor) error {
	if c.Connector == "" {
		return errors.New("sqlite: save cursor: the connector name is required")
	}
	if c.OrdersSeen < 0 || c.Unreadable < 0 {
		return fmt.Errorf("sqlite: save the cursor of %s: counts must not be negative (orders seen %d, unreadable %d)",
			c.Connector, c.OrdersSeen, c.Unreadable)
	}
	var position *int64
	if !c.Position.IsZero() {
		position = tsPtr(&c.Position)
	}
	err := s.db.write(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, saveCursorSQL, c.Connector, position, tsPtr(c.LastPollAt), tsPtr(c.LastSuccessAt),
			c.LastError, c.OrdersSeen, c.Unreadable, ts(s.db.nowUTC()))
		return err
	})
	if err != nil {
		return fmt.Errorf("sqlite: save the cursor of %s: %w", c.Connector, err)
	}
	return nil
}

// Cursors lists every connector's cursor, by name (byte order).
func (s *Cursors) Cursors(ctx context.Context) ([]connectors.Cursor, error) {
	rows, err := s.db.sql.QueryContext(ctx, `SELECT `+cursorColumns+` FROM connector_cursors ORDER BY connector`)
	if err != nil {
		return nil, fmt.Errorf("sqlite: list cursors: %w", err)
	}
	defer rows.Close()
	var cs []connectors.Cursor
	for rows.Next() {
		c, err := scanCursor(rows)
		if err != nil {
			return nil, fmt.Errorf("sqlite: list cursors: %w", err)
		}
		cs = append(cs, c)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: list cursors: %w", err)
	}
	return cs, nil
}
