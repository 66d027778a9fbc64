package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/ordersync/ordersync/internal/stock"
)

// Stock is the PostgreSQL stock.Store. Snapshots are written by a journal claim's
// Finish (a *stock.Snapshot in journal.Finish.Attachments: snapshotWrite below), in
// the transaction that marks their operation done; the rest is written here. Times
// come back in UTC, at the database's precision (microseconds); quantities and
// prices are numeric, exact, with their scale (2.500 comes back as 2.500).
type Stock struct {
	db *DB
}

var _ stock.Store = (*Stock)(nil)

// Stock is the stock store.
func (db *DB) Stock() stock.Store { return &Stock{db: db} }

// Defaults of the stock store.
const DefaultStockListLimit = 100

// ---- writing a snapshot (journal claim's Finish) ----

// insertSnapshotSQL writes a snapshot's row; insertItemsSQL its items, in one
// statement whatever their number: three text arrays unnested and cast to numeric
// (pgx has no encoding of shopspring's decimal; the text is exact).
const (
	insertSnapshotSQL = `INSERT INTO stock_snapshots (key, schedule, warehouse, slot, label, taken_at, item_count, warnings, created_at)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)`
	insertItemsSQL = `INSERT INTO stock_snapshot_items (snapshot_key, sku, quantity, price)
SELECT $1, u.sku, u.quantity::numeric, u.price::numeric
FROM unnest($2::text[], $3::text[], $4::text[]) AS u (sku, quantity, price)`
)

// snapshotWrite is a validated snapshot, ready for the claim's batch.
type snapshotWrite struct {
	s                    *stock.Snapshot
	warnings             []byte
	skus, quantities, ps []string
}

// prepareSnapshot checks a snapshot against the operation key it is stored under and
// turns its items into the text arrays of insertItemsSQL. Nothing is written when it
// fails. Duplicate SKUs are left to the primary key: the write then fails whole.
func prepareSnapshot(key string, s *stock.Snapshot) (*snapshotWrite, error) {
	if err := s.Check(key); err != nil {
		return nil, err
	}
	w := &snapshotWrite{s: s}
	if len(s.Warnings) > 0 {
		var err error
		if w.warnings, err = json.Marshal(s.Warnings); err != nil {
			return nil, fmt.Errorf("warnings: %w", err)
		}
	}
	n := len(s.Items)
	w.skus, w.quantities, w.ps = make([]string, n), make([]string, n), make([]string, n)
	for i, it := range s.Items {
		if it.SKU == "" {
			return nil, fmt.Errorf("item %d: the SKU is empty", i)
		}
		w.skus[i], w.quantities[i], w.ps[i] = it.SKU, stock.DecimalText(it.Quantity), stock.DecimalText(it.Price)
	}
	return w, nil
}

// queue adds the snapshot's statements to the claim's batch: its row, and its items
// when it has any.
func (w *snapshotWrite) queue(b *pgx.Batch, now time.Time) {
	s := w.s
	b.Queue(insertSnapshotSQL, s.Key, s.Schedule, s.Warehouse, s.Slot.UTC().Truncate(time.Microsecond), s.Label, s.TakenAt,
		len(s.Items), w.warnings, now)
	if len(s.Items) > 0 {
		b.Queue(insertItemsSQL, s.Key, w.skus, w.quantities, w.ps)
	}
}

// read reads the results of queue from br.
func (w *snapshotWrite) read(br pgx.BatchResults) error {
	tag, err := br.Exec()
	if err != nil {
		return fmt.Errorf("snapshot: %w", describePgError(err))
	}
	if tag.RowsAffected() != 1 {
		return fmt.Errorf("snapshot: inserted %d rows, want 1", tag.RowsAffected())
	}
	if len(w.s.Items) == 0 {
		return nil
	}
	if tag, err = br.Exec(); err != nil {
		return fmt.Errorf("snapshot items: %w", describePgError(err))
	}
	if got, want := tag.RowsAffected(), int64(len(w.s.Items)); got != want {
		return fmt.Errorf("snapshot items: inserted %d rows, want %d", got, want)
	}
	return nil
}

// describePgError adds the server's detail (which key a unique violation is about) to
// the error.
func describePgError(err error) error {
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Detail != "" {
		return fmt.Errorf("%w: %s", err, pe.Detail)
	}
	return err
}

