package server

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ordersync/ordersync/internal/inbox"
	"github.com/ordersync/ordersync/internal/journal"
	"github.com/ordersync/ordersync/internal/order"
	"github.com/ordersync/ordersync/internal/stdwebhook"
	"github.com/ordersync/ordersync/internal/store/postgres"
	"github.com/ordersync/ordersync/internal/store/sqlite"
	"github.com/ordersync/ordersync/internal/testdb"
)

func cancelJSON(source, externalID, reason string) []byte {
	return []byte(fmt.Sprintf(`{"source": %q, "external_id": %q, "cancelled": true, "reason": %q}`, source, externalID, reason))
}

// wantCancelOp checks a registered cancel: its key, kind, and a payload naming the
// create's key, as the pollers register theirs.
func wantCancelOp(t *testing.T, op journal.NewOperation, source, externalID, reason string) {
	t.Helper()
	key := source + ":order:" + externalID + ":cancel"
	if op.Key != key || op.Kind != order.KindCancel || op.Source != source || op.ExternalID != externalID {
		t.Fatalf("operation %+v, want %s of kind %s", op, key, order.KindCancel)
	}
	var c order.Cancel
	if err := json.Unmarshal(op.Payload, &c); err != nil {
		t.Fatalf("payload %s: %v", op.Payload, err)
	}
	want := order.Cancel{Source: source, ExternalID: externalID, Reason: reason, CreateKey: source + ":order:" + externalID + ":create"}
	if c != want {
		t.Fatalf("payload %+v, want %+v", c, want)
	}
}

func TestGenericRegistersCancel(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	body := cancelJSON("site", "A-1001", "покупатель отказался")
	w := h.do(signedRequest("site", "msg_c1", testNow, body, siteSecret))
	wantStatus(t, w, http.StatusOK)
	if ans := decode(t, w); ans["status"] != "processed" || ans["key"] != "site:order:A-1001:cancel" {
		t.Fatalf("answer %v", ans)
	}
	op, ok := h.inbox.op("site:order:A-1001:cancel")
	if !ok {
		t.Fatal("no cancel operation registered")
	}
	wantCancelOp(t, op, "site", "A-1001", "покупатель отказался")
	if ev, ok := h.inbox.event("site", "msg_c1"); !ok || !bytes.Equal(ev.ev.Body, body) {
		t.Fatalf("stored event %+v (found %v): want the raw body", ev, ok)
	}

	// Without a source (and without a reason) it is the path's.
	w = h.do(signedRequest("site", "msg_c2", testNow, []byte(`{"external_id":"A-1002","cancelled":true}`), siteSecret))
	wantStatus(t, w, http.StatusOK)
	op, _ = h.inbox.op("site:order:A-1002:cancel")
	wantCancelOp(t, op, "site", "A-1002", "")
	if h.registered() != 2 || h.stat("site", outProcessed, "") != 2 {
		t.Fatalf("OnRegistered %d times, stats %v", h.registered(), h.srv.Stats())
	}
	h.stored(2, 2)
}

// A redelivered cancel is a duplicate of its webhook-id: the saved answer, nothing
// registered again. Another delivery of the same cancel with another reason is a
// conflict of the journal operation (recorded, nothing overwritten), as for orders.
func TestGenericCancelRedeliveryIsDuplicate(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	body := cancelJSON("site", "D-1", "out of stock")
	first := h.do(signedRequest("site", "msg_cdup", testNow, body, siteSecret))
	wantStatus(t, first, http.StatusOK)
	again := h.do(signedRequest("site", "msg_cdup", testNow.Add(time.Minute), body, siteSecret))
	wantStatus(t, again, http.StatusOK)
	if again.Body.String() != first.Body.String() {
		t.Fatalf("redelivery answered %s, want the saved %s", again.Body, first.Body)
	}
	if h.registered() != 1 || h.stat("site", outDuplicate, "") != 1 {
		t.Fatalf("OnRegistered %d times, stats %v", h.registered(), h.srv.Stats())
	}
	h.stored(1, 1)

	// The same webhook-id with another body: 409, the stored event stays.
	w := h.do(signedRequest("site", "msg_cdup", testNow, cancelJSON("site", "D-1", "changed"), siteSecret))
	wantStatus(t, w, http.StatusConflict)

	// A new webhook-id, the same cancel with another reason: registered against the
	// saved operation, which records a conflict.
	w = h.do(signedRequest("site", "msg_cdup2", testNow, cancelJSON("site", "D-1", "changed"), siteSecret))
	wantStatus(t, w, http.StatusOK)
	h.inbox.mu.Lock()
	confl := h.inbox.opConfl["site:order:D-1:cancel"]
	saved := h.inbox.ops["site:order:D-1:cancel"]
	h.inbox.mu.Unlock()
	if confl != 1 {
		t.Fatalf("%d operation conflicts recorded, want 1", confl)
	}
	wantCancelOp(t, saved, "site", "D-1", "out of stock")
	h.stored(2, 1)
}

