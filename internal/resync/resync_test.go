package resync

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/ordersync/ordersync/internal/journal"
)

// fakeJournal lists its operations, newest first, and records the calls made.
type fakeJournal struct {
	listed     []journal.Operation
	filter     journal.Filter
	calls      []string
	requeueErr map[string]error
}

func (j *fakeJournal) List(_ context.Context, f journal.Filter) ([]journal.Operation, error) {
	j.filter = f
	return j.listed, nil
}

func (j *fakeJournal) Requeue(_ context.Context, key string) (journal.Operation, error) {
	j.calls = append(j.calls, "requeue "+key)
	return journal.Operation{Key: key}, j.requeueErr[key]
}

// TestSelectListsEveryOneOldestFirst: every operation is asked for, the oldest comes
// first, and an operation the store returned beyond the filter (a status, a last
// error without the text) is left out.
func TestSelectListsEveryOneOldestFirst(t *testing.T) {
	j := &fakeJournal{listed: []journal.Operation{
		{Key: "newest", Status: journal.StatusFailed, LastError: "unknown SKU x"},
		{Key: "done", Status: journal.StatusDone, LastError: "SKU"},
		{Key: "other error", Status: journal.StatusFailed, LastError: "timeout"},
		{Key: "oldest", Status: journal.StatusFailed, LastError: "Unknown sku y"},
	}}
	ops, err := Select(context.Background(), j, journal.Filter{Status: journal.StatusFailed, ErrorContains: "SKU", Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, op := range ops {
		keys = append(keys, op.Key)
	}
	if fmt.Sprint(keys) != "[oldest newest]" {
		t.Errorf("selected %v, want [oldest newest]", keys)
	}
	if j.filter.Limit != listLimit || j.filter.ErrorContains != "SKU" || j.filter.Status != journal.StatusFailed {
		t.Errorf("listed with %+v, want the filter with limit %d", j.filter, listLimit)
	}
}

func ops(keys ...string) []journal.Operation {
	out := make([]journal.Operation, len(keys))
	for i, k := range keys {
		out[i] = journal.Operation{Key: k, Status: journal.StatusFailed}
	}
	return out
}

// TestRunBatchByBatch: each batch is requeued, then carried out, in order; the
// outcomes are counted and heard one by one.
func TestRunBatchByBatch(t *testing.T) {
	j := &fakeJournal{requeueErr: map[string]error{"b": journal.ErrNotPending}}
	var heard []string
	out := Run(context.Background(), Config{Journal: j, Batch: 2,
		Run: func(_ context.Context, keys []string) ([]journal.Operation, error) {
			j.calls = append(j.calls, "run "+strings.Join(keys, ","))
			var done []journal.Operation
			for _, k := range keys {
				st := journal.StatusDone
				if k == "c" {
					st = journal.StatusFailed
				}
				done = append(done, journal.Operation{Key: k, Status: st})
			}
			return done, nil
		},
		Ended: func(op journal.Operation, n int) { heard = append(heard, fmt.Sprintf("%d:%s", n, op.Key)) },
	}, ops("a", "b", "c", "d", "e"))
	if out.Err != nil || out.Retried != 5 || out.Done != 4 || out.StillFailing != 1 || len(out.Operations) != 5 {
		t.Fatalf("outcome %+v", out)
	}
	want := "[requeue a requeue b run a,b requeue c requeue d run c,d requeue e run e]"
	if fmt.Sprint(j.calls) != want {
		t.Errorf("calls %v, want %s", j.calls, want)
	}
	if fmt.Sprint(heard) != "[1:a 2:b 3:c 4:d 5:e]" {
		t.Errorf("heard %v", heard)
	}
}

// TestRunStopsAtTheFirstError: a failed run keeps what it did; a failed requeue
// runs nothing of its batch.
func TestRunStopsAtTheFirstError(t *testing.T) {
	j := &fakeJournal{}
	out := Run(context.Background(), Config{Journal: j, Batch: 2,
		Run: func(_ context.Context, keys []string) ([]journal.Operation, error) {
			j.calls = append(j.calls, "run "+strings.Join(keys, ","))
			if keys[0] == "c" {
				return []journal.Operation{{Key: "c", Status: journal.StatusDone}}, errors.New("d: boom")
			}
			return ops(keys...), nil
		}}, ops("a", "b", "c", "d", "e"))
	if out.Err == nil || out.Err.Error() != "d: boom" || out.Retried != 3 || out.Done != 1 || out.StillFailing != 2 {
		t.Fatalf("outcome %+v", out)
	}
	if fmt.Sprint(j.calls) != "[requeue a requeue b run a,b requeue c requeue d run c,d]" {
		t.Errorf("calls %v", j.calls)
	}

	j = &fakeJournal{requeueErr: map[string]error{"c": errors.New("locked")}}
	out = Run(context.Background(), Config{Journal: j, Batch: 2,
		Run: func(_ context.Context, keys []string) ([]journal.Operation, error) {
			j.calls = append(j.calls, "run "+strings.Join(keys, ","))
			return ops(keys...), nil
		}}, ops("a", "b", "c", "d"))
	if out.Err == nil || out.Err.Error() != "requeue c: locked" || out.Retried != 2 {
		t.Fatalf("outcome %+v", out)
	}
	if fmt.Sprint(j.calls) != "[requeue a requeue b run a,b requeue c]" {
		t.Errorf("calls %v", j.calls)
	}
}

func TestBatchSize(t *testing.T) {
	for in, want := range map[int]int{0: 1, -3: 1, 1: 1, 8: 8} {
		if got := BatchSize(in); got != want {
			t.Errorf("BatchSize(%d) = %d, want %d", in, got, want)
		}
	}
}
