package postgres

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/ordersync/ordersync/internal/payouts"
)

// Payouts is the PostgreSQL payouts.Store: the marketplaces' financial lines, kept
// once per (source, line_id), and the record of each reading. Amounts are numeric,
// exact, with their scale; times come back in UTC, to the microsecond.
type Payouts struct {
	db *DB
}

var _ payouts.Store = (*Payouts)(nil)

// Payouts is the payout lines' store.
func (db *DB) Payouts() payouts.Store { return &Payouts{db: db} }

// saveLinesSQL writes a batch in one statement: the columns come as arrays (the
// decimals as text, cast to numeric: pgx has no encoding of shopspring's decimal),
// and a line already kept — or twice in the batch — is left as it is.
const saveLinesSQL = `INSERT INTO payout_lines (source, line_id, type, kind, date, order_id, sku, quantity, currency,
    amount, accrued_for_sale, commission, logistics, penalty, other, raw, fetched_at)
SELECT u.source, u.line_id, u.type, u.kind, u.date, u.order_id, u.sku, u.quantity::numeric, u.currency,
    u.amount::numeric, u.accrued::numeric, u.commission::numeric, u.logistics::numeric, u.penalty::numeric,
    u.other::numeric, u.raw::json, $17
FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::timestamptz[], $6::text[], $7::text[], $8::text[],
    $9::text[], $10::text[], $11::text[], $12::text[], $13::text[], $14::text[], $15::text[], $16::text[])
    WITH ORDINALITY AS u (source, line_id, type, kind, date, order_id, sku, quantity, currency,
    amount, accrued, commission, logistics, penalty, other, raw, n)
ORDER BY u.n
ON CONFLICT (source, line_id) DO NOTHING`

// SaveLines writes lines idempotently by (Source, LineID), refusing the whole batch
// when one does not Validate (payouts.CheckLines).
func (p *Payouts) SaveLines(ctx context.Context, lines []payouts.Line) (payouts.Saved, error) {
	if err := payouts.CheckLines(lines); err != nil {
		return payouts.Saved{}, err
	}
	if len(lines) == 0 {
		return payouts.Saved{}, nil
	}
	n := len(lines)
	var (
		sources, ids, types, kinds = make([]string, n), make([]string, n), make([]string, n), make([]string, n)
		dates                      = make([]time.Time, n)
		orders, skus, currencies   = make([]string, n), make([]string, n), make([]string, n)
		quantities, raws           = make([]*string, n), make([]*string, n)
		amounts, accrued, comm     = make([]string, n), make([]string, n), make([]string, n)
		logistics, penalty, other  = make([]string, n), make([]string, n), make([]string, n)
	)
	for i, l := range lines {
		sources[i], ids[i], types[i], kinds[i] = l.Source, l.LineID, l.Type, string(l.Kind)
		dates[i] = l.Date.UTC().Truncate(time.Microsecond)
		orders[i], skus[i], currencies[i] = l.OrderID, l.SKU, l.Currency
		if l.Quantity != nil {
			q := payouts.DecimalText(*l.Quantity)
			quantities[i] = &q
		}
		if len(l.Raw) > 0 {
			r := string(l.Raw)
			raws[i] = &r
		}
		amounts[i], accrued[i], comm[i] = payouts.DecimalText(l.Amount), payouts.DecimalText(l.AccruedForSale), payouts.DecimalText(l.Commission)
		logistics[i], penalty[i], other[i] = payouts.DecimalText(l.Logistics), payouts.DecimalText(l.Penalty), payouts.DecimalText(l.Other)
	}
	tag, err := p.db.pool.Exec(ctx, saveLinesSQL, sources, ids, types, kinds, dates, orders, skus, quantities, currencies,
		amounts, accrued, comm, logistics, penalty, other, raws, p.db.nowUTC())
	if err != nil {
		return payouts.Saved{}, fmt.Errorf("postgres: save payout lines: %w", describePgError(interpretError(err)))
	}
	ins := int(tag.RowsAffected())
	return payouts.Saved{Inserted: ins, Repeated: n - ins}, nil
}

const lineColumns = `source, line_id, type, kind, date, order_id, sku, quantity::text, currency, amount::text,
    accrued_for_sale::text, commission::text, logistics::text, penalty::text, other::text, raw::text, fetched_at`