// ---- snapshots ----

const snapshotColumns = `key, schedule, warehouse, slot, label, taken_at, item_count, warnings, created_at`

func scanSnapshot(row pgx.Row) (stock.Snapshot, error) {
	var (
		s        stock.Snapshot
		warnings []byte
	)
	if err := row.Scan(&s.Key, &s.Schedule, &s.Warehouse, &s.Slot, &s.Label, &s.TakenAt, &s.ItemCount, &warnings, &s.CreatedAt); err != nil {
		return stock.Snapshot{}, err
	}
	s.Slot, s.CreatedAt = s.Slot.UTC(), s.CreatedAt.UTC()
	var err error
	if s.Warnings, err = decodeStrings(warnings); err != nil {
		return stock.Snapshot{}, fmt.Errorf("snapshot %s: warnings: %w", s.Key, err)
	}
	return s, nil
}

// decodeStrings reads a JSON array of strings; NULL is none (an empty, non-nil slice,
// so JSON shows []).
func decodeStrings(b []byte) ([]string, error) {
	out := []string{}
	if len(b) == 0 {
		return out, nil
	}
	if err := json.Unmarshal(b, &out); err != nil {
		return nil, err
	}
	if out == nil {
		out = []string{}
	}
	return out, nil
}

// encodeStrings is the stored form of ss: nil (NULL) when there are none.
func encodeStrings(ss []string) ([]byte, error) {
	if len(ss) == 0 {
		return nil, nil
	}
	return json.Marshal(ss)
}

// noSnapshot maps a missing row to stock.ErrNoSnapshot.
func noSnapshot(err error) error {
	if errors.Is(err, pgx.ErrNoRows) {
		return stock.ErrNoSnapshot
	}
	return interpretError(err)
}

// Snapshot returns the snapshot stored under key, without items;
// stock.ErrNoSnapshot when there is none.
func (s *Stock) Snapshot(ctx context.Context, key string) (stock.Snapshot, error) {
	snap, err := scanSnapshot(s.db.pool.QueryRow(ctx, `SELECT `+snapshotColumns+` FROM stock_snapshots WHERE key = $1`, key))
	if err != nil {
		return stock.Snapshot{}, fmt.Errorf("postgres: stock snapshot %s: %w", key, noSnapshot(err))
	}
	return snap, nil
}

// latestSQL and latestAtSQL walk stock_snapshots_latest_idx from the newest slot.
const (
	latestSQL = `SELECT ` + snapshotColumns + ` FROM stock_snapshots WHERE warehouse = $1
ORDER BY slot DESC, created_at DESC, key DESC LIMIT 1`
	latestAtSQL = `SELECT ` + snapshotColumns + ` FROM stock_snapshots WHERE warehouse = $1 AND slot <= $2
ORDER BY slot DESC, created_at DESC, key DESC LIMIT 1`
)

// Latest returns the newest snapshot of warehouse — the latest slot, then the latest
// stored, of any schedule — whose slot is at or before at (zero at: the newest of
// all), without items; stock.ErrNoSnapshot when there is none.
func (s *Stock) Latest(ctx context.Context, warehouse string, at time.Time) (stock.Snapshot, error) {
	if warehouse == "" {
		return stock.Snapshot{}, errors.New("postgres: stock latest: the warehouse is required")
	}
	var row pgx.Row
	if at.IsZero() {
		row = s.db.pool.QueryRow(ctx, latestSQL, warehouse)
	} else {
		row = s.db.pool.QueryRow(ctx, latestAtSQL, warehouse, at.UTC())
	}
	snap, err := scanSnapshot(row)
	if err != nil {
		return stock.Snapshot{}, fmt.Errorf("postgres: stock latest %s: %w", warehouse, noSnapshot(err))
	}
	return snap, nil
}

