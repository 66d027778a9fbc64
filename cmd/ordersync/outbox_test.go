package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ordersync/ordersync/internal/eventually"
	"github.com/ordersync/ordersync/internal/sim"
	"github.com/ordersync/ordersync/internal/sim/onecsim"
	"github.com/ordersync/ordersync/internal/sim/webhooksim"
)

const sinkSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"

// withSink adds a signed webhook destination "crm" for order.created to e.
func (e *env) withSink() *webhooksim.Sink {
	e.t.Helper()
	sink, err := webhooksim.New(webhooksim.Options{Secrets: []string{sinkSecret}})
	if err != nil {
		e.t.Fatal(err)
	}
	if err := sink.Start("127.0.0.1:0"); err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(sink.Close)
	e.environ = append(e.environ,
		"ORDERSYNC_RELAY__DESTINATIONS__CRM__TYPE=webhook",
		"ORDERSYNC_RELAY__DESTINATIONS__CRM__URL="+sink.URL(),
		"ORDERSYNC_RELAY__DESTINATIONS__CRM__SECRETS="+sinkSecret,
		"ORDERSYNC_RELAY__DESTINATIONS__CRM__EVENTS=order.created",
		"ORDERSYNC_RELAY__POLL_INTERVAL=20ms",
		"ORDERSYNC_RELAY__BACKOFF_MIN=10ms",
		"ORDERSYNC_RELAY__BACKOFF_MAX=20ms",
		"ORDERSYNC_RELAY__MAX_ATTEMPTS=2",
	)
	return sink
}

// runInProcess runs `ordersync run` in this process until the returned stop is
// called; stop returns the exit code.
func (e *env) runInProcess() (stop func() int) {
	stop, _ = e.runWithLog()
	return stop
}

// webhooksURL waits for the running service's log to say where it listens.
func webhooksURL(t *testing.T, log *lockedBuffer) string {
	t.Helper()
	var addr string
	eventually.True(t, "the webhooks' listening address in the log", func() bool {
		for _, line := range strings.Split(log.String(), "\n") {
			var rec struct{ Msg, Address string }
			if json.Unmarshal([]byte(line), &rec) == nil && rec.Msg == "webhooks listening" {
				addr = rec.Address
				return true
			}
		}
		return false
	})
	return addr
}

func (e *env) runWithLog() (stop func() int, log *lockedBuffer) {
	e.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	code := make(chan int, 1)
	stderr := &lockedBuffer{}
	go func() {
		code <- Main(ctx, []string{"run"}, strings.NewReader(""), &bytes.Buffer{}, stderr, e.environ)
	}()
	stopped := false
	stop = func() int {
		if stopped {
			return 0
		}
		stopped = true
		cancel()
		select {
		case c := <-code:
			if c != 0 {
				e.t.Logf("run log:\n%s", stderr.String())
			}
			return c
		case <-time.After(30 * time.Second):
			e.t.Fatalf("run did not stop within 30s")
			return -1
		}
	}
	e.t.Cleanup(func() { stop() })
	return stop, stderr
}

func TestOrderCreatedReachesTheWebhookSignedExactlyOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t, onecsim.Options{}, true)
	sink := e.withSink()
	order := orderJSON("W-1", "SKU-1", "2", "1500.10")
	if _, stderr, code := e.cli(order, "order", "import"); code != 0 {
		t.Fatalf("import: %d %s", code, stderr)
	}
	stop := e.runInProcess()
	eventually.True(t, "sink.Count() >= 1", func() bool { return sink.Count() >= 1 })
	// The same order again, and a resync of the done operation: no second event.
	e.cli(order, "order", "import")
	e.cli("", "resync", "site:order:W-1:create")
	// A second event, had they made one, is in the outbox now: wait until every
	// event is sent, so that it would have reached the sink.
	eventually.True(t, "every outbox event sent", func() bool {
		out, _, _ := e.cli("", "outbox", "list", "--format", "json")
		var recs []struct {
			SentAt *time.Time `json:"sent_at"`
		}
		if json.Unmarshal([]byte(out), &recs) != nil || len(recs) == 0 {
			return false
		}
		for _, r := range recs {
			if r.SentAt == nil {
				return false
			}
		}
		return true
	})
	if code := stop(); code != 0 {
		t.Fatalf("run exited %d", code)
	}
	if sink.Count() != 1 || sink.Unique() != 1 || sink.Rejected() != 0 {
		t.Fatalf("sink got %d deliveries (%d unique, %d rejected), want exactly one, signed", sink.Count(), sink.Unique(), sink.Rejected())
	}
	if e.onec.Count() != 1 {
		t.Fatalf("1C holds %d orders", e.onec.Count())
	}
	d := sink.Deliveries()[0]
	var body struct {
		EventID     string `json:"event_id"`
		Type        string `json:"type"`
		AggregateID string `json:"aggregate_id"`
		Sequence    int64  `json:"sequence"`
		OccurredAt  string `json:"occurred_at"`
		Data        struct {
			Order struct {
				ExternalID string `json:"external_id"`
				Lines      []struct{ Price json.Number }
			} `json:"order"`
			OneC struct{ Ref, Number string } `json:"onec"`
		} `json:"data"`
	}
	if err := json.Unmarshal(d.Body, &body); err != nil {
		t.Fatal(err)
	}
	created := e.onec.Orders()[0]
	if body.Type != "order.created" || body.AggregateID != "site:order:W-1" || body.Sequence != 1 || body.EventID != d.WebhookID ||
		body.OccurredAt == "" || body.Data.Order.ExternalID != "W-1" || body.Data.Order.Lines[0].Price.String() != "1500.1" ||
		body.Data.OneC.Ref != created.Ref || body.Data.OneC.Number != created.Number {
		t.Fatalf("event body %s does not describe the created order %s №%s", d.Body, created.Ref, created.Number)
	}
}

