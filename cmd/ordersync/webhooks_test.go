package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ordersync/ordersync/internal/eventually"
	"github.com/ordersync/ordersync/internal/journal"
	"github.com/ordersync/ordersync/internal/sim/bitrix24sim"
	"github.com/ordersync/ordersync/internal/sim/onecsim"
	"github.com/ordersync/ordersync/internal/sim/ozonsim"
	"github.com/ordersync/ordersync/internal/stdwebhook"
)

const siteSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"

// post sends body to url on a connection of its own.
func post(t *testing.T, url, contentType string, header http.Header, body []byte) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, vs := range header {
		req.Header[k] = vs
	}
	req.Header.Set("Content-Type", contentType)
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 10 * time.Second}
	resp, err := client.Do(req)
	if err != nil {
		t.Error(err)
		return 0, nil
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

func signed(id string, body []byte) http.Header {
	return stdwebhook.Headers([]stdwebhook.Secret{stdwebhook.MustParseSecret(siteSecret)}, id, time.Now(), body)
}

type inboxRow struct {
	Source     string
	EventID    string `json:"event_id"`
	Operations []string
	Conflicts  int
}

func (e *env) inboxRows() []inboxRow {
	e.t.Helper()
	out, stderr, code := e.cli("", "inbox", "list", "--format", "json")
	var rows []inboxRow
	if err := json.Unmarshal([]byte(out), &rows); err != nil || code != 0 {
		e.t.Fatalf("inbox list: exit %d %v %s %s", code, err, out, stderr)
	}
	return rows
}

func (e *env) operationCount(source string) int {
	e.t.Helper()
	ops, err := e.store().List(context.Background(), journal.Filter{Source: source, Limit: 1000})
	if err != nil {
		e.t.Fatal(err)
	}
	return len(ops)
}

// TestSignedWebhookReceiverChecks are the checks of a webhook receiver, counted in
// inbox rows, journal operations and orders in the simulated 1C: a new event; an
// exact repeat; the same id with a changed body; and 100 simultaneous deliveries of
// one event on separate connections.
func TestSignedWebhookReceiverChecks(t *testing.T) {
	t.Parallel()
	e := newEnv(t, onecsim.Options{}, true)
	e.environ = append(e.environ, "ORDERSYNC_WEBHOOKS__SOURCES__SITE__SECRETS="+siteSecret)
	_, log := e.runWithLog()
	url := webhooksURL(t, log) + "/webhooks/site"

	body := []byte(orderJSON("H-1", "SKU-1", "2", "1500.10"))
	st, first := post(t, url, "application/json", signed("msg_1", body), body)
	if st != 200 {
		t.Fatalf("new event: %d %s", st, first)
	}
	eventually.True(t, "site:H-1 in 1C", func() bool { return e.onec.CountExternal("site:H-1") == 1 })

	// An exact repeat: the saved answer, nothing more anywhere.
	st, again := post(t, url, "application/json", signed("msg_1", body), body)
	if st != 200 || !bytes.Equal(again, first) {
		t.Fatalf("repeat: %d %s, want the saved answer %s", st, again, first)
	}
	// The same id with another body: a conflict, nothing overwritten.
	changed := []byte(orderJSON("H-1", "SKU-1", "3", "1500.10"))
	if st, b := post(t, url, "application/json", signed("msg_1", changed), changed); st != 409 {
		t.Fatalf("changed body: %d %s, want 409", st, b)
	}
	// A body re-spaced after signing does not verify, and is not stored.
	if st, _ := post(t, url, "application/json", signed("msg_9", body), append([]byte(" "), body...)); st != 401 {
		t.Fatalf("re-spaced body: %d, want 401", st)
	}

	// 100 simultaneous deliveries of one new event, each on its own connection.
	body2 := []byte(orderJSON("H-2", "SKU-1", "1", "99.99"))
	var wg sync.WaitGroup
	statuses := make(chan int, 100)
	for range 100 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			st, _ := post(t, url, "application/json", signed("msg_2", body2), body2)
			statuses <- st
		}()
	}
	wg.Wait()
	close(statuses)
	counts := map[int]int{}
	for st := range statuses {
		counts[st]++
	}
	if counts[200] == 0 || counts[200]+counts[409] != 100 {
		t.Fatalf("answers %v, want 200s (new or duplicate) and 409s (in progress) only", counts)
	}
	eventually.True(t, "site:H-2 in 1C", func() bool { return e.onec.CountExternal("site:H-2") == 1 })
	// A second create, if any, comes of an operation still pending: none is left.
	eventually.True(t, "no operation pending", func() bool { return countStatus(t, e.store(), journal.StatusPending) == 0 })

	rows := e.inboxRows()
	if len(rows) != 2 {
		t.Fatalf("inbox rows %d, want 2 (msg_1, msg_2)", len(rows))
	}
	for _, r := range rows {
		if r.EventID == "msg_1" && r.Conflicts != 1 {
			t.Fatalf("msg_1 conflicts %d, want 1", r.Conflicts)
		}
	}
	if n := e.operationCount("site"); n != 2 {
		t.Fatalf("journal operations %d, want 2", n)
	}
	if e.onec.CountExternal("site:H-1") != 1 || e.onec.CountExternal("site:H-2") != 1 || e.onec.Count() != 2 {
		t.Fatalf("1C holds %v, want H-1 and H-2 once each", externalIDs(e.onec.Orders()))
	}
	out, _, code := e.cli("", "inbox", "show", "site", "msg_1")
	if code != 0 || !strings.Contains(out, "site:order:H-1:create") || !strings.Contains(out, "conflict") {
		t.Fatalf("inbox show: exit %d\n%s", code, out)
	}
}

