package sqlite

import (
	"database/sql/driver"
	"encoding/json"
	"strings"
	"time"
	"unicode"

	"modernc.org/sqlite"

	"github.com/ordersync/ordersync/internal/journal"
)

// Search (journal.Filter.Query) in SQLite. The key, the external ids and the payload's
// number, marketplace id and fetch id are answered from expression indexes on the
// columns and on json_extract (migrations/sqlite/0008_accountant_journal.sql). What
// SQLite's SQL cannot compute — a Unicode case fold (its lower() folds ASCII only,
// and 1C numbers are Cyrillic) and a phone's digits (it has no regexp_replace) — is
// kept in columns the store writes with the payload and the result: search_phone,
// search_result_number and search_result_ref, filled by searchPhone and fold, the
// same functions the search term goes through.

func init() {
	// The migration that added the search columns fills them for the rows already
	// stored with these; nothing else in the schema uses them.
	sqlite.MustRegisterDeterministicScalarFunction("ordersync_phone_tail", 1, func(_ *sqlite.FunctionContext, args []driver.Value) (driver.Value, error) {
		return searchPhone(textArg(args[0])), nil
	})
	sqlite.MustRegisterDeterministicScalarFunction("ordersync_fold", 1, func(_ *sqlite.FunctionContext, args []driver.Value) (driver.Value, error) {
		return fold(textArg(args[0])), nil
	})
}

func textArg(v driver.Value) string {
	switch v := v.(type) {
	case string:
		return v
	case []byte:
		return string(v)
	}
	return ""
}

// phoneTail is what phones are compared by (journal.SamePhone): the last ten digits
// when there are ten or more, all of them otherwise.
func phoneTail(digits string) string {
	if len(digits) > 10 {
		return digits[len(digits)-10:]
	}
	return digits
}

// searchPhone is the search_phone of a payload: the tail of its customer phone's
// digits, read as journal.TermsOf reads it; "" when it has none.
func searchPhone(payload string) string {
	return phoneTail(journal.TermsOf(journal.Operation{Payload: json.RawMessage(payload)}).Phone)
}

// fold is s case-folded so that fold(a) == fold(b) exactly when strings.EqualFold(a,
// b): each rune becomes the smallest rune of its case-folding orbit.
func fold(s string) string {
	var b strings.Builder
	b.Grow(len(s))
	for _, r := range s {
		m := r
		for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
			m = min(m, f)
		}
		b.WriteRune(m)
	}
	return b.String()
}

// resultSearch is the search_result_number and search_result_ref of a result.
func resultSearch(r *journal.Result) (number, ref string) {
	if r == nil {
		return "", ""
	}
	return fold(r.Number), fold(r.Ref)
}

// querySQL is the condition of List for a search term (journal.Matches), with its
// arguments; "" when the term is empty. Each branch is answered by one index.
func querySQL(q string) (string, []any) {
	q = strings.TrimSpace(q)
	if q == "" {
		return "", nil
	}
	cond := `key = ?
		OR external_id = ?
		OR (source <> '' AND external_id <> '' AND source || ':' || external_id = ?)
		OR (json_extract(payload, '$.number') = ? AND json_type(payload, '$.number') = 'text')
		OR (json_extract(payload, '$.marketplace_id') = ? AND json_type(payload, '$.marketplace_id') = 'text')
		OR (json_extract(payload, '$.fetch.id') = ? AND json_type(payload, '$.fetch.id') = 'text')
		OR (search_result_number <> '' AND search_result_number = ?)
		OR (search_result_ref <> '' AND search_result_ref = ?)`
	f := fold(q)
	args := []any{q, q, q, q, q, q, f, f}
	if d := journal.QueryPhone(q); d != "" {
		cond += `
		OR (search_phone <> '' AND search_phone = ?)`
		args = append(args, phoneTail(d))
	}
	return ` AND (` + cond + `)`, args
}

// ceilTS is the first stored microsecond at or after t: a bound between two
// microseconds must not admit the earlier one.
func ceilTS(t time.Time) int64 {
	u := t.UTC().Truncate(time.Microsecond)
	if u.Before(t) {
		u = u.Add(time.Microsecond)
	}
	return ts(u)
}
