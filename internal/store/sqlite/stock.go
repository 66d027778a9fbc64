package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/ordersync/ordersync/internal/stock"
)

// Stock is the SQLite stock.Store, with the semantics of PostgreSQL's
// (internal/store/postgres/stock.go). Snapshots are written by a journal claim's
// Finish (a *stock.Snapshot in journal.Finish.Attachments: snapshotWrite below), in
// the write transaction that marks their operation done; the rest is written here.
// Times come back in UTC, to the microsecond; quantities and prices are stored as
// TEXT, exact, with their scale (2.500 comes back as 2.500).
type Stock struct {
	db *DB
}

var _ stock.Store = (*Stock)(nil)

// Stock is the stock store.
func (db *DB) Stock() stock.Store { return &Stock{db: db} }

// DefaultStockListLimit is how many rows the stock lists return when asked for 0.
const DefaultStockListLimit = 100

// ---- writing a snapshot (journal claim's Finish) ----

const insertSnapshotSQL = `INSERT INTO stock_snapshots (key, schedule, warehouse, slot, label, taken_at, item_count, warnings, created_at)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`

// insertItemsSQL writes every item in one statement: ?2 is a JSON array of
// [sku, quantity, price] string triples, unpacked by json_each (one bound argument
// and one statement however many items: 50,000 statements would cost more than the
// JSON). ->> keeps the strings TEXT.
const insertItemsSQL = `INSERT INTO stock_snapshot_items (snapshot_key, sku, quantity, price)
SELECT ?1, value ->> 0, value ->> 1, value ->> 2 FROM json_each(?2)`

// snapshotWrite is a validated snapshot, ready for the claim's write transaction.
type snapshotWrite struct {
	s        *stock.Snapshot
	warnings *string
	items    string // the JSON of insertItemsSQL
}

// prepareSnapshot checks a snapshot against the operation key it is stored under and
// encodes its items. Nothing is written when it fails. Duplicate SKUs are left to the
// primary key: the write transaction then fails whole.
func prepareSnapshot(key string, s *stock.Snapshot) (*snapshotWrite, error) {
	if err := s.Check(key); err != nil {
		return nil, err
	}
	w := &snapshotWrite{s: s}
	var err error
	if w.warnings, err = encodeStrings(s.Warnings); err != nil {
		return nil, fmt.Errorf("warnings: %w", err)
	}
	triples := make([][3]string, len(s.Items))
	for i, it := range s.Items {
		if it.SKU == "" {
			return nil, fmt.Errorf("item %d: the SKU is empty", i)
		}
		triples[i] = [3]string{it.SKU, stock.DecimalText(it.Quantity), stock.DecimalText(it.Price)}
	}
	b, err := json.Marshal(triples)
	if err != nil {
		return nil, fmt.Errorf("items: %w", err)
	}
	w.items = string(b)
	return w, nil
}

// write stores the snapshot in tx (the claim's) with now as its creation time.
func (w *snapshotWrite) write(ctx context.Context, tx *sql.Tx, now time.Time) error {
	s := w.s
	if _, err := tx.ExecContext(ctx, insertSnapshotSQL, s.Key, s.Schedule, s.Warehouse, ts(s.Slot), s.Label, s.TakenAt,
		len(s.Items), w.warnings, ts(now)); err != nil {
		return fmt.Errorf("snapshot: %w", err)
	}
	if len(s.Items) == 0 {
		return nil
	}
	res, err := tx.ExecContext(ctx, insertItemsSQL, s.Key, w.items)
	if err != nil {
		if sku, ok := duplicateSKU(s.Items); ok {
			return fmt.Errorf("snapshot items: SKU %s is there twice: %w", sku, err)
		}
		return fmt.Errorf("snapshot items: %w", err)
	}
	if n, err := res.RowsAffected(); err != nil || n != int64(len(s.Items)) {
		return fmt.Errorf("snapshot items: inserted %d rows, want %d (%v)", n, len(s.Items), err)
	}
	return nil
}