// Snapshots lists snapshots newest first (slot, then stored), of one warehouse and
// one schedule when the filter names them, at most f.Limit (default 100), without
// items.
func (s *Stock) Snapshots(ctx context.Context, f stock.Filter) ([]stock.Snapshot, error) {
	q := `SELECT ` + snapshotColumns + ` FROM stock_snapshots WHERE true`
	var args []any
	arg := func(v any) string {
		args = append(args, v)
		return "$" + strconv.Itoa(len(args))
	}
	if f.Warehouse != "" {
		q += ` AND warehouse = ` + arg(f.Warehouse)
	}
	if f.Schedule != "" {
		q += ` AND schedule = ` + arg(f.Schedule)
	}
	q += ` ORDER BY slot DESC, created_at DESC, key DESC LIMIT ` + arg(listLimit(f.Limit))
	rows, err := s.db.pool.Query(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("postgres: stock snapshots: %w", interpretError(err))
	}
	snaps, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (stock.Snapshot, error) { return scanSnapshot(row) })
	if err != nil {
		return nil, fmt.Errorf("postgres: stock snapshots: %w", interpretError(err))
	}
	if snaps == nil {
		snaps = []stock.Snapshot{}
	}
	return snaps, nil
}

func listLimit(n int) int {
	if n <= 0 {
		return DefaultStockListLimit
	}
	return n
}

// itemsSQL reads the primary key in order: sku is COLLATE "C", byte order.
const itemsSQL = `SELECT sku, quantity::text, price::text FROM stock_snapshot_items WHERE snapshot_key = $1 ORDER BY sku`

// Items returns a snapshot's items sorted by SKU (byte order); stock.ErrNoSnapshot
// when no snapshot is stored under key. One round trip.
func (s *Stock) Items(ctx context.Context, key string) ([]stock.Item, error) {
	b := &pgx.Batch{}
	b.Queue(`SELECT item_count FROM stock_snapshots WHERE key = $1`, key)
	b.Queue(itemsSQL, key)
	br := s.db.pool.SendBatch(ctx, b)
	items, err := func() ([]stock.Item, error) {
		var count int
		if err := br.QueryRow().Scan(&count); err != nil {
			return nil, noSnapshot(err)
		}
		rows, err := br.Query()
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
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, fmt.Errorf("postgres: stock items %s: %w", key, interpretError(err))
	}
	return items, nil
}

// ---- item states ----

const stateColumns = `marketplace, warehouse, sku, market_sku, value, outcome, reason, warning, snapshot_key,
	sent_at, published_at, updated_at`

func scanState(row pgx.Row) (stock.ItemState, error) {
	var (
		st      stock.ItemState
		outcome string
	)
	if err := row.Scan(&st.Marketplace, &st.Warehouse, &st.SKU, &st.MarketSKU, &st.Value, &outcome, &st.Reason, &st.Warning,
		&st.SnapshotKey, &st.SentAt, &st.PublishedAt, &st.UpdatedAt); err != nil {
		return stock.ItemState{}, err
	}
	st.Outcome = stock.Outcome(outcome)
	st.SentAt, st.PublishedAt, st.UpdatedAt = utcPtr(st.SentAt), utcPtr(st.PublishedAt), st.UpdatedAt.UTC()
	return st, nil
}

// States returns what marketplace was last told of warehouse's items, by 1C SKU (an
// empty map when nothing was).
func (s *Stock) States(ctx context.Context, marketplace, warehouse string) (map[string]stock.ItemState, error) {
	rows, err := s.db.pool.Query(ctx, `SELECT `+stateColumns+` FROM stock_item_states WHERE marketplace = $1 AND warehouse = $2`,
		marketplace, warehouse)
	if err != nil {
		return nil, fmt.Errorf("postgres: stock states %s %s: %w", marketplace, warehouse, interpretError(err))
	}
	defer rows.Close()
	m := map[string]stock.ItemState{}
	for rows.Next() {
		st, err := scanState(rows)
		if err != nil {
			return nil, fmt.Errorf("postgres: stock states %s %s: %w", marketplace, warehouse, err)
		}
		m[st.SKU] = st
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("postgres: stock states %s %s: %w", marketplace, warehouse, interpretError(err))
	}
	return m, nil
}

// recordStatesSQL upserts every state in one statement (so one transaction), from
// arrays: $1…$11 the columns, $12 the store's now.
const recordStatesSQL = `
INSERT INTO stock_item_states AS s (` + stateColumns + `)
SELECT u.*, $12::timestamptz
FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::bigint[], $6::text[], $7::text[], $8::text[], $9::text[],
	$10::timestamptz[], $11::timestamptz[])
	AS u (marketplace, warehouse, sku, market_sku, value, outcome, reason, warning, snapshot_key, sent_at, published_at)
ON CONFLICT (marketplace, warehouse, sku) DO UPDATE SET
	market_sku = excluded.market_sku, value = excluded.value, outcome = excluded.outcome, reason = excluded.reason,
	warning = excluded.warning, snapshot_key = excluded.snapshot_key, sent_at = excluded.sent_at,
	published_at = excluded.published_at, updated_at = excluded.updated_at`

