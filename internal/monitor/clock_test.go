package monitor

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"
)

// jsonRecords are the JSON records written to b.
func jsonRecords(t *testing.T, b string) []map[string]any {
	t.Helper()
	var recs []map[string]any
	for _, line := range strings.Split(b, "\n") {
		var rec map[string]any
		if json.Unmarshal([]byte(line), &rec) == nil {
			recs = append(recs, rec)
		}
	}
	return recs
}

// The clock watch warns when the process's clock and the database's differ by more
// than a second — once, again when the difference moves by more than that or an hour
// has passed, and says when they agree again — and sets the gauge at each
// measurement.
func TestClockWatchWarnsPastASecond(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	var gauge []time.Duration
	w := newClockWatch(slog.New(slog.NewJSONHandler(&buf, nil)), "db", func(d time.Duration) { gauge = append(gauge, d) })
	now := time.Date(2026, 9, 16, 10, 0, 0, 0, time.UTC)
	w.now = func() time.Time { return now }
	step := func(off time.Duration, want ...string) {
		t.Helper()
		buf.Reset()
		w.measured(off)
		var got []string
		for _, r := range jsonRecords(t, buf.String()) {
			got = append(got, r["level"].(string)+" "+r["msg"].(string))
		}
		if len(got) != len(want) {
			t.Fatalf("offset %s: logged %q, want %d record(s) %q", off, got, len(want), want)
		}
		for i := range want {
			if !strings.Contains(got[i], want[i]) {
				t.Fatalf("offset %s: logged %q, want %q", off, got[i], want[i])
			}
		}
	}
	step(0)
	step(900 * time.Millisecond)
	step(-2*time.Second, "WARN the process's clock and the database's differ by 2s (this machine's is ahead of the database's)")
	step(-2500 * time.Millisecond) // within a second of the last warning
	step(-3500*time.Millisecond, "WARN the process's clock and the database's differ by 3.5s")
	now = now.Add(time.Hour)
	step(-3500*time.Millisecond, "WARN the process's clock and the database's differ by 3.5s")
	step(5*time.Minute, "WARN the process's clock and the database's differ by 5m0s (this machine's is behind the database's)")
	step(200*time.Millisecond, "INFO the process's clock and the database's agree again")
	step(100 * time.Millisecond)
	if len(gauge) != 9 || gauge[5] != -3500*time.Millisecond || gauge[8] != 100*time.Millisecond {
		t.Fatalf("gauge set to %v, want every measurement", gauge)
	}
	// Without the admin listener there is no gauge to set.
	newClockWatch(slog.New(slog.DiscardHandler), "db", nil).measured(-time.Hour)
}