// duplicateSKU names an SKU that items hold twice (for the message of a failed
// write; SQLite's does not name the key).
func duplicateSKU(items []stock.Item) (string, bool) {
	seen := make(map[string]bool, len(items))
	for _, it := range items {
		if seen[it.SKU] {
			return it.SKU, true
		}
		seen[it.SKU] = true
	}
	return "", false
}

// encodeStrings is the stored form of ss: nil (NULL) when there are none.
func encodeStrings(ss []string) (*string, error) {
	if len(ss) == 0 {
		return nil, nil
	}
	b, err := json.Marshal(ss)
	if err != nil {
		return nil, err
	}
	s := string(b)
	return &s, nil
}

// decodeStrings reads a JSON array of strings; NULL is none (an empty, non-nil slice,
// so JSON shows []).
func decodeStrings(v sql.NullString) ([]string, error) {
	out := []string{}
	if !v.Valid || v.String == "" {
		return out, nil
	}
	if err := json.Unmarshal([]byte(v.String), &out); err != nil {
		return nil, err
	}
	if out == nil {
		out = []string{}
	}
	return out, nil
}

func listLimit(n int) int {
	if n <= 0 {
		return DefaultStockListLimit
	}
	return n
}

// noSnapshot maps a missing row to stock.ErrNoSnapshot.
func noSnapshot(err error) error {
	if errors.Is(err, sql.ErrNoRows) {
		return stock.ErrNoSnapshot
	}
	return err
}

// ---- snapshots ----

const snapshotColumns = `key, schedule, warehouse, slot, label, taken_at, item_count, warnings, created_at`

func scanSnapshot(row rowScanner) (stock.Snapshot, error) {
	var (
		s             stock.Snapshot
		slot, created int64
		warnings      sql.NullString
	)
	if err := row.Scan(&s.Key, &s.Schedule, &s.Warehouse, &slot, &s.Label, &s.TakenAt, &s.ItemCount, &warnings, &created); err != nil {
		return stock.Snapshot{}, err
	}
	s.Slot, s.CreatedAt = fromTS(slot), fromTS(created)
	var err error
	if s.Warnings, err = decodeStrings(warnings); err != nil {
		return stock.Snapshot{}, fmt.Errorf("snapshot %s: warnings: %w", s.Key, err)
	}
	return s, nil
}

func scanSnapshots(rows *sql.Rows) ([]stock.Snapshot, error) {
	defer rows.Close()
	snaps := []stock.Snapshot{}
	for rows.Next() {
		s, err := scanSnapshot(rows)
		if err != nil {
			return nil, err
		}
		snaps = append(snaps, s)
	}
	return snaps, rows.Err()
}

// Snapshot returns the snapshot stored under key, without items;
// stock.ErrNoSnapshot when there is none.
func (s *Stock) Snapshot(ctx context.Context, key string) (stock.Snapshot, error) {
	snap, err := scanSnapshot(s.db.sql.QueryRowContext(ctx, `SELECT `+snapshotColumns+` FROM stock_snapshots WHERE key = ?`, key))
	if err != nil {
		return stock.Snapshot{}, fmt.Errorf("sqlite: stock snapshot %s: %w", key, noSnapshot(err))
	}
	return snap, nil
}

const (
	latestSQL = `SELECT ` + snapshotColumns + ` FROM stock_snapshots WHERE warehouse = ?1
ORDER BY slot DESC, created_at DESC, key DESC LIMIT 1`
	latestAtSQL = `SELECT ` + snapshotColumns + ` FROM stock_snapshots WHERE warehouse = ?1 AND slot <= ?2
ORDER BY slot DESC, created_at DESC, key DESC LIMIT 1`
)