// RecordStates writes states, each inserted or replacing the one of its marketplace,
// warehouse and SKU (a state given twice: the later one), in one statement. Every
// state's UpdatedAt is the store's clock; SentAt and PublishedAt are written as given.
func (s *Stock) RecordStates(ctx context.Context, states []stock.ItemState) error {
	states, err := uniqueStates(states)
	if err != nil {
		return fmt.Errorf("postgres: stock record states: %w", err)
	}
	if len(states) == 0 {
		return nil
	}
	n := len(states)
	var (
		mps, whs, skus, msks    = make([]string, n), make([]string, n), make([]string, n), make([]string, n)
		values                  = make([]int64, n)
		outcomes, reasons, warn = make([]string, n), make([]string, n), make([]string, n)
		snaps                   = make([]string, n)
		sent, published         = make([]*time.Time, n), make([]*time.Time, n)
	)
	for i, st := range states {
		mps[i], whs[i], skus[i], msks[i] = st.Marketplace, st.Warehouse, st.SKU, st.MarketSKU
		values[i], outcomes[i], reasons[i], warn[i], snaps[i] = st.Value, string(st.Outcome), st.Reason, st.Warning, st.SnapshotKey
		sent[i], published[i] = microPtr(st.SentAt), microPtr(st.PublishedAt)
	}
	if _, err := s.db.pool.Exec(ctx, recordStatesSQL, mps, whs, skus, msks, values, outcomes, reasons, warn, snaps,
		sent, published, s.db.nowUTC()); err != nil {
		return fmt.Errorf("postgres: stock record states: %w", interpretError(err))
	}
	return nil
}

// uniqueStates validates states and keeps the last of each marketplace, warehouse
// and SKU, in the order given.
func uniqueStates(states []stock.ItemState) ([]stock.ItemState, error) {
	type id struct{ mp, wh, sku string }
	if err := stock.CheckStates(states); err != nil {
		return nil, err
	}
	last := make(map[id]int, len(states))
	for i, st := range states {
		last[id{st.Marketplace, st.Warehouse, st.SKU}] = i
	}
	if len(last) == len(states) {
		return states, nil
	}
	out := make([]stock.ItemState, 0, len(last))
	for i, st := range states {
		if last[id{st.Marketplace, st.Warehouse, st.SKU}] == i {
			out = append(out, st)
		}
	}
	return out, nil
}

// microPtr is *t in UTC at the database's precision, nil for nil or the zero time.
func microPtr(t *time.Time) *time.Time {
	if t == nil || t.IsZero() {
		return nil
	}
	u := t.UTC().Truncate(time.Microsecond)
	return &u
}

// LastSent is the latest SentAt of any item at marketplace, zero when none was sent.
func (s *Stock) LastSent(ctx context.Context, marketplace string) (time.Time, error) {
	var t *time.Time
	if err := s.db.pool.QueryRow(ctx, `SELECT max(sent_at) FROM stock_item_states WHERE marketplace = $1 AND sent_at IS NOT NULL`,
		marketplace).Scan(&t); err != nil {
		return time.Time{}, fmt.Errorf("postgres: stock last sent %s: %w", marketplace, interpretError(err))
	}
	if t == nil {
		return time.Time{}, nil
	}
	return t.UTC(), nil
}

// problemsSQL and problemsOfSQL walk the partial problem indexes, newest first.
const (
	problemsSQL = `SELECT ` + stateColumns + ` FROM stock_item_states
WHERE outcome IN ('refused', 'mismatch', 'skipped')
ORDER BY updated_at DESC, marketplace, warehouse, sku LIMIT $1`
	problemsOfSQL = `SELECT ` + stateColumns + ` FROM stock_item_states
WHERE outcome IN ('refused', 'mismatch', 'skipped') AND marketplace = $2
ORDER BY updated_at DESC, warehouse, sku LIMIT $1`
)

