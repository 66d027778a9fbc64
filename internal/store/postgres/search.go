package postgres

import (
	"time"

	"github.com/ordersync/ordersync/internal/journal"
)

// querySQL is List's condition for a trimmed, non-empty search term: what
// journal.Matches answers, in SQL. Each branch of the OR repeats the expression of one
// index of migrations/postgres/0009_accountant_journal.sql exactly, so the planner
// answers it with a bitmap OR of index scans and a search never reads the whole
// journal. The payload's fields count only when they are JSON strings, as
// journal.TermsOf reads them (a number there is no order number to Go's decoder).
// arg binds a value and returns its placeholder.
func querySQL(term string, arg func(any) string) string {
	q, folded := arg(term), arg(term)
	cond := `key = ` + q + `
		OR external_id = ` + q + `
		OR (source <> '' AND external_id <> '' AND (source || ':' || external_id) = ` + q + `)
		OR ((payload ->> 'number') = ` + q + ` AND jsonb_typeof(payload -> 'number') = 'string')
		OR ((payload ->> 'marketplace_id') = ` + q + ` AND jsonb_typeof(payload -> 'marketplace_id') = 'string')
		OR ((payload -> 'fetch' ->> 'id') = ` + q + ` AND jsonb_typeof(payload -> 'fetch' -> 'id') = 'string')
		OR (result IS NOT NULL AND lower(result ->> 'number') = lower(` + folded + `))
		OR (result IS NOT NULL AND lower(result ->> 'ref') = lower(` + folded + `))`
	if d := journal.QueryPhone(term); d != "" {
		// Phones compare by their last ten digits when both have ten or more, whole
		// otherwise (journal.SamePhone): the index holds right(digits, 10), which is
		// all the digits of a shorter phone, so one equality with the term's own
		// tail answers both cases.
		cond += `
		OR (payload -> 'customer' ->> 'phone' IS NOT NULL
			AND jsonb_typeof(payload -> 'customer' -> 'phone') = 'string'
			AND right(regexp_replace(payload -> 'customer' ->> 'phone', '[^0-9]', '', 'g'), 10) = ` + arg(phoneTail(d)) + `)`
	}
	return cond
}

// phoneTail is what phones are compared by (journal.SamePhone): the last ten digits
// when there are ten or more, all of them otherwise.
func phoneTail(digits string) string {
	if len(digits) > 10 {
		return digits[len(digits)-10:]
	}
	return digits
}

// ceilMicro is the first microsecond at or after t, in UTC.
func ceilMicro(t time.Time) time.Time {
	u := t.UTC().Truncate(time.Microsecond)
	if u.Before(t) {
		u = u.Add(time.Microsecond)
	}
	return u
}