func TestOzonPushPingNewPostingAndCancel(t *testing.T) {
	t.Parallel()
	e := newEnv(t, onecsim.Options{}, true)
	oz := ozonsim.New(ozonsim.Options{ClientID: "123456", APIKey: "ozon-key"})
	if err := oz.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(oz.Close)
	now := time.Now().UTC().Truncate(time.Second)
	oz.AddPosting(ozonsim.Posting{PostingNumber: "05708065-0029-1", InProcessAt: now.Add(-time.Minute),
		Products: []ozonsim.Product{{OfferID: "SKU-2", Name: "Кофе", Quantity: 2, Price: dec("1530.5000")}}})
	e.environ = append(e.environ,
		"ORDERSYNC_CONNECTORS__OZON__BASE_URL="+oz.URL(),
		"ORDERSYNC_CONNECTORS__OZON__CLIENT_ID=123456",
		"ORDERSYNC_CONNECTORS__OZON__API_KEY=ozon-key",
		"ORDERSYNC_CONNECTORS__OZON__WAREHOUSE=WH2",
		"ORDERSYNC_CONNECTORS__OZON__RATE_PER_SECOND=40",
		"ORDERSYNC_WEBHOOKS__OZON__ENABLED=true",
		"ORDERSYNC_WEBHOOKS__OZON__ALLOW_NETWORKS=127.0.0.0/8",
	)
	_, log := e.runWithLog()
	url := webhooksURL(t, log) + "/webhooks/ozon"

	st, b := post(t, url, "application/json", nil, []byte(`{"message_type":"TYPE_PING","time":"`+now.Format(time.RFC3339)+`"}`))
	var ping struct{ Version, Name, Time string }
	if json.Unmarshal(b, &ping); st != 200 || ping.Name == "" || ping.Time == "" {
		t.Fatalf("ping: %d %s", st, b)
	}
	newPosting := []byte(fmt.Sprintf(`{"message_type":"TYPE_NEW_POSTING","posting_number":"05708065-0029-1",`+
		`"products":[{"sku":1,"quantity":2}],"in_process_at":%q,"warehouse_id":1,"seller_id":123456}`, now.Format(time.RFC3339)))
	if st, b := post(t, url, "application/json", nil, newPosting); st != 200 || !strings.Contains(string(b), `"result":true`) {
		t.Fatalf("new posting: %d %s", st, b)
	}
	eventually.True(t, "ozon:05708065-0029-1 in 1C", func() bool { return e.onec.CountExternal("ozon:05708065-0029-1") == 1 })
	if st, _ := post(t, url, "application/json", nil, newPosting); st != 200 {
		t.Fatalf("repeat: %d", st)
	}
	var sent struct{ Total, Warehouse json.RawMessage }
	json.Unmarshal(e.onec.Orders()[0].Body, &sent)
	if string(sent.Total) != "3061" || string(sent.Warehouse) != `"WH2"` {
		t.Fatalf("1C got total %s warehouse %s, want the fetched posting: 3061, WH2", sent.Total, sent.Warehouse)
	}

	cancel := []byte(fmt.Sprintf(`{"message_type":"TYPE_POSTING_CANCELLED","posting_number":"05708065-0029-1",`+
		`"products":[{"sku":1,"quantity":2}],"old_state":"posting_awaiting_packaging","new_state":"posting_canceled",`+
		`"changed_state_date":%q,"reason":{"id":402,"message":"Покупатель отменил"},"warehouse_id":1,"seller_id":123456}`,
		now.Add(time.Minute).Format(time.RFC3339)))
	if st, b := post(t, url, "application/json", nil, cancel); st != 200 {
		t.Fatalf("cancel: %d %s", st, b)
	}
	eventually.True(t, "the order cancelled in 1C", func() bool {
		for _, o := range e.onec.Orders() {
			if o.Cancelled {
				return true
			}
		}
		return false
	})
	if e.onec.Count() != 1 {
		t.Fatalf("1C holds %d orders, want 1", e.onec.Count())
	}
}

