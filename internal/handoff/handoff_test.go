package handoff

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/ordersync/ordersync/internal/journal"
	"github.com/ordersync/ordersync/internal/store/sqlite"
)

// TestSettled: a hand-off waits for an attempt newer than the ones it saw,
// and for the operation row that records it; a requeued operation whose old
// attempt finished long ago is not an outcome.
func TestSettled(t *testing.T) {
	t0 := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	done := func(n int) journal.Attempt {
		f := t0.Add(time.Duration(n) * time.Second)
		return journal.Attempt{Attempt: n, StartedAt: f.Add(-time.Millisecond), FinishedAt: &f}
	}
	open := journal.Attempt{Attempt: 2, StartedAt: t0.Add(3 * time.Second)}
	detail := func(status journal.Status, attempts int, history ...journal.Attempt) journal.Detail {
		return journal.Detail{Operation: journal.Operation{Status: status, Attempts: attempts}, History: history}
	}
	failedOnce := detail(journal.StatusFailed, 1, done(1))
	for _, c := range []struct {
		name      string
		prev, now journal.Detail
		want      bool
	}{
		{"requeued, not claimed yet", failedOnce, detail(journal.StatusPending, 1, done(1)), false},
		{"claimed, call in flight", failedOnce, detail(journal.StatusPending, 1, done(1), open), false},
		{"attempt row closed, operation row not yet read with it", failedOnce, detail(journal.StatusPending, 1, done(1), done(2)), false},
		{"new attempt done", failedOnce, detail(journal.StatusDone, 2, done(1), done(2)), true},
		{"new attempt failed again", failedOnce, detail(journal.StatusFailed, 2, done(1), done(2)), true},
		{"new attempt scheduled a retry", failedOnce, detail(journal.StatusPending, 2, done(1), done(2)), true},
		{"fresh operation, first attempt", detail(journal.StatusPending, 0), detail(journal.StatusFailed, 1, done(1)), true},
		{"already done", detail(journal.StatusDone, 1, done(1)), detail(journal.StatusDone, 1, done(1)), true},
		// The service may have claimed the operation (a cancel just registered)
		// before the hand-off first looked: the attempt it saw open is its outcome.
		{"in flight when looked, still in flight", detail(journal.StatusPending, 1, done(1), open), detail(journal.StatusPending, 1, done(1), open), false},
		{"in flight when looked, done since", detail(journal.StatusPending, 1, done(1), open), detail(journal.StatusDone, 2, done(1), done(2)), true},
		{"first attempt in flight when looked, done since", detail(journal.StatusPending, 0, journal.Attempt{Attempt: 1, StartedAt: t0}),
			detail(journal.StatusDone, 1, done(1)), true},
	} {
		if got := settled(c.prev, c.now); got != c.want {
			t.Errorf("%s: settled %v, want %v", c.name, got, c.want)
		}
	}
}

// fakeJournal is a journal whose operations a fake service attempts once woken.
type fakeJournal struct {
	mu       sync.Mutex
	ops      map[string]journal.Detail
	requeued []string
}

func (j *fakeJournal) Show(_ context.Context, key string) (journal.Detail, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	d, ok := j.ops[key]
	if !ok {
		return d, journal.ErrNotFound
	}
	return d, nil
}

func (j *fakeJournal) Requeue(_ context.Context, key string) (journal.Operation, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.requeued = append(j.requeued, key)
	return j.ops[key].Operation, nil
}

// attempt finishes a new attempt of every operation that is not done.
func (j *fakeJournal) attempt() {
	j.mu.Lock()
	defer j.mu.Unlock()
	for k, d := range j.ops {
		if d.Status == journal.StatusDone {
			continue
		}
		now := time.Now()
		d.Attempts++
		d.Status = journal.StatusDone
		d.History = append(append([]journal.Attempt(nil), d.History...), journal.Attempt{Attempt: d.Attempts, StartedAt: now, FinishedAt: &now})
		j.ops[k] = d
	}
}

