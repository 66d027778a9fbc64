package storetest

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/ordersync/ordersync/connectors"
)

// runCursors runs the topic of connectors.CursorStore: a missing cursor is the zero
// one, a saved cursor comes back whole (times in UTC, nil times nil), a save replaces
// the saved cursor, and the list is ordered by connector name.
func runCursors(t *testing.T, h Harness) {
	t.Helper()
	for _, tc := range []struct {
		name string
		fn   func(t *testing.T, s connectors.CursorStore)
	}{
		{"Missing", testCursorMissing},
		{"RoundTrip", testCursorRoundTrip},
		{"NilTimes", testCursorNilTimes},
		{"Upsert", testCursorUpsert},
		{"ListByName", testCursorsListByName},
		{"Validates", testCursorValidates},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.fn(t, h.open(t, Options{}, "Cursors").Cursors)
		})
	}
}

// almaty is where Kaspi's times are; the store must give them back in UTC.
var almaty = time.FixedZone("Asia/Almaty", 5*3600)

func at(h, m int) *time.Time {
	tm := time.Date(2026, 9, 16, h, m, 7, 123456000, almaty) // microseconds: every store keeps them
	return &tm
}

func loadCursor(t *testing.T, s connectors.CursorStore, name string) connectors.Cursor {
	t.Helper()
	c, err := s.Cursor(t.Context(), name)
	if err != nil {
		t.Fatalf("cursor %s: %v", name, err)
	}
	return c
}

func saveCursor(t *testing.T, s connectors.CursorStore, c connectors.Cursor) {
	t.Helper()
	if err := s.SaveCursor(t.Context(), c); err != nil {
		t.Fatalf("save cursor %s: %v", c.Connector, err)
	}
}

// sameCursor compares times as instants, and wants them in UTC.
func sameCursor(t *testing.T, what string, got, want connectors.Cursor) {
	t.Helper()
	fail := func(why string) {
		t.Helper()
		t.Fatalf("%s: %s\n got %s\nwant %s", what, why, showCursor(got), showCursor(want))
	}
	if got.Connector != want.Connector || got.LastError != want.LastError || got.OrdersSeen != want.OrdersSeen || got.Unreadable != want.Unreadable {
		fail("fields differ")
	}
	if !got.Position.Equal(want.Position) {
		fail("position differs")
	}
	if !got.Position.IsZero() && got.Position.Location() != time.UTC {
		fail("position is not in UTC")
	}
	for _, p := range []struct {
		name      string
		got, want *time.Time
	}{{"last_poll_at", got.LastPollAt, want.LastPollAt}, {"last_success_at", got.LastSuccessAt, want.LastSuccessAt}} {
		switch {
		case (p.got == nil) != (p.want == nil):
			fail(p.name + " differs in presence")
		case p.got != nil && !p.got.Equal(*p.want):
			fail(p.name + " differs")
		case p.got != nil && p.got.Location() != time.UTC:
			fail(p.name + " is not in UTC")
		}
	}
}

func showCursor(c connectors.Cursor) string {
	tm := func(t *time.Time) string {
		if t == nil {
			return "nil"
		}
		return t.String()
	}
	return fmt.Sprintf("{%s position %v poll %s success %s error %q seen %d unreadable %d}",
		c.Connector, c.Position, tm(c.LastPollAt), tm(c.LastSuccessAt), c.LastError, c.OrdersSeen, c.Unreadable)
}