// Lines returns the lines q selects, by date, then line id.
func (p *Payouts) Lines(ctx context.Context, q payouts.Query) ([]payouts.Line, error) {
	sql := `SELECT ` + lineColumns + ` FROM payout_lines WHERE ($1 = '' OR source = $1)`
	args := []any{q.Source}
	if len(q.OrderIDs) > 0 {
		sql += ` AND order_id = ANY ($2::text[])`
		args = append(args, q.OrderIDs)
	} else {
		sql += ` AND ($2::timestamptz IS NULL OR date >= $2) AND ($3::timestamptz IS NULL OR date < $3)`
		args = append(args, microPtr(&q.From), microPtr(&q.To))
	}
	sql += ` ORDER BY date, line_id, source`
	rows, err := p.db.pool.Query(ctx, sql, args...)
	if err != nil {
		return nil, fmt.Errorf("postgres: payout lines: %w", interpretError(err))
	}
	defer rows.Close()
	var out []payouts.Line
	for rows.Next() {
		var (
			l                                     payouts.Line
			kind                                  string
			qty, raw                              *string
			amount, accrued, comm, logi, pen, oth string
		)
		if err := rows.Scan(&l.Source, &l.LineID, &l.Type, &kind, &l.Date, &l.OrderID, &l.SKU, &qty, &l.Currency,
			&amount, &accrued, &comm, &logi, &pen, &oth, &raw, &l.FetchedAt); err != nil {
			return nil, fmt.Errorf("postgres: payout lines: %w", err)
		}
		l.Kind = payouts.Kind(kind)
		l.Date, l.FetchedAt = l.Date.UTC(), l.FetchedAt.UTC()
		if err := payouts.ReadStored(&l, qty, amount, accrued, comm, logi, pen, oth); err != nil {
			return nil, fmt.Errorf("postgres: payout line %s %s: %w", l.Source, l.LineID, err)
		}
		if raw != nil {
			l.Raw = json.RawMessage(*raw)
		}
		out = append(out, l)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("postgres: payout lines: %w", interpretError(err))
	}
	return out, nil
}

// RecordFetch keeps a reading's record.
func (p *Payouts) RecordFetch(ctx context.Context, f payouts.Fetch) error {
	if f.Source == "" {
		return fmt.Errorf("postgres: record a payout fetch: source is required")
	}
	var total *string
	if f.Total != nil {
		t := payouts.DecimalText(*f.Total)
		total = &t
	}
	started := f.StartedAt
	if started.IsZero() {
		started = p.db.nowUTC()
	}
	_, err := p.db.pool.Exec(ctx, `
INSERT INTO payout_fetches (source, period_from, period_to, origin, started_at, finished_at, inserted, repeated, total, error)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9::numeric, $10)`,
		f.Source, microPtr(&f.From), microPtr(&f.To), f.Origin, started.UTC().Truncate(time.Microsecond),
		microPtr(&f.FinishedAt), f.Saved.Inserted, f.Saved.Repeated, total, f.Error)
	if err != nil {
		return fmt.Errorf("postgres: record a payout fetch of %s: %w", f.Source, interpretError(err))
	}
	return nil
}

// LastFetches returns the latest reading of each source, by source.
func (p *Payouts) LastFetches(ctx context.Context) ([]payouts.Fetch, error) {
	return p.fetches(ctx, `
SELECT DISTINCT ON (source) `+fetchColumns+`
FROM payout_fetches ORDER BY source, started_at DESC, id DESC`)
}

// Fetches returns the latest limit readings of source, the newest first.
func (p *Payouts) Fetches(ctx context.Context, source string, limit int) ([]payouts.Fetch, error) {
	return p.fetches(ctx, `
SELECT `+fetchColumns+`
FROM payout_fetches WHERE source = $1 ORDER BY started_at DESC, id DESC LIMIT $2`, source, max(limit, 1))
}

const fetchColumns = `source, period_from, period_to, origin, started_at, finished_at, inserted, repeated, total::text, error`

func (p *Payouts) fetches(ctx context.Context, query string, args ...any) ([]payouts.Fetch, error) {
	rows, err := p.db.pool.Query(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("postgres: payout fetches: %w", interpretError(err))
	}
	fs, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (payouts.Fetch, error) {
		var (
			f                  payouts.Fetch
			from, to, finished *time.Time
			total              *string
		)
		if err := r.Scan(&f.Source, &from, &to, &f.Origin, &f.StartedAt, &finished, &f.Saved.Inserted,
			&f.Saved.Repeated, &total, &f.Error); err != nil {
			return f, err
		}
		f.StartedAt = f.StartedAt.UTC()
		f.From, f.To, f.FinishedAt = utcOrZero(from), utcOrZero(to), utcOrZero(finished)
		if total != nil {
			d, err := payouts.ParseDecimal(*total)
			if err != nil {
				return f, fmt.Errorf("total: %w", err)
			}
			f.Total = &d
		}
		return f, nil
	})
	if err != nil {
		return nil, fmt.Errorf("postgres: payout fetches: %w", interpretError(err))
	}
	return fs, nil
}

func utcOrZero(t *time.Time) time.Time {
	if t == nil {
		return time.Time{}
	}
	return t.UTC()
}