// Problems lists marketplace's items that are refused, mismatched or skipped (of
// every marketplace when it is ""), newest first (by UpdatedAt, then marketplace,
// warehouse and SKU), at most limit (0: 100).
func (s *Stock) Problems(ctx context.Context, marketplace string, limit int) ([]stock.ItemState, error) {
	q, args := problemsSQL, []any{listLimit(limit)}
	if marketplace != "" {
		q, args = problemsOfSQL, append(args, marketplace)
	}
	rows, err := s.db.pool.Query(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("postgres: stock problems %s: %w", marketplace, interpretError(err))
	}
	sts, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (stock.ItemState, error) { return scanState(row) })
	if err != nil {
		return nil, fmt.Errorf("postgres: stock problems %s: %w", marketplace, interpretError(err))
	}
	if sts == nil {
		sts = []stock.ItemState{}
	}
	return sts, nil
}

// ---- publishes ----

const publishColumns = `snapshot_key, marketplace, warehouse, full_refresh, started_at, finished_at,
	sent, published, refused, mismatched, skipped, unchanged, note, warnings`

func scanPublish(row pgx.Row) (stock.Publish, error) {
	var (
		p        stock.Publish
		warnings []byte
	)
	if err := row.Scan(&p.SnapshotKey, &p.Marketplace, &p.Warehouse, &p.Full, &p.StartedAt, &p.FinishedAt,
		&p.Sent, &p.Published, &p.Refused, &p.Mismatched, &p.Skipped, &p.Unchanged, &p.Note, &warnings); err != nil {
		return stock.Publish{}, err
	}
	p.StartedAt, p.FinishedAt = p.StartedAt.UTC(), utcPtr(p.FinishedAt)
	var err error
	if p.Warnings, err = decodeStrings(warnings); err != nil {
		return stock.Publish{}, fmt.Errorf("publish of %s to %s: warnings: %w", p.SnapshotKey, p.Marketplace, err)
	}
	return p, nil
}

// startPublishSQL records the publish unless one of the snapshot and marketplace is,
// with the snapshot's warehouse (when $5 names another, nothing is inserted), and
// answers the recorded one. When the row exists (or another transaction inserted it
// meanwhile: ON CONFLICT waits for it, but the statement's snapshot does not see
// it) it answers nothing and StartPublish reads it again; so it does when there is
// no such snapshot, or it is of another warehouse.
const startPublishSQL = `
WITH ins AS (
	INSERT INTO stock_publishes (snapshot_key, marketplace, warehouse, full_refresh, started_at)
	SELECT s.key, $2, s.warehouse, $3, $4 FROM stock_snapshots s WHERE s.key = $1 AND ($5 = '' OR s.warehouse = $5)
	ON CONFLICT (snapshot_key, marketplace) DO NOTHING
	RETURNING ` + publishColumns + `
)
SELECT ` + publishColumns + ` FROM ins
UNION ALL
SELECT ` + publishColumns + ` FROM stock_publishes WHERE snapshot_key = $1 AND marketplace = $2 AND NOT EXISTS (SELECT FROM ins)`

// StartPublish records a publish of a snapshot to a marketplace — the snapshot's
// warehouse, p.Full, p.StartedAt (the store's clock when zero), no counts — unless
// one is recorded, and returns the recorded one: a resumed publish keeps its Full
// and StartedAt. stock.ErrNoSnapshot when no snapshot is stored under p.SnapshotKey;
// an error, and nothing recorded, when p.Warehouse is set and is not the snapshot's.
func (s *Stock) StartPublish(ctx context.Context, p stock.Publish) (stock.Publish, error) {
	if p.SnapshotKey == "" || p.Marketplace == "" {
		return stock.Publish{}, errors.New("postgres: stock start publish: the snapshot key and the marketplace are required")
	}
	what := func(err error) error {
		return fmt.Errorf("postgres: stock start publish %s to %s: %w", p.SnapshotKey, p.Marketplace, err)
	}
	started := p.StartedAt.UTC().Truncate(time.Microsecond)
	if p.StartedAt.IsZero() {
		started = s.db.nowUTC()
	}
	rec, err := scanPublish(s.db.pool.QueryRow(ctx, startPublishSQL, p.SnapshotKey, p.Marketplace, p.Full, started, p.Warehouse))
	if errors.Is(err, pgx.ErrNoRows) {
		// Inserted by a concurrent call after this statement's snapshot, no such
		// snapshot, or another warehouse.
		rec, err = scanPublish(s.db.pool.QueryRow(ctx, `SELECT `+publishColumns+` FROM stock_publishes
			WHERE snapshot_key = $1 AND marketplace = $2`, p.SnapshotKey, p.Marketplace))
		if errors.Is(err, pgx.ErrNoRows) {
			var warehouse string
			if err := s.db.pool.QueryRow(ctx, `SELECT warehouse FROM stock_snapshots WHERE key = $1`, p.SnapshotKey).Scan(&warehouse); err != nil {
				return stock.Publish{}, what(noSnapshot(err))
			}
			return stock.Publish{}, what(fmt.Errorf("the snapshot is of warehouse %s, not %s", warehouse, p.Warehouse))
		}
	}
	if err != nil {
		return stock.Publish{}, what(interpretError(err))
	}
	if p.Warehouse != "" && p.Warehouse != rec.Warehouse {
		return stock.Publish{}, what(fmt.Errorf("the publish is of warehouse %s, not %s", rec.Warehouse, p.Warehouse))
	}
	return rec, nil
}

