package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/ordersync/ordersync/internal/payouts"
)

// Payouts is the SQLite payouts.Store, with the semantics of PostgreSQL's
// (internal/store/postgres/payouts.go). Amounts and quantities are TEXT, exact, with
// their scale; times come back in UTC, to the microsecond.
type Payouts struct {
	db *DB
}

var _ payouts.Store = (*Payouts)(nil)

// Payouts is the payout lines' store.
func (db *DB) Payouts() payouts.Store { return &Payouts{db: db} }

const saveLineSQL = `INSERT INTO payout_lines (source, line_id, type, kind, date, order_id, sku, quantity, currency,
    amount, accrued_for_sale, commission, logistics, penalty, other, raw, fetched_at)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (source, line_id) DO NOTHING`

// SaveLines writes lines in one write transaction, idempotently by (Source, LineID),
// refusing the whole batch when one does not Validate (payouts.CheckLines).
func (p *Payouts) SaveLines(ctx context.Context, lines []payouts.Line) (payouts.Saved, error) {
	if err := payouts.CheckLines(lines); err != nil {
		return payouts.Saved{}, err
	}
	if len(lines) == 0 {
		return payouts.Saved{}, nil
	}
	var saved payouts.Saved
	err := p.db.write(ctx, func(tx *sql.Tx) error {
		saved = payouts.Saved{}
		st, err := tx.PrepareContext(ctx, saveLineSQL)
		if err != nil {
			return err
		}
		defer st.Close()
		now := ts(p.db.nowUTC())
		for _, l := range lines {
			var qty, raw *string
			if l.Quantity != nil {
				q := payouts.DecimalText(*l.Quantity)
				qty = &q
			}
			if len(l.Raw) > 0 {
				r := string(l.Raw)
				raw = &r
			}
			res, err := st.ExecContext(ctx, l.Source, l.LineID, l.Type, string(l.Kind), ts(l.Date), l.OrderID, l.SKU, qty,
				l.Currency, payouts.DecimalText(l.Amount), payouts.DecimalText(l.AccruedForSale),
				payouts.DecimalText(l.Commission), payouts.DecimalText(l.Logistics), payouts.DecimalText(l.Penalty),
				payouts.DecimalText(l.Other), raw, now)
			if err != nil {
				return fmt.Errorf("line %s %s: %w", l.Source, l.LineID, err)
			}
			n, err := res.RowsAffected()
			if err != nil {
				return err
			}
			if n == 1 {
				saved.Inserted++
			} else {
				saved.Repeated++
			}
		}
		return nil
	})
	if err != nil {
		return payouts.Saved{}, fmt.Errorf("sqlite: save payout lines: %w", err)
	}
	return saved, nil
}

// Lines returns the lines q selects, by date, then line id.
func (p *Payouts) Lines(ctx context.Context, q payouts.Query) ([]payouts.Line, error) {
	var (
		where []string
		args  []any
	)
	if q.Source != "" {
		where, args = append(where, "source = ?"), append(args, q.Source)
	}
	if len(q.OrderIDs) > 0 {
		ids, err := json.Marshal(q.OrderIDs)
		if err != nil {
			return nil, err
		}
		where, args = append(where, "order_id IN (SELECT value FROM json_each(?))"), append(args, string(ids))
	} else {
		if !q.From.IsZero() {
			where, args = append(where, "date >= ?"), append(args, ts(q.From))
		}
		if !q.To.IsZero() {
			where, args = append(where, "date < ?"), append(args, ts(q.To))
		}
	}
	query := `SELECT source, line_id, type, kind, date, order_id, sku, quantity, currency, amount, accrued_for_sale,
    commission, logistics, penalty, other, raw, fetched_at FROM payout_lines`
	if len(where) > 0 {
		query += " WHERE " + strings.Join(where, " AND ")
	}
	query += " ORDER BY date, line_id, source"
	rows, err := p.db.sql.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("sqlite: payout lines: %w", err)
	}
	defer rows.Close()
	var out []payouts.Line
	for rows.Next() {
		var (
			l                                     payouts.Line
			kind                                  string
			date, fetched                         int64
			qty, raw                              sql.NullString
			amount, accrued, comm, logi, pen, oth string
		)
		if err := rows.Scan(&l.Source, &l.LineID, &l.Type, &kind, &date, &l.OrderID, &l.SKU, &qty, &l.Currency,
			&amount, &accrued, &comm, &logi, &pen, &oth, &raw, &fetched); err != nil {
			return nil, fmt.Errorf("sqlite: payout lines: %w", err)
		}
		l.Kind, l.Date, l.FetchedAt = payouts.Kind(kind), fromTS(date), fromTS(fetched)
		var qp *string
		if qty.Valid {
			qp = &qty.String
		}
		if err := payouts.ReadStored(&l, qp, amount, accrued, comm, logi, pen, oth); err != nil {
			return nil, fmt.Errorf("sqlite: payout line %s %s: %w", l.Source, l.LineID, err)
		}
		if raw.Valid {
			l.Raw = json.RawMessage(raw.String)
		}
		out = append(out, l)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: payout lines: %w", err)
	}
	return out, nil
}

