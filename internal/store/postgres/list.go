package postgres

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/shopspring/decimal"

	"github.com/ordersync/ordersync/internal/journal"
)

// The accountant's list in PostgreSQL (migrations/postgres/0013_accountant_list.sql,
// 0016_derived_by_go.sql): the order's date, total and currency and the broad
// search's text are columns of their own, written by journal.Derive (derivedOf) with
// every write of a payload or a result — a registration, an inbox delivery, a
// verdict, a revision — so a period, a search and a period's totals are answered in
// SQL.

// listWhere is the condition of List and Totals for f (After and Limit aside): a WITH
// clause to put before the statement ("" when none) and the conditions to AND to its
// WHERE. arg binds a value and returns its placeholder.
func listWhere(f journal.Filter, arg func(any) string) (with, where string) {
	q := ``
	if f.Status != "" {
		q += ` AND status = ` + arg(string(f.Status))
	}
	if f.Source != "" {
		q += ` AND source = ` + arg(f.Source)
	}
	if f.Kind != "" {
		q += ` AND kind = ` + arg(f.Kind)
	}
	if !f.Since.IsZero() {
		q += ` AND updated_at >= ` + arg(f.Since)
	}
	// The period's bounds go up to the next microsecond, the server's precision: it
	// would round a bound between two microseconds to the nearer one, and admit the
	// earlier one at CreatedFrom or drop it at CreatedBefore.
	if !f.CreatedFrom.IsZero() {
		q += ` AND created_at >= ` + arg(ceilMicro(f.CreatedFrom))
	}
	if !f.CreatedBefore.IsZero() {
		q += ` AND created_at < ` + arg(ceilMicro(f.CreatedBefore))
	}
	// The order's date, or the registration's for an operation whose payload names
	// none: the expression of operations_ordered_idx.
	if !f.OrderedFrom.IsZero() {
		q += ` AND coalesce(order_created_at, created_at) >= ` + arg(ceilMicro(f.OrderedFrom))
	}
	if !f.OrderedBefore.IsZero() {
		q += ` AND coalesce(order_created_at, created_at) < ` + arg(ceilMicro(f.OrderedBefore))
	}
	if term := strings.TrimSpace(f.Query); term != "" {
		// The operations a term names are found first, by their indexes, and only
		// then ordered and paged: inline, the planner walks the updated_at index
		// and filters every row when a term names nothing.
		with = `WITH hits AS MATERIALIZED (SELECT key FROM operations WHERE ` + querySQL(term, arg) + `) `
		q += ` AND key = ANY (ARRAY(SELECT key FROM hits))`
	}
	if cond := searchSQL(f.Search, arg); cond != "" {
		q += ` AND (` + cond + `)`
	}
	if len(f.Keys) > 0 {
		q += ` AND key = ANY (` + arg(f.Keys) + `)`
	}
	if f.ErrorContains != "" {
		q += ` AND strpos(lower(last_error), lower(` + arg(f.ErrorContains) + `)) > 0`
	}
	if f.WarningsOnly {
		q += ` AND warnings IS NOT NULL`
	}
	return with, q
}

// searchSQL is the condition for the broad search (journal.SearchMatches), "" for a
// blank term: a substring of search_text (LIKE '%…%', which the trigram index
// answers where pg_trgm is installed), a phone-like term's digits too, and an amount
// equal to the order's total. The term is lower-cased by Go, as search_text is.
func searchSQL(term string, arg func(any) string) string {
	n := journal.NeedlesOf(term)
	if n.Text == "" {
		return ""
	}
	like := func(s string) string {
		return `search_text LIKE ` + arg("%"+likeEscape(s)+"%")
	}
	cond := like(n.Text)
	if n.Digits != "" {
		cond += ` OR ` + like(n.Digits)
	}
	if n.Amount != nil {
		cond += ` OR order_total = ` + arg(n.Amount.String()) + `::numeric`
	}
	return cond
}

// likeEscape escapes s for a LIKE pattern (the default escape, a backslash).
func likeEscape(s string) string {
	return strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`).Replace(s)
}

// Totals groups the operations f keeps by kind, status, the status of their cancel
// operation and currency, with their count and the sum of their totals, in one
// statement: the sum is numeric, exact.
func (j *Journal) Totals(ctx context.Context, f journal.Filter) ([]journal.TotalGroup, error) {
	if err := f.Check(); err != nil {
		return nil, fmt.Errorf("postgres: totals: %w", err)
	}
	var args []any
	arg := func(v any) string {
		args = append(args, v)
		return "$" + strconv.Itoa(len(args))
	}
	with, where := listWhere(f, arg)
	q := with + `SELECT o.kind, o.status, coalesce(c.status, ''), o.currency, count(*), coalesce(sum(o.order_total), 0)::text
		FROM (SELECT key, kind, status, currency, order_total FROM operations WHERE true` + where + `) o
		LEFT JOIN operations c ON right(o.key, 7) = ':create' AND c.key = left(o.key, -7) || ':cancel'
		GROUP BY 1, 2, 3, 4 ORDER BY 1, 2, 3, 4`
	rows, err := j.db.pool.Query(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("postgres: totals: %w", interpretError(err))
	}
	groups, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (journal.TotalGroup, error) {
		var (
			g                   journal.TotalGroup
			status, cancel, sum string
		)
		if err := row.Scan(&g.Kind, &status, &cancel, &g.Currency, &g.Count, &sum); err != nil {
			return g, err
		}
		g.Status, g.CancelStatus = journal.Status(status), journal.Status(cancel)
		var err error
		g.Sum, err = decimal.NewFromString(sum)
		return g, err
	})
	if err != nil {
		return nil, fmt.Errorf("postgres: totals: %w", interpretError(err))
	}
	return groups, nil
}

// RecordOneC writes what a reconciliation saw of each operation in 1C, in one
// statement; keys the journal does not hold are skipped.
func (j *Journal) RecordOneC(ctx context.Context, seen []journal.OneCSeen) error {
	if len(seen) == 0 {
		return nil
	}
	keys := make([]string, len(seen))
	docs := make([]string, len(seen))
	for i, s := range seen {
		b, err := json.Marshal(s)
		if err != nil {
			return fmt.Errorf("postgres: record what 1C held of %s: %w", s.Key, err)
		}
		keys[i], docs[i] = s.Key, string(b)
	}
	_, err := j.db.pool.Exec(ctx, `UPDATE operations o SET onec_seen = s.doc::jsonb
		FROM unnest($1::text[], $2::text[]) AS s (key, doc) WHERE o.key = s.key`, keys, docs)
	if err != nil {
		return fmt.Errorf("postgres: record what 1C held: %w", interpretError(err))
	}
	return nil
}

// decodeOneCSeen reads the onec_seen column.
func decodeOneCSeen(key string, b []byte) (*journal.OneCSeen, error) {
	if len(b) == 0 {
		return nil, nil
	}
	var s journal.OneCSeen
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("operation %s: onec_seen: %w", key, err)
	}
	s.Key = key
	s.SeenAt = s.SeenAt.UTC()
	return &s, nil
}