// Latest returns the newest snapshot of warehouse — the latest slot, then the latest
// stored, of any schedule — whose slot is at or before at (zero at: the newest of
// all), without items; stock.ErrNoSnapshot when there is none.
func (s *Stock) Latest(ctx context.Context, warehouse string, at time.Time) (stock.Snapshot, error) {
	if warehouse == "" {
		return stock.Snapshot{}, errors.New("sqlite: stock latest: the warehouse is required")
	}
	var row *sql.Row
	if at.IsZero() {
		row = s.db.sql.QueryRowContext(ctx, latestSQL, warehouse)
	} else {
		row = s.db.sql.QueryRowContext(ctx, latestAtSQL, warehouse, ts(at))
	}
	snap, err := scanSnapshot(row)
	if err != nil {
		return stock.Snapshot{}, fmt.Errorf("sqlite: stock latest %s: %w", warehouse, noSnapshot(err))
	}
	return snap, nil
}

// Snapshots lists snapshots newest first (slot, then stored), of one warehouse and
// one schedule when the filter names them, at most f.Limit (default 100), without
// items.
func (s *Stock) Snapshots(ctx context.Context, f stock.Filter) ([]stock.Snapshot, error) {
	q := `SELECT ` + snapshotColumns + ` FROM stock_snapshots WHERE true`
	var args []any
	if f.Warehouse != "" {
		q += ` AND warehouse = ?`
		args = append(args, f.Warehouse)
	}
	if f.Schedule != "" {
		q += ` AND schedule = ?`
		args = append(args, f.Schedule)
	}
	q += ` ORDER BY slot DESC, created_at DESC, key DESC LIMIT ?`
	args = append(args, listLimit(f.Limit))
	rows, err := s.db.sql.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("sqlite: stock snapshots: %w", err)
	}
	snaps, err := scanSnapshots(rows)
	if err != nil {
		return nil, fmt.Errorf("sqlite: stock snapshots: %w", err)
	}
	return snaps, nil
}

// Items returns a snapshot's items sorted by SKU (byte order: the primary key's);
// stock.ErrNoSnapshot when no snapshot is stored under key. Snapshots are written
// whole and never changed, so the two reads need no transaction.
func (s *Stock) Items(ctx context.Context, key string) ([]stock.Item, error) {
	items, err := func() ([]stock.Item, error) {
		var count int
		if err := s.db.sql.QueryRowContext(ctx, `SELECT item_count FROM stock_snapshots WHERE key = ?`, key).Scan(&count); err != nil {
			return nil, noSnapshot(err)
		}
		rows, err := s.db.sql.QueryContext(ctx, `SELECT sku, quantity, price FROM stock_snapshot_items WHERE snapshot_key = ? ORDER BY sku`, key)
		if err != nil {
			return nil, err
		}
		defer rows.Close()
		items := make([]stock.Item, 0, count)
		var sku, q, p string
		for rows.Next() {
			if err := rows.Scan(&sku, &q, &p); err != nil {
				return nil, err
			}
			it := stock.Item{SKU: sku}
			if it.Quantity, err = stock.ParseDecimal(q); err != nil {
				return nil, fmt.Errorf("item %s: quantity: %w", sku, err)
			}
			if it.Price, err = stock.ParseDecimal(p); err != nil {
				return nil, fmt.Errorf("item %s: price: %w", sku, err)
			}
			items = append(items, it)
		}
		return items, rows.Err()
	}()
	if err != nil {
		return nil, fmt.Errorf("sqlite: stock items %s: %w", key, err)
	}
	return items, nil
}

// ---- item states ----

const stateColumns = `marketplace, warehouse, sku, market_sku, value, outcome, reason, warning, snapshot_key,
	sent_at, published_at, updated_at`

func scanState(row rowScanner) (stock.ItemState, error) {
	var (
		st              stock.ItemState
		outcome         string
		sent, published sql.NullInt64
		updated         int64
	)
	if err := row.Scan(&st.Marketplace, &st.Warehouse, &st.SKU, &st.MarketSKU, &st.Value, &outcome, &st.Reason, &st.Warning,
		&st.SnapshotKey, &sent, &published, &updated); err != nil {
		return stock.ItemState{}, err
	}
	st.Outcome = stock.Outcome(outcome)
	st.SentAt, st.PublishedAt, st.UpdatedAt = nullTS(sent), nullTS(published), fromTS(updated)
	return st, nil
}