func TestGenericCancelRejects(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	cases := []struct {
		name, body string
		fields     []string
	}{
		{"cancelled false", `{"source":"site","external_id":"X-1","cancelled":false}`, []string{"cancelled"}},
		{"cancelled not a boolean", `{"source":"site","external_id":"X-1","cancelled":"yes"}`, []string{"cancelled"}},
		{"missing external_id", `{"source":"site","cancelled":true,"reason":"r"}`, []string{"external_id"}},
		{"empty external_id", `{"source":"site","external_id":"","cancelled":true}`, []string{"external_id"}},
		{"external_id not a string", `{"source":"site","external_id":17,"cancelled":true}`, []string{"external_id"}},
		{"external_id too long", `{"source":"site","external_id":"` + strings.Repeat("x", 65) + `","cancelled":true}`, []string{"external_id"}},
		{"external_id not printable", `{"source":"site","external_id":"X\u0007","cancelled":true}`, []string{"external_id"}},
		{"another source", `{"source":"kaspi","external_id":"X-1","cancelled":true}`, []string{"source"}},
		{"reason not a string", `{"source":"site","external_id":"X-1","cancelled":true,"reason":5}`, []string{"reason"}},
		{"lines", `{"source":"site","external_id":"X-1","cancelled":true,"lines":[]}`, []string{"lines"}},
		{"unknown field", `{"source":"site","external_id":"X-1","cancelled":true,"why":"r"}`, []string{"why"}},
		{"several", `{"cancelled":false}`, []string{"cancelled", "external_id"}},
	}
	for i, c := range cases {
		w := h.do(signedRequest("site", fmt.Sprintf("msg_cbad%d", i), testNow, []byte(c.body), siteSecret))
		if w.Code != http.StatusBadRequest {
			t.Errorf("%s: status %d (%s), want 400", c.name, w.Code, w.Body)
			continue
		}
		ans := decode(t, w)
		var got []string
		for _, f := range ans["fields"].([]any) {
			got = append(got, f.(string))
		}
		if strings.Join(got, ",") != strings.Join(c.fields, ",") {
			t.Errorf("%s: fields %v, want %v (answer %v)", c.name, got, c.fields, ans)
		}
		if reason, _ := ans["reason"].(string); ans["status"] != "rejected" || !strings.HasPrefix(reason, "invalid cancel: "+c.fields[0]) {
			t.Errorf("%s: answer %v, want rejected with a reason naming %s", c.name, ans, c.fields[0])
		}
	}
	h.stored(0, 0)
	if h.inbox.receives != 0 {
		t.Fatalf("Receive called %d times for bad cancels", h.inbox.receives)
	}
	if n := h.stat("site", outRejected, "invalid_cancel"); n != uint64(len(cases)) {
		t.Fatalf("invalid_cancel counted %d times, want %d: %v", n, len(cases), h.srv.Stats())
	}
}

