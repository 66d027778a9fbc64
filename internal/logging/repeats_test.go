package logging

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"
)

func TestRepeatsLogsARunOnceThenWithACount(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(slog.NewJSONHandler(&buf, nil))
	now := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	r := &Repeats{Every: time.Minute, Now: func() time.Time { return now }}
	ctx := context.Background()
	for i := range 58 { // one failure a second for 58 s
		r.Fail(ctx, log, "could not apply recorded wakes", errors.New("connection refused"), "try", i)
		now = now.Add(time.Second)
	}
	if !r.Failing("could not apply recorded wakes") {
		t.Fatal("the run is not reported as going on")
	}
	now = now.Add(5 * time.Second) // 63 s after the first: the second line is due
	r.Fail(ctx, log, "could not apply recorded wakes", errors.New("connection refused"))
	if !r.OK(ctx, log, "could not apply recorded wakes") {
		t.Fatal("OK after failures reported no run")
	}
	if r.OK(ctx, log, "could not apply recorded wakes") {
		t.Fatal("a second OK reported a run")
	}
	var lines []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatal(err)
		}
		lines = append(lines, m)
	}
	if len(lines) != 3 {
		t.Fatalf("%d lines for 59 failures and a recovery, want 3:\n%s", len(lines), buf.String())
	}
	if lines[0]["level"] != "ERROR" || lines[0]["repeated"] != nil {
		t.Fatalf("first line %v, want the ERROR with no count", lines[0])
	}
	if lines[1]["level"] != "ERROR" || lines[1]["repeated"] != float64(58) || lines[1]["failures"] != float64(59) {
		t.Fatalf("second line %v, want ERROR repeated 58, failures 59", lines[1])
	}
	if lines[2]["level"] != "INFO" || lines[2]["failures"] != float64(59) || !strings.HasPrefix(lines[2]["msg"].(string), "recovered: ") {
		t.Fatalf("last line %v, want the INFO recovery after 59 failures", lines[2])
	}
}