// States returns what marketplace was last told of warehouse's items, by 1C SKU (an
// empty map when nothing was).
func (s *Stock) States(ctx context.Context, marketplace, warehouse string) (map[string]stock.ItemState, error) {
	rows, err := s.db.sql.QueryContext(ctx, `SELECT `+stateColumns+` FROM stock_item_states WHERE marketplace = ? AND warehouse = ?`,
		marketplace, warehouse)
	if err != nil {
		return nil, fmt.Errorf("sqlite: stock states %s %s: %w", marketplace, warehouse, err)
	}
	defer rows.Close()
	m := map[string]stock.ItemState{}
	for rows.Next() {
		st, err := scanState(rows)
		if err != nil {
			return nil, fmt.Errorf("sqlite: stock states %s %s: %w", marketplace, warehouse, err)
		}
		m[st.SKU] = st
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: stock states %s %s: %w", marketplace, warehouse, err)
	}
	return m, nil
}

const recordStateSQL = `
INSERT INTO stock_item_states (` + stateColumns + `) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (marketplace, warehouse, sku) DO UPDATE SET
	market_sku = excluded.market_sku, value = excluded.value, outcome = excluded.outcome, reason = excluded.reason,
	warning = excluded.warning, snapshot_key = excluded.snapshot_key, sent_at = excluded.sent_at,
	published_at = excluded.published_at, updated_at = excluded.updated_at`

