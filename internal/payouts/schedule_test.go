package payouts_test

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/shopspring/decimal"

	"github.com/ordersync/ordersync/internal/payouts"
	"github.com/ordersync/ordersync/internal/payouts/payoutstest"
)

// fakeReader answers one line per day of the period asked, and records the periods.
type fakeReader struct {
	mu      sync.Mutex
	periods [][2]time.Time
	after   func(n int)
}

func (r *fakeReader) Source() string { return "ozon" }

func (r *fakeReader) Read(_ context.Context, from, to time.Time, page func(payouts.Page) error) (*decimal.Decimal, error) {
	r.mu.Lock()
	r.periods = append(r.periods, [2]time.Time{from, to})
	n := len(r.periods)
	r.mu.Unlock()
	var p payouts.Page
	p.Number = 1
	for d := from; d.Before(to); d = d.AddDate(0, 0, 1) {
		p.Lines = append(p.Lines, payouts.Line{Source: "ozon", LineID: d.Format(time.DateOnly), Type: "storage",
			Kind: payouts.KindCabinet, Date: d, Currency: "RUB", Amount: decimal.RequireFromString("-1"),
			Other: decimal.RequireFromString("-1"), Raw: json.RawMessage(`{}`)})
	}
	err := page(p)
	if r.after != nil {
		r.after(n)
	}
	return nil, err
}

func TestSchedulerReadsASlidingWindowEachNight(t *testing.T) {
	t.Parallel()
	almaty := time.FixedZone("ALMT", 5*3600)
	spec, err := payouts.ParseSchedule("30 3 * * *", almaty)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	now := time.Date(2026, 9, 16, 12, 0, 0, 0, almaty)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	after := func(d time.Duration) <-chan time.Time {
		mu.Lock()
		now = now.Add(d)
		mu.Unlock()
		ch := make(chan time.Time, 1)
		ch <- clock()
		return ch
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	r := &fakeReader{after: func(n int) {
		if n == 2 {
			cancel()
		}
	}}
	store := payoutstest.NewMem()
	s := payouts.NewScheduler(payouts.SchedulerConfig{Schedule: spec, Window: 72 * time.Hour, Readers: []payouts.Reader{r},
		Store: store, Now: clock, After: after})
	s.Run(ctx)
	if len(r.periods) != 2 {
		t.Fatalf("%d readings, want 2", len(r.periods))
	}
	for i, want := range [][2]time.Time{
		{time.Date(2026, 9, 14, 0, 0, 0, 0, almaty), time.Date(2026, 9, 17, 3, 30, 0, 0, almaty)},
		{time.Date(2026, 9, 15, 0, 0, 0, 0, almaty), time.Date(2026, 9, 18, 3, 30, 0, 0, almaty)},
	} {
		if got := r.periods[i]; !got[0].Equal(want[0]) || !got[1].Equal(want[1]) {
			t.Errorf("reading %d: %s – %s, want %s – %s", i+1, got[0], got[1], want[0], want[1])
		}
	}
	fs := store.Recorded()
	if len(fs) != 2 || fs[0].Saved != (payouts.Saved{Inserted: 4}) || fs[1].Saved != (payouts.Saved{Inserted: 1, Repeated: 3}) {
		t.Errorf("readings recorded: %+v", fs)
	}
}

func TestParseSchedule(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		spec string
		ok   bool
	}{{"30 3 * * *", true}, {"@daily", true}, {"@every 1h", false}, {"CRON_TZ=UTC 30 3 * * *", false}, {"61 3 * * *", false}} {
		_, err := payouts.ParseSchedule(tc.spec, time.UTC)
		if (err == nil) != tc.ok {
			t.Errorf("%q: %v", tc.spec, err)
		}
	}
	for _, s := range []string{"", "off", " OFF "} {
		if !payouts.Off(s) {
			t.Errorf("%q does not turn the schedule off", s)
		}
	}
}

func TestSplitMonths(t *testing.T) {
	t.Parallel()
	from, to := time.Date(2026, 1, 31, 0, 0, 0, 0, time.UTC), time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC)
	got := payouts.SplitMonths(from, to, time.UTC)
	if len(got) != 3 || !got[1][0].Equal(time.Date(2026, 2, 1, 0, 0, 0, 0, time.UTC)) || !got[2][1].Equal(to) {
		t.Errorf("split %v", got)
	}
}
