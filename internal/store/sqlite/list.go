package sqlite

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/shopspring/decimal"
	"modernc.org/sqlite"

	"github.com/ordersync/ordersync/internal/journal"
)

// The accountant's list in SQLite (migrations/sqlite/0011_accountant_list.sql): the
// order's date, total and currency and the broad search's text are columns the store
// writes with journal.Derive wherever the payload or the result is written, so a
// period, a search and a period's totals are answered in SQL.

func init() {
	// The migration that added the columns fills them for the rows already stored
	// with this; nothing else in the schema uses it.
	sqlite.MustRegisterDeterministicScalarFunction("ordersync_derive", 6, func(_ *sqlite.FunctionContext, args []driver.Value) (driver.Value, error) {
		var result *journal.Result
		if r := textArg(args[5]); r != "" {
			var res journal.Result
			if json.Unmarshal([]byte(r), &res) == nil {
				result = &res
			}
		}
		d := derivedOf(textArg(args[1]), textArg(args[2]), textArg(args[3]), textArg(args[4]), result)
		switch textArg(args[0]) {
		case "order_created_at":
			return d.orderAt, nil
		case "order_total":
			return d.total, nil
		case "currency":
			return d.currency, nil
		case "search_text":
			return d.search, nil
		}
		return nil, fmt.Errorf("ordersync_derive: no column %q", textArg(args[0]))
	})
}

// derived is journal.Derive as the columns hold it: order_created_at (microseconds or
// NULL), order_total (the exact decimal as text, or NULL), currency, search_text.
type derived struct {
	orderAt  any
	total    any
	currency string
	search   string
}

func derivedOf(key, source, externalID, payload string, result *journal.Result) derived {
	d := journal.Derive(key, source, externalID, json.RawMessage(payload), result)
	out := derived{currency: d.Currency, search: d.SearchText}
	if d.OrderCreatedAt != nil {
		out.orderAt = ts(*d.OrderCreatedAt)
	}
	if d.Total != nil {
		out.total = d.Total.String()
	}
	return out
}