func testCursorMissing(t *testing.T, s connectors.CursorStore) {
	got := loadCursor(t, s, "kaspi")
	sameCursor(t, "missing cursor", got, connectors.Cursor{Connector: "kaspi"})
	if !got.Position.IsZero() || got.LastPollAt != nil || got.LastSuccessAt != nil {
		t.Fatalf("missing cursor: got %s, want the zero cursor", showCursor(got))
	}
	cs, err := s.Cursors(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(cs) != 0 {
		t.Fatalf("cursors of an empty store: got %d, want none", len(cs))
	}
}

func testCursorRoundTrip(t *testing.T, s connectors.CursorStore) {
	want := connectors.Cursor{
		Connector:     "ozon",
		Position:      *at(10, 0),
		LastPollAt:    at(10, 1),
		LastSuccessAt: at(10, 0),
		LastError:     "ozon: list postings page 3: 503 Service Unavailable",
		OrdersSeen:    12345678901,
		Unreadable:    2,
	}
	saveCursor(t, s, want)
	sameCursor(t, "saved cursor", loadCursor(t, s, "ozon"), want)
	sameCursor(t, "other connector", loadCursor(t, s, "kaspi"), connectors.Cursor{Connector: "kaspi"})
}

func testCursorNilTimes(t *testing.T, s connectors.CursorStore) {
	// A first poll that failed: no position, no success yet.
	want := connectors.Cursor{Connector: "wildberries", LastPollAt: at(9, 30), LastError: "401: check connectors.wildberries.token", OrdersSeen: 3}
	saveCursor(t, s, want)
	got := loadCursor(t, s, "wildberries")
	sameCursor(t, "cursor without position", got, want)
	if !got.Position.IsZero() || got.LastSuccessAt != nil {
		t.Fatalf("cursor without position: got %s, want zero position and nil last success", showCursor(got))
	}
	empty := connectors.Cursor{Connector: "kaspi"}
	saveCursor(t, s, empty)
	sameCursor(t, "zero cursor", loadCursor(t, s, "kaspi"), empty)
}

func testCursorUpsert(t *testing.T, s connectors.CursorStore) {
	first := connectors.Cursor{Connector: "kaspi", Position: *at(10, 0), LastPollAt: at(10, 0), LastSuccessAt: at(10, 0), OrdersSeen: 5}
	saveCursor(t, s, first)
	other := connectors.Cursor{Connector: "ozon", Position: *at(8, 0), OrdersSeen: 1}
	saveCursor(t, s, other)

	second := first
	second.Position = *at(11, 0)
	second.LastPollAt = at(11, 0)
	second.LastSuccessAt = at(11, 0)
	second.OrdersSeen = 9
	second.Unreadable = 1
	saveCursor(t, s, second)
	sameCursor(t, "after a second save", loadCursor(t, s, "kaspi"), second)

	// The whole cursor is written: cleared fields are cleared, not kept.
	third := connectors.Cursor{Connector: "kaspi", LastPollAt: at(12, 0), LastError: "kaspi: 500", OrdersSeen: 9}
	saveCursor(t, s, third)
	sameCursor(t, "after a save that clears fields", loadCursor(t, s, "kaspi"), third)
	sameCursor(t, "the other connector", loadCursor(t, s, "ozon"), other)

	cs, err := s.Cursors(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(cs) != 2 {
		t.Fatalf("cursors after upserts: got %d, want 2", len(cs))
	}
}

func testCursorsListByName(t *testing.T, s connectors.CursorStore) {
	want := map[string]connectors.Cursor{
		"wildberries": {Connector: "wildberries", Position: *at(7, 0), LastPollAt: at(7, 1), LastSuccessAt: at(7, 0), OrdersSeen: 7},
		"kaspi":       {Connector: "kaspi", LastPollAt: at(8, 1), LastError: "kaspi: 401", Unreadable: 1},
		"ozon":        {Connector: "ozon", Position: *at(9, 0), LastPollAt: at(9, 1), LastSuccessAt: at(9, 1), OrdersSeen: 9},
		"bitrix24":    {Connector: "bitrix24"},
	}
	for _, name := range []string{"wildberries", "kaspi", "ozon", "bitrix24"} {
		saveCursor(t, s, want[name])
	}
	cs, err := s.Cursors(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, c := range cs {
		names = append(names, c.Connector)
		sameCursor(t, "listed "+c.Connector, c, want[c.Connector])
	}
	if w := []string{"bitrix24", "kaspi", "ozon", "wildberries"}; !slices.Equal(names, w) {
		t.Fatalf("cursors: got %v, want %v (by name)", names, w)
	}
}

func testCursorValidates(t *testing.T, s connectors.CursorStore) {
	if err := s.SaveCursor(t.Context(), connectors.Cursor{OrdersSeen: 1}); err == nil {
		t.Fatal("save a cursor without a connector name: got nil, want an error")
	}
	cs, err := s.Cursors(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(cs) != 0 {
		t.Fatalf("cursors after a refused save: got %d, want none", len(cs))
	}
}