// nullableTS is a time column's value, NULL for the zero time.
func nullableTS(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return ts(t)
}

// RecordFetch keeps a reading's record.
func (p *Payouts) RecordFetch(ctx context.Context, f payouts.Fetch) error {
	if f.Source == "" {
		return fmt.Errorf("sqlite: record a payout fetch: source is required")
	}
	var total any
	if f.Total != nil {
		total = payouts.DecimalText(*f.Total)
	}
	started := f.StartedAt
	if started.IsZero() {
		started = p.db.nowUTC()
	}
	err := p.db.write(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `
INSERT INTO payout_fetches (source, period_from, period_to, origin, started_at, finished_at, inserted, repeated, total, error)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			f.Source, nullableTS(f.From), nullableTS(f.To), f.Origin, ts(started), nullableTS(f.FinishedAt),
			f.Saved.Inserted, f.Saved.Repeated, total, f.Error)
		return err
	})
	if err != nil {
		return fmt.Errorf("sqlite: record a payout fetch of %s: %w", f.Source, err)
	}
	return nil
}

// LastFetches returns the latest reading of each source, by source.
func (p *Payouts) LastFetches(ctx context.Context) ([]payouts.Fetch, error) {
	return p.fetches(ctx, `
SELECT `+fetchColumns+`
FROM payout_fetches f
WHERE id = (SELECT id FROM payout_fetches g WHERE g.source = f.source ORDER BY started_at DESC, id DESC LIMIT 1)
ORDER BY source`)
}

// Fetches returns the latest limit readings of source, the newest first.
func (p *Payouts) Fetches(ctx context.Context, source string, limit int) ([]payouts.Fetch, error) {
	return p.fetches(ctx, `
SELECT `+fetchColumns+`
FROM payout_fetches WHERE source = ? ORDER BY started_at DESC, id DESC LIMIT ?`, source, max(limit, 1))
}

const fetchColumns = `source, period_from, period_to, origin, started_at, finished_at, inserted, repeated, total, error`

func (p *Payouts) fetches(ctx context.Context, query string, args ...any) ([]payouts.Fetch, error) {
	rows, err := p.db.sql.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("sqlite: payout fetches: %w", err)
	}
	defer rows.Close()
	var out []payouts.Fetch
	for rows.Next() {
		var (
			f                  payouts.Fetch
			from, to, finished sql.NullInt64
			started            int64
			total              sql.NullString
		)
		if err := rows.Scan(&f.Source, &from, &to, &f.Origin, &started, &finished, &f.Saved.Inserted,
			&f.Saved.Repeated, &total, &f.Error); err != nil {
			return nil, fmt.Errorf("sqlite: payout fetches: %w", err)
		}
		f.StartedAt = fromTS(started)
		for _, c := range []struct {
			v   sql.NullInt64
			dst *time.Time
		}{{from, &f.From}, {to, &f.To}, {finished, &f.FinishedAt}} {
			if c.v.Valid {
				*c.dst = fromTS(c.v.Int64)
			}
		}
		if total.Valid {
			d, err := payouts.ParseDecimal(total.String)
			if err != nil {
				return nil, fmt.Errorf("sqlite: payout fetch of %s: total: %w", f.Source, err)
			}
			f.Total = &d
		}
		out = append(out, f)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: payout fetches: %w", err)
	}
	return out, nil
}