func TestDeadEventIsListedAndRequeueDeliversIt(t *testing.T) {
	t.Parallel()
	e := newEnv(t, onecsim.Options{}, true)
	sink := e.withSink()
	sink.Faults.Add(2, sim.Fault{Status: 500}) // relay.max_attempts is 2: the event dies
	if _, stderr, code := e.cli(orderJSON("W-2", "SKU-1", "1", "10"), "order", "import"); code != 0 {
		t.Fatalf("import: %d %s", code, stderr)
	}
	e.runInProcess()
	var dead []struct {
		ID        int64
		EventID   string `json:"event_id"`
		LastError string `json:"last_error"`
	}
	eventually.True(t, "one dead event in outbox list", func() bool {
		out, _, _ := e.cli("", "outbox", "list", "--dead", "--format", "json")
		return json.Unmarshal([]byte(out), &dead) == nil && len(dead) == 1
	})
	if !strings.Contains(dead[0].LastError, "500") || !strings.Contains(dead[0].LastError, "relay.max_attempts") {
		t.Fatalf("dead event's error %q, want the 500 and the attempts limit", dead[0].LastError)
	}
	status, _, code := e.cli("", "outbox", "status", "--format", "json")
	var st []struct {
		Destination string
		Dead        int
	}
	if json.Unmarshal([]byte(status), &st); code != 0 || len(st) != 1 || st[0].Destination != "crm" || st[0].Dead != 1 {
		t.Fatalf("outbox status: exit %d %s", code, status)
	}
	if sink.Count() != 0 {
		t.Fatalf("the sink accepted %d deliveries while failing", sink.Count())
	}

	out, stderr, code := e.cli("", "outbox", "requeue", strconv.FormatInt(dead[0].ID, 10))
	if code != 0 || !strings.Contains(out, "requeued 1") {
		t.Fatalf("requeue: exit %d %q %q", code, out, stderr)
	}
	eventually.True(t, "sink.Count() == 1", func() bool { return sink.Count() == 1 })
	if sink.Deliveries()[0].EventID != dead[0].EventID {
		t.Fatalf("requeue delivered event %s, want the dead %s", sink.Deliveries()[0].EventID, dead[0].EventID)
	}

	// The sink has it; the relay records it sent just after. Replay takes sent events.
	eventually.True(t, "W-2 sent in outbox list", func() bool {
		out, _, _ := e.cli("", "outbox", "list", "--aggregate", "site:order:W-2", "--format", "json")
		var recs []struct {
			SentAt *time.Time `json:"sent_at"`
		}
		return json.Unmarshal([]byte(out), &recs) == nil && len(recs) == 1 && recs[0].SentAt != nil
	})
	// replay sends it again with the same event id, for a consumer that lost it.
	if out, stderr, code := e.cli("", "outbox", "replay", "--aggregate", "site:order:W-2"); code != 0 {
		t.Fatalf("replay: exit %d %q %q", code, out, stderr)
	}
	eventually.True(t, "sink.Count() == 2", func() bool { return sink.Count() == 2 })
	if d := sink.Deliveries(); d[1].EventID != d[0].EventID {
		t.Fatalf("replay sent event %s, want the same id %s", d[1].EventID, d[0].EventID)
	}
	if _, _, code := e.cli("", "outbox", "requeue"); code != 2 {
		t.Fatalf("requeue without ids: exit %d, want 2", code)
	}
}
