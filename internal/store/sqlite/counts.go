package sqlite

import (
	"context"
	"fmt"

	"github.com/ordersync/ordersync/internal/journal"
)

var _ journal.Counter = (*Journal)(nil)

// Counts counts the operations by kind, source and status in one query (a scan of
// the table: the admin listener runs it on a timer, not per scrape).
func (j *Journal) Counts(ctx context.Context) ([]journal.Count, error) {
	rows, err := j.db.sql.QueryContext(ctx, `SELECT kind, source, status, count(*) FROM operations
		GROUP BY kind, source, status ORDER BY kind, source, status`)
	if err != nil {
		return nil, fmt.Errorf("sqlite: count operations: %w", err)
	}
	defer rows.Close()
	var cs []journal.Count
	for rows.Next() {
		var c journal.Count
		if err := rows.Scan(&c.Kind, &c.Source, &c.Status, &c.Operations); err != nil {
			return nil, fmt.Errorf("sqlite: count operations: %w", err)
		}
		cs = append(cs, c)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: count operations: %w", err)
	}
	return cs, nil
}
