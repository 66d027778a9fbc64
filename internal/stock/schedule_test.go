package stock

import (
	"testing"
	"time"

	"github.com/shopspring/decimal"
)

func mustLoad(t *testing.T, name string) *time.Location {
	t.Helper()
	loc, err := time.LoadLocation(name)
	if err != nil {
		t.Fatal(err)
	}
	return loc
}

func TestEverySlotsAreTheSameInEveryZone(t *testing.T) {
	almaty := mustLoad(t, "Asia/Almaty")
	moscow := mustLoad(t, "Europe/Moscow")
	a, err := ParseSpec("@every 7s", almaty)
	if err != nil {
		t.Fatal(err)
	}
	b, err := ParseSpec("@every 7s", moscow)
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 9, 16, 10, 0, 3, 500, time.UTC)
	fa, fb := a.Floor(at), b.Floor(at.In(moscow))
	if !fa.Equal(fb) {
		t.Fatalf("floors differ by zone: %s and %s", fa, fb)
	}
	if fa.Unix()%7 != 0 || fa.After(at) || at.Sub(fa) >= 7*time.Second {
		t.Fatalf("floor %s of %s is not the multiple of 7s since the epoch at or before it", fa, at)
	}
	if n := a.Next(at); !n.Equal(fa.Add(7 * time.Second)) {
		t.Fatalf("next = %s, want %s", n, fa.Add(7*time.Second))
	}
	if n := a.Next(fa); !n.Equal(fa.Add(7 * time.Second)) {
		t.Fatalf("next of a slot = %s, want the following slot", n)
	}
	// Seconds in the label only when the schedule fires more often than once a minute.
	if got := a.Label(fa); len(got) != len("2006-01-02T15:04:05") {
		t.Fatalf("label of a 7s slot = %q, want seconds", got)
	}
	m, _ := ParseSpec("@every 15m", almaty)
	slot := m.Floor(time.Date(2026, 9, 16, 4, 7, 0, 0, time.UTC))
	if got, want := m.Label(slot), time.Date(2026, 9, 16, 4, 0, 0, 0, time.UTC).In(almaty).Format("2006-01-02T15:04"); got != want {
		t.Fatalf("label of a 15m slot = %q, want %q (Almaty time, to the minute)", got, want)
	}
}

func TestCronSlotsInTheScheduleZone(t *testing.T) {
	almaty := mustLoad(t, "Asia/Almaty")
	s, err := ParseSpec("*/30 * * * *", almaty)
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 9, 16, 4, 47, 12, 0, time.UTC)
	f := s.Floor(at)
	if f.After(at) || at.Sub(f) >= 30*time.Minute || f.In(almaty).Minute()%30 != 0 || f.Second() != 0 {
		t.Fatalf("floor = %s of %s", f, at)
	}
	if n := s.Next(f); n.Sub(f) != 30*time.Minute {
		t.Fatalf("next after %s = %s", f, n)
	}
	daily, _ := ParseSpec("0 9 * * *", almaty)
	f = daily.Floor(time.Date(2026, 9, 16, 1, 0, 0, 0, almaty))
	if got, want := daily.Label(f), "2026-09-15T09:00"; got != want {
		t.Fatalf("daily floor label = %q, want %q (the day before, in the zone)", got, want)
	}
	yearly, _ := ParseSpec("@yearly", almaty)
	if f := yearly.Floor(time.Date(2026, 9, 16, 0, 0, 0, 0, almaty)); yearly.Label(f) != "2026-01-01T00:00" {
		t.Fatalf("yearly floor = %s", yearly.Label(f))
	}
}

func TestParseSpecRefuses(t *testing.T) {
	for _, spec := range []string{"", "* * * *", "61 * * * *", "@every 0s", "@every 1500ms", "@every soon", "TZ=UTC * * * * *", "@fortnightly", "* * * * * *", "*/61 * * * *", "0 */25 * * *", "0 0 1 */13 *"} {
		if _, err := ParseSpec(spec, time.UTC); err == nil {
			t.Errorf("ParseSpec(%q) accepted", spec)
		}
	}
}

func TestKeyAndAmount(t *testing.T) {
	if got, want := Key("main", "WH1", "2026-09-16T10:00"), "stock:main:WH1:2026-09-16T10:00"; got != want {
		t.Fatalf("key = %q, want %q", got, want)
	}
	for _, tc := range []struct {
		q       string
		max     int64
		want    int64
		warning bool
	}{
		{"14", 0, 14, false},
		{"2.500", 0, 2, true},
		{"2.000", 0, 2, false},
		{"-3", 0, 0, true},
		{"0", 0, 0, false},
		{"150000", 100000, 100000, true},
		{"100000", 100000, 100000, false},
		{"123456789012345678901234567890", 0, 1 << 53, true},
	} {
		got, w := Amount(decimal.RequireFromString(tc.q), tc.max)
		if got != tc.want || (w != "") != tc.warning {
			t.Errorf("Amount(%s, %d) = %d, %q; want %d, warning %v", tc.q, tc.max, got, w, tc.want, tc.warning)
		}
	}
}