// RecordStates writes states, each inserted or replacing the one of its marketplace,
// warehouse and SKU (a state given twice: the later one), in one write transaction.
// Every state's UpdatedAt is the store's clock; SentAt and PublishedAt are written as
// given.
func (s *Stock) RecordStates(ctx context.Context, states []stock.ItemState) error {
	if err := stock.CheckStates(states); err != nil {
		return fmt.Errorf("sqlite: stock record states: %w", err)
	}
	if len(states) == 0 {
		return nil
	}
	err := s.db.write(ctx, func(tx *sql.Tx) error {
		now := ts(s.db.nowUTC())
		stmt, err := tx.PrepareContext(ctx, recordStateSQL)
		if err != nil {
			return err
		}
		defer stmt.Close()
		for _, st := range states {
			if _, err := stmt.ExecContext(ctx, st.Marketplace, st.Warehouse, st.SKU, st.MarketSKU, st.Value, string(st.Outcome),
				st.Reason, st.Warning, st.SnapshotKey, tsPtr(nonZero(st.SentAt)), tsPtr(nonZero(st.PublishedAt)), now); err != nil {
				return fmt.Errorf("%s %s %s: %w", st.Marketplace, st.Warehouse, st.SKU, err)
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("sqlite: stock record states: %w", err)
	}
	return nil
}

// nonZero is t, or nil for the zero time.
func nonZero(t *time.Time) *time.Time {
	if t == nil || t.IsZero() {
		return nil
	}
	return t
}

// LastSent is the latest SentAt of any item at marketplace, zero when none was sent.
func (s *Stock) LastSent(ctx context.Context, marketplace string) (time.Time, error) {
	var t sql.NullInt64
	if err := s.db.sql.QueryRowContext(ctx, `SELECT max(sent_at) FROM stock_item_states WHERE marketplace = ? AND sent_at IS NOT NULL`,
		marketplace).Scan(&t); err != nil {
		return time.Time{}, fmt.Errorf("sqlite: stock last sent %s: %w", marketplace, err)
	}
	if !t.Valid {
		return time.Time{}, nil
	}
	return fromTS(t.Int64), nil
}

const (
	problemsSQL = `SELECT ` + stateColumns + ` FROM stock_item_states
WHERE outcome IN ('refused', 'mismatch', 'skipped')
ORDER BY updated_at DESC, marketplace, warehouse, sku LIMIT ?1`
	problemsOfSQL = `SELECT ` + stateColumns + ` FROM stock_item_states
WHERE outcome IN ('refused', 'mismatch', 'skipped') AND marketplace = ?2
ORDER BY updated_at DESC, warehouse, sku LIMIT ?1`
)

// Problems lists marketplace's items that are refused, mismatched or skipped (of
// every marketplace when it is ""), newest first (by UpdatedAt, then marketplace,
// warehouse and SKU), at most limit (0: 100).
func (s *Stock) Problems(ctx context.Context, marketplace string, limit int) ([]stock.ItemState, error) {
	q, args := problemsSQL, []any{listLimit(limit)}
	if marketplace != "" {
		q, args = problemsOfSQL, append(args, marketplace)
	}
	rows, err := s.db.sql.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("sqlite: stock problems %s: %w", marketplace, err)
	}
	defer rows.Close()
	sts := []stock.ItemState{}
	for rows.Next() {
		st, err := scanState(rows)
		if err != nil {
			return nil, fmt.Errorf("sqlite: stock problems %s: %w", marketplace, err)
		}
		sts = append(sts, st)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: stock problems %s: %w", marketplace, err)
	}
	return sts, nil
}

// ---- publishes ----

const publishColumns = `snapshot_key, marketplace, warehouse, full_refresh, started_at, finished_at,
	sent, published, refused, mismatched, skipped, unchanged, note, warnings`

func scanPublish(row rowScanner) (stock.Publish, error) {
	var (
		p        stock.Publish
		started  int64
		finished sql.NullInt64
		warnings sql.NullString
	)
	if err := row.Scan(&p.SnapshotKey, &p.Marketplace, &p.Warehouse, &p.Full, &started, &finished,
		&p.Sent, &p.Published, &p.Refused, &p.Mismatched, &p.Skipped, &p.Unchanged, &p.Note, &warnings); err != nil {
		return stock.Publish{}, err
	}
	p.StartedAt, p.FinishedAt = fromTS(started), nullTS(finished)
	var err error
	if p.Warnings, err = decodeStrings(warnings); err != nil {
		return stock.Publish{}, fmt.Errorf("publish of %s to %s: warnings: %w", p.SnapshotKey, p.Marketplace, err)
	}
	return p, nil
}

// StartPublish records a publish of a snapshot to a marketplace — the snapshot's
// warehouse, p.Full, p.StartedAt (the store's clock when zero), no counts — unless
// one is recorded, and returns the recorded one: a resumed publish keeps its Full
// and StartedAt. stock.ErrNoSnapshot when no snapshot is stored under p.SnapshotKey;
// an error, and nothing recorded, when p.Warehouse is set and is not the snapshot's.
// One write transaction.
func (s *Stock) StartPublish(ctx context.Context, p stock.Publish) (stock.Publish, error) {
	if p.SnapshotKey == "" || p.Marketplace == "" {
		return stock.Publish{}, errors.New("sqlite: stock start publish: the snapshot key and the marketplace are required")
	}
	var rec stock.Publish
	err := s.db.write(ctx, func(tx *sql.Tx) error {
		started := s.db.nowUTC()
		if !p.StartedAt.IsZero() {
			started = p.StartedAt
		}
		var warehouse string
		if err := tx.QueryRowContext(ctx, `SELECT warehouse FROM stock_snapshots WHERE key = ?`, p.SnapshotKey).Scan(&warehouse); err != nil {
			return noSnapshot(err)
		}
		if p.Warehouse != "" && p.Warehouse != warehouse {
			return fmt.Errorf("the snapshot is of warehouse %s, not %s", warehouse, p.Warehouse)
		}
		if _, err := tx.ExecContext(ctx, `
			INSERT INTO stock_publishes (snapshot_key, marketplace, warehouse, full_refresh, started_at)
			SELECT s.key, ?2, s.warehouse, ?3, ?4 FROM stock_snapshots s WHERE s.key = ?1
			ON CONFLICT (snapshot_key, marketplace) DO NOTHING`, p.SnapshotKey, p.Marketplace, p.Full, ts(started)); err != nil {
			return err
		}
		var err error
		rec, err = scanPublish(tx.QueryRowContext(ctx, `SELECT `+publishColumns+` FROM stock_publishes
			WHERE snapshot_key = ? AND marketplace = ?`, p.SnapshotKey, p.Marketplace))
		return err
	})
	if err != nil {
		return stock.Publish{}, fmt.Errorf("sqlite: stock start publish %s to %s: %w", p.SnapshotKey, p.Marketplace, err)
	}
	return rec, nil
}

// errNoPublish answers FinishPublish for a publish StartPublish has not recorded.
var errNoPublish = errors.New("no such publish (StartPublish records it)")

// FinishPublish writes a recorded publish's counts, note, warnings and FinishedAt
// (the store's clock when nil); its Full and StartedAt stay. An error when it is not
// recorded.
func (s *Stock) FinishPublish(ctx context.Context, p stock.Publish) error {
	err := func() error {
		for _, c := range []struct {
			name string
			n    int
		}{{"sent", p.Sent}, {"published", p.Published}, {"refused", p.Refused}, {"mismatched", p.Mismatched},
			{"skipped", p.Skipped}, {"unchanged", p.Unchanged}} {
			if c.n < 0 {
				return fmt.Errorf("the %s count is negative (%d)", c.name, c.n)
			}
		}
		warnings, err := encodeStrings(p.Warnings)
		if err != nil {
			return err
		}
		return s.db.write(ctx, func(tx *sql.Tx) error {
			finished := s.db.nowUTC()
			if p.FinishedAt != nil && !p.FinishedAt.IsZero() {
				finished = *p.FinishedAt
			}
			res, err := tx.ExecContext(ctx, `UPDATE stock_publishes SET finished_at = ?3,
				sent = ?4, published = ?5, refused = ?6, mismatched = ?7, skipped = ?8, unchanged = ?9, note = ?10, warnings = ?11
				WHERE snapshot_key = ?1 AND marketplace = ?2`,
				p.SnapshotKey, p.Marketplace, ts(finished), p.Sent, p.Published, p.Refused, p.Mismatched, p.Skipped, p.Unchanged,
				p.Note, warnings)
			if err != nil {
				return err
			}
			if n, err := res.RowsAffected(); err != nil || n == 0 {
				return cmpErr(err, errNoPublish)
			}
			return nil
		})
	}()
	if err != nil {
		return fmt.Errorf("sqlite: stock finish publish %s to %s: %w", p.SnapshotKey, p.Marketplace, err)
	}
	return nil
}

// cmpErr is err, or def when err is nil.
func cmpErr(err, def error) error {
	if err != nil {
		return err
	}
	return def
}

// LastFull is when the latest full publish of warehouse to marketplace finished,
// zero when none has (a full publish still running does not count).
func (s *Stock) LastFull(ctx context.Context, marketplace, warehouse string) (time.Time, error) {
	var t sql.NullInt64
	if err := s.db.sql.QueryRowContext(ctx, `SELECT max(finished_at) FROM stock_publishes
		WHERE marketplace = ? AND warehouse = ? AND full_refresh AND finished_at IS NOT NULL`,
		marketplace, warehouse).Scan(&t); err != nil {
		return time.Time{}, fmt.Errorf("sqlite: stock last full %s %s: %w", marketplace, warehouse, err)
	}
	if !t.Valid {
		return time.Time{}, nil
	}
	return fromTS(t.Int64), nil
}

// Publishes lists publishes newest first (started, then snapshot key descending,
// then marketplace), of one marketplace and one warehouse when the filter names
// them; f.Latest keeps the newest of each marketplace and warehouse. At most f.Limit
// (default 100).
func (s *Stock) Publishes(ctx context.Context, f stock.PublishFilter) ([]stock.Publish, error) {
	var (
		conds []string
		args  []any
	)
	if f.Marketplace != "" {
		conds, args = append(conds, `marketplace = ?`), append(args, f.Marketplace)
	}
	if f.Warehouse != "" {
		conds, args = append(conds, `warehouse = ?`), append(args, f.Warehouse)
	}
	where := ``
	if len(conds) > 0 {
		where = ` WHERE ` + strings.Join(conds, ` AND `)
	}
	q := `SELECT ` + publishColumns + ` FROM stock_publishes` + where
	if f.Latest {
		q = `SELECT ` + publishColumns + ` FROM (
			SELECT *, row_number() OVER (PARTITION BY marketplace, warehouse ORDER BY started_at DESC, snapshot_key DESC) AS rn
			FROM stock_publishes` + where + `) WHERE rn = 1`
	}
	q += ` ORDER BY started_at DESC, snapshot_key DESC, marketplace LIMIT ?`
	args = append(args, listLimit(f.Limit))
	rows, err := s.db.sql.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("sqlite: stock publishes: %w", err)
	}
	defer rows.Close()
	ps := []stock.Publish{}
	for rows.Next() {
		p, err := scanPublish(rows)
		if err != nil {
			return nil, fmt.Errorf("sqlite: stock publishes: %w", err)
		}
		ps = append(ps, p)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: stock publishes: %w", err)
	}
	return ps, nil
}

// pruneSelectSQL chooses old snapshots: never a warehouse's newest, nor one whose
// publish has not finished.
const pruneSelectSQL = `
SELECT s.key FROM stock_snapshots s
WHERE s.created_at < ?1
  AND EXISTS (SELECT 1 FROM stock_snapshots n WHERE n.warehouse = s.warehouse
              AND (n.slot > s.slot OR (n.slot = s.slot AND (n.created_at > s.created_at OR (n.created_at = s.created_at AND n.key > s.key)))))
  AND NOT EXISTS (SELECT 1 FROM stock_publishes p WHERE p.snapshot_key = s.key AND p.finished_at IS NULL)
ORDER BY s.created_at
LIMIT ?2`

// Prune deletes at most limit snapshots stored before before (never a warehouse's
// newest, nor one whose publish has not finished), with their items and publishes,
// in one transaction.
func (s *Stock) Prune(ctx context.Context, before time.Time, limit int) (int, error) {
	if limit <= 0 {
		limit = 100
	}
	n := 0
	err := s.db.write(ctx, func(tx *sql.Tx) error {
		n = 0
		rows, err := tx.QueryContext(ctx, pruneSelectSQL, ts(before), limit)
		if err != nil {
			return err
		}
		var keys []string
		for rows.Next() {
			var k string
			if err := rows.Scan(&k); err != nil {
				rows.Close()
				return err
			}
			keys = append(keys, k)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		for _, k := range keys {
			for _, q := range []string{`DELETE FROM stock_snapshot_items WHERE snapshot_key = ?`,
				`DELETE FROM stock_publishes WHERE snapshot_key = ?`, `DELETE FROM stock_snapshots WHERE key = ?`} {
				if _, err := tx.ExecContext(ctx, q, k); err != nil {
					return err
				}
			}
			n++
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("sqlite: stock prune: %w", err)
	}
	return n, nil
}

// scheduleRunsSQL counts the pending snapshot operations of a schedule and
// warehouse and reads the newest failed one, in one statement (operations'
// external_id index; a failed one is the first of journal List's order).
const scheduleRunsSQL = `
SELECT (SELECT count(*) FROM operations WHERE source = ?1 AND external_id = ?2 AND status = 'pending'),
	coalesce(f.key, ''), coalesce(f.last_error, '')
FROM (SELECT 1) AS one
LEFT JOIN (SELECT key, last_error FROM operations WHERE source = ?1 AND external_id = ?2 AND status = 'failed'
	ORDER BY updated_at DESC, key LIMIT 1) AS f ON true`

// ScheduleRuns reads the journal's snapshot operations of schedule and warehouse:
// how many are pending, and the newest failed one.
func (s *Stock) ScheduleRuns(ctx context.Context, schedule, warehouse string) (stock.ScheduleRuns, error) {
	var r stock.ScheduleRuns
	if err := s.db.sql.QueryRowContext(ctx, scheduleRunsSQL, stock.Source, schedule+":"+warehouse).
		Scan(&r.Pending, &r.LastFailed, &r.LastError); err != nil {
		return stock.ScheduleRuns{}, fmt.Errorf("sqlite: stock schedule runs %s:%s: %w", schedule, warehouse, err)
	}
	return r, nil
}