// likeEscape escapes s for a LIKE pattern with ESCAPE '\'.
func likeEscape(s string) string {
	return strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`).Replace(s)
}

// searchSQL is List's condition for the broad search (journal.SearchMatches), with its
// arguments; "" for a blank term. search_text is lower-cased by Go, and the term
// with it; LIKE is then used for its substring, not for its case folding, so the
// pattern is matched case-sensitively.
func searchSQL(term string) (string, []any) {
	n := journal.NeedlesOf(term)
	if n.Text == "" {
		return "", nil
	}
	cond := `instr(search_text, ?) > 0`
	args := []any{n.Text}
	if n.Digits != "" {
		cond += ` OR instr(search_text, ?) > 0`
		args = append(args, n.Digits)
	}
	if n.Amount != nil {
		cond += ` OR order_total = ?`
		args = append(args, n.Amount.String())
	}
	return ` AND (` + cond + `)`, args
}

// listWhere is the condition of List and Totals for f (After and Limit aside), with
// its arguments. ErrorContains is matched in Go by the
// caller (SQLite's lower() folds ASCII only): here only its prefilter.
func listWhere(f journal.Filter) (string, []any) {
	q := ``
	var args []any
	add := func(cond string, a ...any) {
		q += ` AND ` + cond
		args = append(args, a...)
	}
	if f.Status != "" {
		add(`status = ?`, string(f.Status))
	}
	if f.Source != "" {
		add(`source = ?`, f.Source)
	}
	if f.Kind != "" {
		add(`kind = ?`, f.Kind)
	}
	if !f.Since.IsZero() {
		// The stored microsecond at or after Since: a Since between two microseconds
		// must not admit the earlier one.
		add(`updated_at >= ?`, ceilTS(f.Since))
	}
	if !f.CreatedFrom.IsZero() {
		add(`created_at >= ?`, ceilTS(f.CreatedFrom))
	}
	if !f.CreatedBefore.IsZero() {
		// A stored microsecond is before CreatedBefore exactly when it is before the
		// first stored microsecond at or after it.
		add(`created_at < ?`, ceilTS(f.CreatedBefore))
	}
	if !f.OrderedFrom.IsZero() {
		add(`coalesce(order_created_at, created_at) >= ?`, ceilTS(f.OrderedFrom))
	}
	if !f.OrderedBefore.IsZero() {
		add(`coalesce(order_created_at, created_at) < ?`, ceilTS(f.OrderedBefore))
	}
	if cond, qargs := querySQL(f.Query); cond != "" {
		q += cond
		args = append(args, qargs...)
	}
	if cond, sargs := searchSQL(f.Search); cond != "" {
		q += cond
		args = append(args, sargs...)
	}
	if len(f.Keys) > 0 {
		add(`key IN (`+strings.TrimSuffix(strings.Repeat("?,", len(f.Keys)), ",")+`)`, anys(f.Keys)...)
	}
	if f.ErrorContains != "" {
		add(`last_error <> ''`)
	}
	if f.WarningsOnly {
		add(`warnings IS NOT NULL`)
	}
	return q, args
}

func anys(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}

// Totals groups the operations f keeps by kind, status, their cancel operation's
// status and currency. The totals are summed here as exact decimals (SQLite would sum
// the text as floating point), one small row per operation.
func (j *Journal) Totals(ctx context.Context, f journal.Filter) ([]journal.TotalGroup, error) {
	if err := f.Check(); err != nil {
		return nil, fmt.Errorf("sqlite: totals: %w", err)
	}
	where, args := listWhere(f)
	q := `SELECT o.kind, o.status, coalesce(c.status, ''), o.currency, o.order_total, o.last_error
		FROM (SELECT key, kind, status, currency, order_total, last_error FROM operations WHERE 1` + where + `) o
		LEFT JOIN operations c
			ON substr(o.key, -7) = ':create' AND c.key = substr(o.key, 1, length(o.key) - length(':create')) || ':cancel'`
	rows, err := j.db.sql.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("sqlite: totals: %w", err)
	}
	defer rows.Close()
	needle := strings.ToLower(f.ErrorContains)
	type group struct {
		kind, status, cancel, currency string
	}
	var order []group
	sums := map[group]*journal.TotalGroup{}
	for rows.Next() {
		var (
			g         group
			total     sql.NullString
			lastError string
		)
		if err := rows.Scan(&g.kind, &g.status, &g.cancel, &g.currency, &total, &lastError); err != nil {
			return nil, fmt.Errorf("sqlite: totals: %w", err)
		}
		if needle != "" && !strings.Contains(strings.ToLower(lastError), needle) {
			continue
		}
		s, ok := sums[g]
		if !ok {
			s = &journal.TotalGroup{Kind: g.kind, Status: journal.Status(g.status), CancelStatus: journal.Status(g.cancel), Currency: g.currency}
			sums[g] = s
			order = append(order, g)
		}
		s.Count++
		if total.Valid {
			d, err := decimal.NewFromString(total.String)
			if err != nil {
				return nil, fmt.Errorf("sqlite: totals: order_total %q: %w", total.String, err)
			}
			s.Sum = s.Sum.Add(d)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: totals: %w", err)
	}
	out := make([]journal.TotalGroup, len(order))
	for i, g := range order {
		out[i] = *sums[g]
	}
	return out, nil
}

// RecordOneC writes what a reconciliation saw of each operation in 1C, in one
// transaction; keys the journal does not hold are skipped.
func (j *Journal) RecordOneC(ctx context.Context, seen []journal.OneCSeen) error {
	if len(seen) == 0 {
		return nil
	}
	err := j.db.write(ctx, func(tx *sql.Tx) error {
		for _, s := range seen {
			b, err := json.Marshal(s)
			if err != nil {
				return err
			}
			if _, err := tx.ExecContext(ctx, `UPDATE operations SET onec_seen = ? WHERE key = ?`, string(b), s.Key); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("sqlite: record what 1C held: %w", err)
	}
	return nil
}

// decodeOneCSeen reads the onec_seen column.
func decodeOneCSeen(key string, v sql.NullString) (*journal.OneCSeen, error) {
	if !v.Valid || v.String == "" {
		return nil, nil
	}
	var s journal.OneCSeen
	if err := json.Unmarshal([]byte(v.String), &s); err != nil {
		return nil, fmt.Errorf("operation %s: onec_seen: %w", key, err)
	}
	s.Key = key
	s.SeenAt = s.SeenAt.UTC()
	return &s, nil
}