// On the real stores: a signed cancel delivery registers the cancel operation in the
// journal; its redelivery is a duplicate (one event, one operation, the same answer);
// a bad one is 400 naming the field and stores nothing.
func TestCancelDeliveryOnRealStores(t *testing.T) {
	t.Parallel()
	for _, backend := range []string{"postgres", "sqlite"} {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			var (
				in    inbox.Store
				store journal.Store
			)
			switch backend {
			case "postgres":
				db, err := postgres.Open(ctx, postgres.Config{URL: testdb.URL(t), MaxConns: 5})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(db.Close)
				if _, err := db.Migrate(ctx); err != nil {
					t.Fatal(err)
				}
				in, store = db.Inbox(), db.Journal()
			case "sqlite":
				db, err := sqlite.Open(ctx, sqlite.Config{Path: filepath.Join(t.TempDir(), "ordersync.db")})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { db.Close() })
				if _, err := db.Migrate(ctx); err != nil {
					t.Fatal(err)
				}
				in, store = db.Inbox(), db.Journal()
			}
			base := startServer(t, in)

			// The order first, then its cancel: both through the inbox.
			if st, b := postTo(t, base, signedRequest("site", "msg_order", testNow, orderJSON("site", "RC-1"), siteSecret)); st != http.StatusOK {
				t.Fatalf("order: %d %s", st, b)
			}
			body := cancelJSON("site", "RC-1", "buyer changed their mind")
			st, first := postTo(t, base, signedRequest("site", "msg_cancel", testNow, body, siteSecret))
			if st != http.StatusOK || first != `{"status":"processed","key":"site:order:RC-1:cancel"}` {
				t.Fatalf("cancel: %d %s", st, first)
			}
			op, err := store.Get(ctx, "site:order:RC-1:cancel")
			if err != nil {
				t.Fatal(err)
			}
			if op.Status != journal.StatusPending {
				t.Fatalf("cancel status %s, want pending", op.Status)
			}
			wantCancelOp(t, journal.NewOperation{Key: op.Key, Kind: op.Kind, Source: op.Source, ExternalID: op.ExternalID, Payload: op.Payload},
				"site", "RC-1", "buyer changed their mind")

			st, again := postTo(t, base, signedRequest("site", "msg_cancel", testNow.Add(time.Minute), body, siteSecret))
			if st != http.StatusOK || again != first {
				t.Fatalf("redelivery: %d %s, want the saved %s", st, again, first)
			}
			d, err := in.Show(ctx, "site", "msg_cancel")
			if err != nil || !bytes.Equal(d.Body, body) || len(d.Operations) != 1 || d.Operations[0] != "site:order:RC-1:cancel" {
				t.Fatalf("inbox record %+v: %v", d.Record, err)
			}

			st, bad := postTo(t, base, signedRequest("site", "msg_cancel_bad", testNow, []byte(`{"external_id":"RC-2","cancelled":false}`), siteSecret))
			if st != http.StatusBadRequest || !strings.Contains(bad, `"fields":["cancelled"]`) {
				t.Fatalf("cancelled false: %d %s", st, bad)
			}
			if _, err := in.Show(ctx, "site", "msg_cancel_bad"); err == nil {
				t.Fatal("a rejected cancel was stored")
			}
			ops, err := store.List(ctx, journal.Filter{Limit: 100})
			if err != nil {
				t.Fatal(err)
			}
			if len(ops) != 2 {
				t.Fatalf("the journal holds %d operations, want the order's create and its cancel", len(ops))
			}
		})
	}
}

// startServer starts a server with the site source on in and returns its base URL.
func startServer(t *testing.T, in inbox.Store) string {
	t.Helper()
	srv, err := New(Config{
		Listen:  "127.0.0.1:0",
		Inbox:   in,
		Sources: map[string]SourceConfig{"site": {Secrets: []stdwebhook.Secret{stdwebhook.MustParseSecret(siteSecret)}}},
		Logger:  slog.New(slog.DiscardHandler),
		Now:     func() time.Time { return testNow },
		// A loaded machine: the default 4s is Ozon's budget, not this test's.
		ReceiveTimeout: 30 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Stop(context.Background()) })
	return "http://" + srv.Addr()
}

// postTo sends a test request to base over its own connection.
func postTo(t *testing.T, base string, r *http.Request) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, base+r.URL.Path, r.Body)
	if err != nil {
		t.Fatal(err)
	}
	req.Header = r.Header
	resp, err := (&http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, strings.TrimSpace(string(b))
}
