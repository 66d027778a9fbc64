package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/ordersync/ordersync/internal/journal"
)

var _ journal.Counter = (*Journal)(nil)

// Counts counts the operations by kind, source and status in one query (a scan of
// the table: the admin listener runs it on a timer, not per scrape).
func (j *Journal) Counts(ctx context.Context) ([]journal.Count, error) {
	rows, err := j.db.pool.Query(ctx, `SELECT kind, source, status, count(*) FROM operations
		GROUP BY kind, source, status ORDER BY kind, source, status`)
	if err != nil {
		return nil, fmt.Errorf("postgres: count operations: %w", interpretError(err))
	}
	cs, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (journal.Count, error) {
		var c journal.Count
		err := row.Scan(&c.Kind, &c.Source, &c.Status, &c.Operations)
		return c, err
	})
	if err != nil {
		return nil, fmt.Errorf("postgres: count operations: %w", interpretError(err))
	}
	return cs, nil
}