func TestBitrix24DealBecomesAnOrderOnceWon(t *testing.T) {
	t.Parallel()
	e := newEnv(t, onecsim.Options{}, true)
	b24 := bitrix24sim.New(bitrix24sim.Options{UserID: "1", Code: "s3cr3tc0de"})
	if err := b24.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b24.Close)
	b24.AddDeal(bitrix24sim.Deal{ID: "42", Title: "Заказ с сайта", StageID: "NEW", CurrencyID: "KZT", DateCreate: time.Now().Add(-time.Hour),
		Rows: []bitrix24sim.Row{{ProductID: 101, ProductName: "Чайник", Price: dec("1500.10"), Quantity: dec("2")}}})
	e.environ = append(e.environ,
		"ORDERSYNC_WEBHOOKS__BITRIX24__ENABLED=true",
		"ORDERSYNC_WEBHOOKS__BITRIX24__APPLICATION_TOKEN=app-token",
		"ORDERSYNC_WEBHOOKS__BITRIX24__REST_URL="+b24.RESTURL(b24.URL()),
		"ORDERSYNC_WEBHOOKS__BITRIX24__WAREHOUSE=WH1",
		"ORDERSYNC_WEBHOOKS__BITRIX24__SKU_FIELD=product_id",
		"ORDERSYNC_WEBHOOKS__BITRIX24__RATE_PER_SECOND=50",
	)
	_, log := e.runWithLog()
	url := webhooksURL(t, log) + "/webhooks/bitrix24"
	send := func(event string, ts time.Time, token string) int {
		st, _ := post(t, url, "application/x-www-form-urlencoded", nil, []byte(b24.OutgoingForm(event, "42", ts, token).Encode()))
		return st
	}
	t0 := time.Now()
	if st := send("ONCRMDEALADD", t0, "wrong"); st != 401 {
		t.Fatalf("wrong token: %d, want 401", st)
	}
	if rows := e.inboxRows(); len(rows) != 0 {
		t.Fatalf("a wrong token stored %d inbox rows", len(rows))
	}
	if st := send("ONCRMDEALADD", t0, "app-token"); st != 200 {
		t.Fatalf("deal add: %d", st)
	}
	eventually.True(t, "the NEW deal attempted and held back", func() bool {
		op, err := e.store().Get(context.Background(), "bitrix24:deal:42:create")
		return err == nil && op.Attempts >= 1 && strings.Contains(op.LastError, "NEW")
	})
	if e.onec.Count() != 0 {
		t.Fatalf("a deal in stage NEW reached 1C")
	}
	b24.SetStage("42", "WON")
	if st := send("ONCRMDEALUPDATE", t0.Add(time.Second), "app-token"); st != 200 {
		t.Fatalf("deal update: %d", st)
	}
	eventually.True(t, "bitrix24:42 in 1C", func() bool { return e.onec.CountExternal("bitrix24:42") == 1 })
	if strings.Contains(log.String(), "s3cr3tc0de") || strings.Contains(log.String(), "app-token") {
		t.Fatalf("a Bitrix24 secret reached the log")
	}
}