// errNoPublish answers FinishPublish for a publish StartPublish has not recorded.
var errNoPublish = errors.New("no such publish (StartPublish records it)")

// FinishPublish writes a recorded publish's counts, note, warnings and FinishedAt
// (the store's clock when nil); its Full and StartedAt stay. An error when it is not
// recorded.
func (s *Stock) FinishPublish(ctx context.Context, p stock.Publish) error {
	what := func(err error) error {
		return fmt.Errorf("postgres: stock finish publish %s to %s: %w", p.SnapshotKey, p.Marketplace, err)
	}
	if err := validateCounts(p); err != nil {
		return what(err)
	}
	warnings, err := encodeStrings(p.Warnings)
	if err != nil {
		return what(err)
	}
	finished := s.db.nowUTC()
	if p.FinishedAt != nil && !p.FinishedAt.IsZero() {
		finished = p.FinishedAt.UTC().Truncate(time.Microsecond)
	}
	tag, err := s.db.pool.Exec(ctx, `UPDATE stock_publishes SET finished_at = $3,
		sent = $4, published = $5, refused = $6, mismatched = $7, skipped = $8, unchanged = $9, note = $10, warnings = $11
		WHERE snapshot_key = $1 AND marketplace = $2`,
		p.SnapshotKey, p.Marketplace, finished, p.Sent, p.Published, p.Refused, p.Mismatched, p.Skipped, p.Unchanged,
		p.Note, warnings)
	if err != nil {
		return what(interpretError(err))
	}
	if tag.RowsAffected() == 0 {
		return what(errNoPublish)
	}
	return nil
}

func validateCounts(p stock.Publish) error {
	for _, c := range []struct {
		name string
		n    int
	}{{"sent", p.Sent}, {"published", p.Published}, {"refused", p.Refused}, {"mismatched", p.Mismatched},
		{"skipped", p.Skipped}, {"unchanged", p.Unchanged}} {
		if c.n < 0 {
			return fmt.Errorf("the %s count is negative (%d)", c.name, c.n)
		}
	}
	return nil
}

// LastFull is when the latest full publish of warehouse to marketplace finished,
// zero when none has (a full publish still running does not count).
func (s *Stock) LastFull(ctx context.Context, marketplace, warehouse string) (time.Time, error) {
	var t *time.Time
	if err := s.db.pool.QueryRow(ctx, `SELECT max(finished_at) FROM stock_publishes
		WHERE marketplace = $1 AND warehouse = $2 AND full_refresh AND finished_at IS NOT NULL`,
		marketplace, warehouse).Scan(&t); err != nil {
		return time.Time{}, fmt.Errorf("postgres: stock last full %s %s: %w", marketplace, warehouse, interpretError(err))
	}
	if t == nil {
		return time.Time{}, nil
	}
	return t.UTC(), nil
}