type runFunc func(ctx context.Context, key string) (journal.Operation, error)

func (f runFunc) RunKey(ctx context.Context, key string) (journal.Operation, error) {
	return f(ctx, key)
}

// TestRunKeysHandsOffToTheService: with a service holding the embedded database's
// run lock, the keys not done are requeued, the service is woken, and the outcome
// of its attempts is returned; no engine is built.
func TestRunKeysHandsOffToTheService(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ordersync.db")
	lock, err := sqlite.AcquireRunLock(path) // this process plays the service
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Release()
	j := &fakeJournal{ops: map[string]journal.Detail{
		"a": {Operation: journal.Operation{Key: "a", Status: journal.StatusFailed}},
		"b": {Operation: journal.Operation{Key: "b", Status: journal.StatusDone, Attempts: 1}},
	}}
	var stderr bytes.Buffer
	woken := 0
	ops, err := RunKeys(context.Background(), Config{Journal: j, Database: "database x", Embedded: path, Role: "resync",
		OneCTimeout: time.Second, Stderr: &stderr, Log: slog.New(slog.DiscardHandler),
		Wake: func(pid int) error {
			if pid != os.Getpid() {
				t.Errorf("woke pid %d, want %d", pid, os.Getpid())
			}
			woken++
			go j.attempt()
			return nil
		},
		Engine: func() (Runner, func(), error) {
			t.Fatal("an engine was built beside a running service")
			return nil, nil, nil
		},
	}, []string{"a", "b"})
	if err != nil {
		t.Fatal(err)
	}
	if len(ops) != 2 || ops[0].Key != "a" || ops[0].Status != journal.StatusDone || ops[0].Attempts != 1 || ops[1].Key != "b" {
		t.Fatalf("ops %+v", ops)
	}
	if woken != 1 || len(j.requeued) != 1 || j.requeued[0] != "a" {
		t.Errorf("woken %d times, requeued %v; want once, [a]", woken, j.requeued)
	}
	want := fmt.Sprintf("handed 2 operation(s) to the running service (pid %d); waiting for the outcome\n", os.Getpid())
	if stderr.String() != want {
		t.Errorf("stderr %q, want %q", stderr.String(), want)
	}
}

// TestRunKeysWorksItselfHoldingTheRunLock: with no service, the keys are carried
// out in this process, under the run lock taken in the command's name; an error
// names its key and ends the run.
func TestRunKeysWorksItselfHoldingTheRunLock(t *testing.T) {
	for _, embedded := range []bool{false, true} {
		path := ""
		if embedded {
			path = filepath.Join(t.TempDir(), "ordersync.db")
		}
		closed := false
		run := runFunc(func(_ context.Context, key string) (journal.Operation, error) {
			if embedded {
				if h, held := sqlite.RunLockHolder(path); !held || h.Role != "order import" || h.PID != os.Getpid() {
					t.Errorf("working %s: run lock holder %v, %v; want this command", key, h, held)
				}
			}
			if key == "bad" {
				return journal.Operation{}, errors.New("boom")
			}
			return journal.Operation{Key: key, Status: journal.StatusDone}, nil
		})
		ops, err := RunKeys(context.Background(), Config{Embedded: path, Role: "order import", OneCTimeout: time.Second,
			Wake:   func(int) error { t.Fatal("woke a service"); return nil },
			Engine: func() (Runner, func(), error) { return run, func() { closed = true }, nil },
		}, []string{"a", "bad", "c"})
		if len(ops) != 1 || ops[0].Key != "a" || err == nil || err.Error() != "bad: boom" {
			t.Errorf("embedded %v: ops %+v, err %v; want [a] and bad: boom", embedded, ops, err)
		}
		if !closed {
			t.Errorf("embedded %v: the engine was not closed", embedded)
		}
		if embedded {
			if _, held := sqlite.RunLockHolder(path); held {
				t.Error("the run lock is still held")
			}
		}
	}
}
