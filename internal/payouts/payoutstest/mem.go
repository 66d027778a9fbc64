// Package payoutstest holds what the tests of payout readers share: a payouts.Store
// in memory, with the stores' rules (payouts.CheckLines, idempotence by line id),
// and the check every line a reader makes must pass.
package payoutstest

import (
	"context"
	"slices"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/ordersync/ordersync/internal/payouts"
)

// Mem is a payouts.Store in memory. It is safe for concurrent use.
type Mem struct {
	mu      sync.Mutex
	lines   map[[2]string]payouts.Line
	fetches []payouts.Fetch
}

var _ payouts.Store = (*Mem)(nil)

// NewMem returns an empty store.
func NewMem() *Mem { return &Mem{lines: map[[2]string]payouts.Line{}} }

// SaveLines keeps the lines not kept yet, refusing the batch when one does not pass
// payouts.CheckLines.
func (m *Mem) SaveLines(_ context.Context, lines []payouts.Line) (payouts.Saved, error) {
	if err := payouts.CheckLines(lines); err != nil {
		return payouts.Saved{}, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	var s payouts.Saved
	for _, l := range lines {
		k := [2]string{l.Source, l.LineID}
		if _, ok := m.lines[k]; ok {
			s.Repeated++
			continue
		}
		l.FetchedAt = time.Now().UTC()
		m.lines[k] = l
		s.Inserted++
	}
	return s, nil
}

// Lines returns the lines q selects, by date, then line id.
func (m *Mem) Lines(_ context.Context, q payouts.Query) ([]payouts.Line, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []payouts.Line
	for _, l := range m.lines {
		switch {
		case q.Source != "" && l.Source != q.Source:
		case len(q.OrderIDs) > 0 && !slices.Contains(q.OrderIDs, l.OrderID):
		case len(q.OrderIDs) == 0 && !q.From.IsZero() && l.Date.Before(q.From):
		case len(q.OrderIDs) == 0 && !q.To.IsZero() && !l.Date.Before(q.To):
		default:
			out = append(out, l)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if !out[i].Date.Equal(out[j].Date) {
			return out[i].Date.Before(out[j].Date)
		}
		if out[i].LineID != out[j].LineID {
			return out[i].LineID < out[j].LineID
		}
		return out[i].Source < out[j].Source
	})
	return out, nil
}

// RecordFetch keeps f.
func (m *Mem) RecordFetch(_ context.Context, f payouts.Fetch) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.fetches = append(m.fetches, f)
	return nil
}

// LastFetches returns the latest reading of each source, by source.
func (m *Mem) LastFetches(context.Context) ([]payouts.Fetch, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	last := map[string]payouts.Fetch{}
	for _, f := range m.fetches {
		if l, ok := last[f.Source]; !ok || !f.StartedAt.Before(l.StartedAt) {
			last[f.Source] = f
		}
	}
	var out []payouts.Fetch
	for _, f := range last {
		out = append(out, f)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Source < out[j].Source })
	return out, nil
}

// Fetches returns the latest limit readings of source, the newest first.
func (m *Mem) Fetches(_ context.Context, source string, limit int) ([]payouts.Fetch, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []payouts.Fetch
	for i := len(m.fetches) - 1; i >= 0 && len(out) < max(limit, 1); i-- {
		if m.fetches[i].Source == source {
			out = append(out, m.fetches[i])
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].StartedAt.After(out[j].StartedAt) })
	return out, nil
}

// Recorded returns every reading recorded, in order.
func (m *Mem) Recorded() []payouts.Fetch {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.fetches)
}

// CheckLine fails t when a line a reader made breaks a rule: it must Validate (its
// amount the exact sum of its parts) and keep the marketplace's record.
func CheckLine(t testing.TB, l payouts.Line) {
	t.Helper()
	if err := l.Validate(); err != nil {
		t.Errorf("line %s: %v", l.LineID, err)
	}
	if !l.Parts().Equal(l.Amount) {
		t.Errorf("line %s: amount %s, parts %s", l.LineID, l.Amount, l.Parts())
	}
	if len(l.Raw) == 0 {
		t.Errorf("line %s keeps no raw record", l.LineID)
	}
}