// Publishes lists publishes newest first (started, then snapshot key descending,
// then marketplace), of one marketplace and one warehouse when the filter names
// them; f.Latest keeps the newest of each marketplace and warehouse. At most f.Limit
// (default 100).
func (s *Stock) Publishes(ctx context.Context, f stock.PublishFilter) ([]stock.Publish, error) {
	where := ` WHERE true`
	var args []any
	arg := func(v any) string {
		args = append(args, v)
		return "$" + strconv.Itoa(len(args))
	}
	if f.Marketplace != "" {
		where += ` AND marketplace = ` + arg(f.Marketplace)
	}
	if f.Warehouse != "" {
		where += ` AND warehouse = ` + arg(f.Warehouse)
	}
	from := `stock_publishes`
	if f.Latest {
		from = `(SELECT DISTINCT ON (marketplace, warehouse) * FROM stock_publishes` + where + `
			ORDER BY marketplace, warehouse, started_at DESC, snapshot_key DESC) latest`
		where = ``
	}
	q := `SELECT ` + publishColumns + ` FROM ` + from + where +
		` ORDER BY started_at DESC, snapshot_key DESC, marketplace LIMIT ` + arg(listLimit(f.Limit))
	rows, err := s.db.pool.Query(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("postgres: stock publishes: %w", interpretError(err))
	}
	ps, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (stock.Publish, error) { return scanPublish(row) })
	if err != nil {
		return nil, fmt.Errorf("postgres: stock publishes: %w", interpretError(err))
	}
	if ps == nil {
		ps = []stock.Publish{}
	}
	return ps, nil
}

// pruneSQL deletes old snapshots in one statement: the items and publishes of the
// chosen ones, then the snapshots (the publishes' foreign key is checked at the
// statement's end).
const pruneSQL = `
WITH doomed AS (
	SELECT s.key FROM stock_snapshots s
	WHERE s.created_at < $1
	  AND EXISTS (SELECT 1 FROM stock_snapshots n WHERE n.warehouse = s.warehouse
	              AND (n.slot, n.created_at, n.key) > (s.slot, s.created_at, s.key))
	  AND NOT EXISTS (SELECT 1 FROM stock_publishes p WHERE p.snapshot_key = s.key AND p.finished_at IS NULL)
	ORDER BY s.created_at
	LIMIT $2
), items AS (
	DELETE FROM stock_snapshot_items i USING doomed d WHERE i.snapshot_key = d.key
), pubs AS (
	DELETE FROM stock_publishes p USING doomed d WHERE p.snapshot_key = d.key
)
DELETE FROM stock_snapshots s USING doomed d WHERE s.key = d.key`

// Prune deletes at most limit snapshots stored before before (never a warehouse's
// newest, nor one whose publish has not finished), with their items and publishes.
func (s *Stock) Prune(ctx context.Context, before time.Time, limit int) (int, error) {
	if limit <= 0 {
		limit = 100
	}
	tag, err := s.db.pool.Exec(ctx, pruneSQL, before.UTC(), limit)
	if err != nil {
		return 0, fmt.Errorf("postgres: stock prune: %w", interpretError(err))
	}
	return int(tag.RowsAffected()), nil
}

// scheduleRunsSQL counts the pending snapshot operations of a schedule and
// warehouse and reads the newest failed one, in one statement (operations'
// external_id index; a failed one is the first of journal List's order).
const scheduleRunsSQL = `
SELECT (SELECT count(*) FROM operations WHERE source = $1 AND external_id = $2 AND status = 'pending'),
	coalesce(f.key, ''), coalesce(f.last_error, '')
FROM (SELECT 1) AS one
LEFT JOIN (SELECT key, last_error FROM operations WHERE source = $1 AND external_id = $2 AND status = 'failed'
	ORDER BY updated_at DESC, key LIMIT 1) AS f ON true`

// ScheduleRuns reads the journal's snapshot operations of schedule and warehouse:
// how many are pending, and the newest failed one.
func (s *Stock) ScheduleRuns(ctx context.Context, schedule, warehouse string) (stock.ScheduleRuns, error) {
	var (
		r       stock.ScheduleRuns
		pending int64
	)
	if err := s.db.pool.QueryRow(ctx, scheduleRunsSQL, stock.Source, schedule+":"+warehouse).
		Scan(&pending, &r.LastFailed, &r.LastError); err != nil {
		return stock.ScheduleRuns{}, fmt.Errorf("postgres: stock schedule runs %s:%s: %w", schedule, warehouse, interpretError(err))
	}
	r.Pending = int(pending)
	return r, nil
}
