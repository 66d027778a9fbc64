package demo

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/shopspring/decimal"

	"github.com/ordersync/ordersync/internal/sim/kaspisim"
	"github.com/ordersync/ordersync/internal/sim/onecsim"
	"github.com/ordersync/ordersync/internal/sim/ozonsim"
	"github.com/ordersync/ordersync/internal/sim/wbsim"
	"github.com/ordersync/ordersync/internal/sim/webhooksim"
	"github.com/ordersync/ordersync/internal/stdwebhook"
)

// The demo's world: the simulators it starts in this process, and the real service
// it runs as a child process (so that it can be killed with -9 and restarted).

// oneCUser and oneCPassword are the simulated base's Basic credentials: a
// Latin user, as 1C publications want, and a password that is not ASCII.
const (
	oneCUser     = "ordersync"
	oneCPassword = "демо-пароль"
)

// simulators are the simulated 1C, marketplaces and CRM, each on 127.0.0.1:0.
type simulators struct {
	onec  oneC
	kaspi *kaspisim.Kaspi
	ozon  *ozonsim.Ozon
	wb    *wbsim.Wildberries
	sink  *webhooksim.Sink

	siteSecret, sinkSecret stdwebhook.Secret
	kaspiToken, ozonKey    string
	ozonClient, wbToken    string
	feedToken              string

	ozonSold map[string]decimal.Decimal // each Ozon posting's goods at their prices, by posting number
}

// The demo's stock: what 1C holds in WH1 (over OData, the seeded warehouse),
// published to the three marketplaces.
var wh1Stock = []onecsim.StockItem{
	{SKU: "SKU-KETTLE", Quantity: decimal.RequireFromString("12"), Price: decimal.RequireFromString("15990")},
	{SKU: "SKU-IRON", Quantity: decimal.RequireFromString("0"), Price: decimal.RequireFromString("12490.50")},
	{SKU: "SKU-COFFEE", Quantity: decimal.RequireFromString("7.5"), Price: decimal.RequireFromString("1530")},
	{SKU: "SKU-MUG", Quantity: decimal.RequireFromString("40"), Price: decimal.RequireFromString("1530.99")},
}

// demoSKUs are the items the script's orders and stock name, and demoSources
// the sources of its orders: what a base that is written by OData is seeded with.
var (
	demoSKUs    = []string{"SKU-KETTLE", "SKU-IRON", "SKU-COFFEE", "SKU-TEA", "SKU-MUG", "SKU-TOWEL", "SKU-8812"}
	demoSources = []string{"kaspi", "ozon", "wb", "site"}
)

// demoZone is the service's ui.timezone, the zone of the payout periods' days.
const demoZone = "Asia/Almaty"

// oneCTimeout is the service's onec.timeout.
const oneCTimeout = 2 * time.Second

const (
	ozonWarehouse = 1020000000001
	wbWarehouse   = 507
	kaspiStore    = "PP1"
)

// startSims starts the simulators, onec among them.
func startSims(onec oneC) (*simulators, error) {
	s := &simulators{
		onec:       onec,
		kaspiToken: "kaspi-demo-token",
		ozonClient: "123456",
		ozonKey:    "ozon-demo-api-key",
		wbToken:    "wb-demo-token",
		feedToken:  "demo-feed-token-0123456789",
	}
	var err error
	if s.siteSecret, err = stdwebhook.GenerateSecret(); err != nil {
		return nil, err
	}
	if s.sinkSecret, err = stdwebhook.GenerateSecret(); err != nil {
		return nil, err
	}
	s.kaspi = kaspisim.New(kaspisim.Options{Token: s.kaspiToken})
	s.ozon = ozonsim.New(ozonsim.Options{ClientID: s.ozonClient, APIKey: s.ozonKey})
	s.wb = wbsim.New(wbsim.Options{Token: s.wbToken})
	if s.sink, err = webhooksim.New(webhooksim.Options{Secrets: []string{s.sinkSecret.Encode()}}); err != nil {
		return nil, err
	}
	s.onec.setStock(wh1Stock)
	for i, it := range wh1Stock {
		s.ozon.AddOffers(it.SKU)
		s.wb.AddCard(wbsim.Card{NmID: int64(5100001 + i), VendorCode: it.SKU, Photos: i % 2,
			Sizes: []wbsim.Size{{ChrtID: int64(7100001 + i), Skus: []string{fmt.Sprintf("460700000%04d", i)}}}})
	}
	s.wb.AddStockWarehouse(wbWarehouse)
	for _, srv := range []interface{ Start(string) error }{s.onec, s.kaspi, s.ozon, s.wb, s.sink} {
		if err := srv.Start("127.0.0.1:0"); err != nil {
			s.close()
			return nil, err
		}
	}
	return s, nil
}

func (s *simulators) close() {
	for _, c := range []interface{ Close() }{s.onec, s.kaspi, s.ozon, s.wb, s.sink} {
		if c != nil {
			c.Close()
		}
	}
}

// serviceEnv is the whole configuration of the service: its environment. Nothing of
// the caller's ORDERSYNC_ variables (or STATE_DIRECTORY) reaches it, so the demo never
// touches a real database or 1C base.
func (s *simulators) serviceEnv(parent []string, dir string) []string {
	var env []string
	for _, kv := range parent {
		name, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(name, "ORDERSYNC_") || name == "STATE_DIRECTORY" {
			continue
		}
		env = append(env, kv)
	}
	wh := s.onec.warehouse()
	env = append(env, s.onec.environ()...)
	return append(env,
		"STATE_DIRECTORY="+dir, // no database.url: the embedded SQLite file <dir>/ordersync.db
		"ORDERSYNC_LOG__FORMAT=json",
		"ORDERSYNC_LOG__LEVEL=info",
		"ORDERSYNC_HTTP__LISTEN=127.0.0.1:0",
		"ORDERSYNC_ADMIN__LISTEN=127.0.0.1:0",
		// The accountant's journal pages, on loopback without users: no sign-in.
		"ORDERSYNC_UI__LISTEN=127.0.0.1:0",

		// Short, so that the order whose service is killed in mid-call settles within
		// seconds: its open attempt is taken over 3 × timeout + settle_time after it
		// started (a real base: 30s and 2m).
		"ORDERSYNC_ONEC__TIMEOUT="+oneCTimeout.String(),
		"ORDERSYNC_ONEC__SETTLE_TIME=3s",
		"ORDERSYNC_WORKER__POLL_INTERVAL=50ms",
		"ORDERSYNC_WORKER__BACKOFF_MIN=100ms",
		"ORDERSYNC_WORKER__BACKOFF_MAX=400ms",
		"ORDERSYNC_WORKER__SHUTDOWN_TIMEOUT=5s",

		"ORDERSYNC_CONNECTORS__KASPI__ENABLED=true",
		"ORDERSYNC_CONNECTORS__KASPI__BASE_URL="+s.kaspi.URL(),
		"ORDERSYNC_CONNECTORS__KASPI__TOKEN="+s.kaspiToken,
		"ORDERSYNC_CONNECTORS__KASPI__WAREHOUSE=WH1",
		"ORDERSYNC_CONNECTORS__KASPI__POLL_INTERVAL=300ms",
		"ORDERSYNC_CONNECTORS__KASPI__RATE_PER_SECOND=100",
		"ORDERSYNC_CONNECTORS__OZON__ENABLED=true",
		"ORDERSYNC_CONNECTORS__OZON__BASE_URL="+s.ozon.URL(),
		"ORDERSYNC_CONNECTORS__OZON__CLIENT_ID="+s.ozonClient,
		"ORDERSYNC_CONNECTORS__OZON__API_KEY="+s.ozonKey,
		"ORDERSYNC_CONNECTORS__OZON__WAREHOUSE=WH2",
		"ORDERSYNC_CONNECTORS__OZON__ACKNOWLEDGE=true",
		"ORDERSYNC_CONNECTORS__OZON__POLL_INTERVAL=300ms",
		"ORDERSYNC_CONNECTORS__OZON__RATE_PER_SECOND=40",
		// Ozon's returns, each carried into 1C as a customer return (a shop: every 10 minutes).
		"ORDERSYNC_CONNECTORS__OZON__RETURNS__ENABLED=true",
		"ORDERSYNC_CONNECTORS__OZON__RETURNS__POLL_INTERVAL=300ms",
		// The payout lines are read by hand, as an operator does at the month's end.
		"ORDERSYNC_PAYOUTS__SCHEDULE=off",
		// The days of a payout period are counted in the demo's zone.
		"ORDERSYNC_UI__TIMEZONE="+demoZone,
		"ORDERSYNC_CONNECTORS__WILDBERRIES__ENABLED=true",
		"ORDERSYNC_CONNECTORS__WILDBERRIES__BASE_URL="+s.wb.URL(),
		"ORDERSYNC_CONNECTORS__WILDBERRIES__RETURNS__BASE_URL="+s.wb.URL(),
		"ORDERSYNC_CONNECTORS__WILDBERRIES__TOKEN="+s.wbToken,
		"ORDERSYNC_CONNECTORS__WILDBERRIES__WAREHOUSE=WH3",
		"ORDERSYNC_CONNECTORS__WILDBERRIES__ACKNOWLEDGE=true",
		"ORDERSYNC_CONNECTORS__WILDBERRIES__POLL_INTERVAL=300ms",
		"ORDERSYNC_CONNECTORS__WILDBERRIES__RATE_PER_SECOND=100",

		"ORDERSYNC_WEBHOOKS__SOURCES__SITE__SECRETS="+s.siteSecret.Encode(),

		"ORDERSYNC_RELAY__DESTINATIONS__CRM__TYPE=webhook",
		"ORDERSYNC_RELAY__DESTINATIONS__CRM__URL="+s.sink.URL(),
		"ORDERSYNC_RELAY__DESTINATIONS__CRM__SECRETS="+s.sinkSecret.Encode(),
		"ORDERSYNC_RELAY__DESTINATIONS__CRM__EVENTS=order.created,order.cancelled,return.created",
		"ORDERSYNC_RELAY__POLL_INTERVAL=100ms",
		"ORDERSYNC_RELAY__BACKOFF_MIN=100ms",
		"ORDERSYNC_RELAY__BACKOFF_MAX=1s",
		"ORDERSYNC_RELAY__LEASE=5s",
		"ORDERSYNC_RELAY__DESTINATIONS__CRM__TIMEOUT=2s", // a delivery starts only while its timeout is left of the lease

		// Stock: WH1 (over OData: the seeded warehouse's GUID) every 5 seconds, to the
		// three marketplaces (a shop: every 30 minutes).
		`ORDERSYNC_STOCK__SCHEDULES=[{"name":"main","cron":"@every 5s","warehouses":["`+wh+`"],"publish":["kaspi","ozon","wildberries"]}]`,
		"ORDERSYNC_CONNECTORS__KASPI__STORES="+wh+"="+kaspiStore,
		"ORDERSYNC_CONNECTORS__KASPI__FEED_TOKEN="+s.feedToken,
		"ORDERSYNC_CONNECTORS__KASPI__COMPANY=Демо-магазин",
		"ORDERSYNC_CONNECTORS__KASPI__MERCHANT_ID=30000001",
		fmt.Sprintf("ORDERSYNC_CONNECTORS__OZON__STOCK_WAREHOUSES=%s=%d", wh, ozonWarehouse),
		"ORDERSYNC_CONNECTORS__OZON__TIMEOUT=2s",
		fmt.Sprintf("ORDERSYNC_CONNECTORS__WILDBERRIES__STOCK_WAREHOUSES=%s=%d", wh, wbWarehouse),
		"ORDERSYNC_CONNECTORS__WILDBERRIES__CONTENT_URL="+s.wb.URL(),
		"ORDERSYNC_CONNECTORS__WILDBERRIES__TIMEOUT=2s",
	)
}

// The script's orders. Dates are a little in the past: a marketplace lists what was
// created up to now.

func (s *simulators) addKaspi(code, name, phone, sku, product string, qty int64, price string) error {
	first, last, _ := strings.Cut(name, " ")
	return s.kaspi.AddOrder(kaspisim.Order{Code: code, CreationDate: time.Now().Add(-time.Minute),
		Customer: kaspisim.Customer{FirstName: first, LastName: last, CellPhone: phone},
		Entries: []kaspisim.Entry{{OfferCode: sku, Name: product, Quantity: decimal.NewFromInt(qty),
			BasePrice: decimal.RequireFromString(price)}}})
}

func (s *simulators) addOzon(posting, sku, product string, qty int, price string) {
	if s.ozonSold == nil {
		s.ozonSold = map[string]decimal.Decimal{}
	}
	s.ozonSold[posting] = decimal.NewFromInt(int64(qty)).Mul(decimal.RequireFromString(price))
	s.ozon.AddPosting(ozonsim.Posting{PostingNumber: posting, InProcessAt: time.Now().Add(-time.Minute),
		Products: []ozonsim.Product{{OfferID: sku, Name: product, Quantity: qty, Price: decimal.RequireFromString(price)}}})
}

// addOzonReturn plants a return of qty of one product of an Ozon posting and
// returns its id.
func (s *simulators) addOzonReturn(posting, typ, sku, product string, qty int, price, reason string) string {
	id := s.ozon.AddReturn(ozonsim.Return{Type: typ, PostingNumber: posting, OfferID: sku, Name: product,
		Quantity: qty, Price: decimal.RequireFromString(price), Reason: reason, ReturnDate: time.Now().Add(-time.Minute)})
	return strconv.FormatInt(id, 10)
}

func (s *simulators) addWB(id int64, article string, hundredths int64) {
	s.wb.AddOrder(wbsim.Order{ID: id, Article: article, Price: hundredths, CurrencyCode: 643,
		ConvertedPrice: hundredths, ConvertedCurrencyCode: 643, CreatedAt: time.Now().Add(-time.Minute)})
}

// siteOrder is a canonical order as a site sends it.
func siteOrder(id string, qty int) []byte {
	return fmt.Appendf(nil, `{"source":"site","external_id":%q,"number":%q,"created_at":%q,`+
		`"customer":{"name":"Иван Петров","phone":"+77011234567","email":"ivan@example.kz"},"warehouse":"WH1","currency":"KZT",`+
		`"lines":[{"sku":"SKU-8812","name":"Чайник","quantity":%d,"price":1500.00}],"comment":"с сайта"}`,
		id, id, time.Now().Add(-time.Minute).Format(time.RFC3339), qty)
}

// acks counts the acknowledgements each marketplace received.
func (s *simulators) acks() (kaspi, ozon, wb int) {
	for _, n := range s.kaspi.Accepted() {
		kaspi += n
	}
	for _, n := range s.ozon.Shipments() {
		ozon += n
	}
	for _, n := range s.wb.Acknowledged() {
		wb += n
	}
	return
}

// crmEvents counts the distinct events of type typ the CRM received.
func (s *simulators) crmEvents(typ string) int {
	seen := map[string]bool{}
	for _, d := range s.sink.Deliveries() {
		if d.Type == typ {
			seen[d.EventID] = true
		}
	}
	return len(seen)
}

// webhookAnswer is one answer of POST /webhooks/site.
type webhookAnswer struct {
	status     int
	retryAfter string
	body       []byte
	outcome    string // the answer's "status": processed, conflict, in_progress, …
}

// deliver POSTs body to url signed the Standard Webhooks way under the event id, on a
// connection of its own, as a site's webhook sender does.
func deliver(ctx context.Context, url string, secret stdwebhook.Secret, id string, body []byte) (webhookAnswer, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return webhookAnswer{}, err
	}
	for k, vs := range stdwebhook.Headers([]stdwebhook.Secret{secret}, id, time.Now(), body) {
		req.Header[k] = vs
	}
	req.Header.Set("Content-Type", "application/json")
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := hc.Do(req)
	if err != nil {
		return webhookAnswer{}, fmt.Errorf("POST %s: %w", url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return webhookAnswer{}, fmt.Errorf("POST %s: %w", url, err)
	}
	var v struct {
		Status string `json:"status"`
	}
	json.Unmarshal(b, &v)
	return webhookAnswer{status: resp.StatusCode, retryAfter: resp.Header.Get("Retry-After"), body: b, outcome: v.Status}, nil
}

// deliverUntilAnswered is deliver that honours a 409 in_progress with Retry-After,
// as a sender does: it sends again after the wait, at most a few times.
func deliverUntilAnswered(ctx context.Context, url string, secret stdwebhook.Secret, id string, body []byte) (first, last webhookAnswer, err error) {
	for try := 0; ; try++ {
		ans, err := deliver(ctx, url, secret, id, body)
		if err != nil {
			return first, ans, err
		}
		if try == 0 {
			first = ans
		}
		if ans.status != http.StatusConflict || ans.outcome != "in_progress" || try == 4 {
			return first, ans, nil
		}
		wait, _ := strconv.Atoi(ans.retryAfter)
		select {
		case <-ctx.Done():
			return first, ans, ctx.Err()
		case <-time.After(time.Duration(max(wait, 1)) * time.Second):
		}
	}
}

// service is `ordersync run`, this very binary, as a child process whose JSON
// log goes to a file.
type service struct {
	cmd      *exec.Cmd
	done     chan struct{}
	webhooks string // base URL of the webhook server, from the log
	pages    string // the journal pages' URL, from the log
}

// startService starts `<this binary> run` with env and waits until its log says where
// the webhook server and the journal pages listen. --config /dev/null keeps a configuration file that may
// exist on this machine (/etc/ordersync/ordersync.yaml) out of the demo.
func startService(ctx context.Context, exe, dir, logPath string, env []string) (*service, error) {
	f, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	from := fi.Size()
	cmd := exec.Command(exe, "run", "--config", os.DevNull)
	cmd.Env, cmd.Dir, cmd.Stdout, cmd.Stderr = env, dir, f, f
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s run: %w", exe, err)
	}
	s := &service{cmd: cmd, done: make(chan struct{})}
	go func() { cmd.Wait(); close(s.done) }()

	deadline := time.Now().Add(20 * time.Second)
	for {
		if s.webhooks == "" {
			s.webhooks = logValue(logPath, from, "webhooks listening", "address")
		}
		if s.pages == "" {
			s.pages = pagesURL(logPath, from)
		}
		if s.webhooks != "" && s.pages != "" {
			return s, nil
		}
		if s.exited() {
			return s, fmt.Errorf("the service exited at start (%s): %s", s.cmd.ProcessState, lastLogError(logPath, from))
		}
		if time.Now().After(deadline) {
			s.kill()
			return s, errors.New(`the service did not log "webhooks listening" and "ui: listening on" within 20s`)
		}
		select {
		case <-ctx.Done():
			s.kill()
			return s, ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func (s *service) pid() int { return s.cmd.Process.Pid }

func (s *service) exited() bool {
	select {
	case <-s.done:
		return true
	default:
		return false
	}
}

// kill is kill -9, and waits for the process to be gone.
func (s *service) kill() {
	if s.exited() {
		return
	}
	s.cmd.Process.Signal(syscall.SIGKILL)
	<-s.done
}

// stop sends SIGTERM and waits up to within for the exit; then it kills.
func (s *service) stop(within time.Duration) (code int, took time.Duration, err error) {
	start := time.Now()
	if !s.exited() {
		s.cmd.Process.Signal(syscall.SIGTERM)
	}
	select {
	case <-s.done:
		return s.cmd.ProcessState.ExitCode(), time.Since(start), nil
	case <-time.After(within):
		s.kill()
		return -1, time.Since(start), fmt.Errorf("the service did not stop within %s of SIGTERM; killed", within)
	}
}

// logRecords reads the JSON lines of the log from offset from.
func logRecords(path string, from int64, fn func(rec map[string]any)) {
	f, err := os.Open(path)
	if err != nil {
		return
	}
	defer f.Close()
	if _, err := f.Seek(from, io.SeekStart); err != nil {
		return
	}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	for sc.Scan() {
		var rec map[string]any
		if json.Unmarshal(sc.Bytes(), &rec) == nil {
			fn(rec)
		}
	}
}

// logValue is the field of the first line from offset whose msg is msg.
func logValue(path string, from int64, msg, field string) string {
	var v string
	logRecords(path, from, func(rec map[string]any) {
		if s, _ := rec[field].(string); v == "" && rec["msg"] == msg {
			v = s
		}
	})
	return v
}

// pagesURL is the journal pages' URL from the first "ui: listening on" line from
// offset from ("" until it is logged).
func pagesURL(path string, from int64) string {
	var v string
	logRecords(path, from, func(rec map[string]any) {
		if msg, _ := rec["msg"].(string); v == "" && strings.HasPrefix(msg, "ui: listening on ") {
			v, _ = rec["url"].(string)
		}
	})
	return v
}

// lastLogError is the last error the log holds from offset from: an ERROR record, or
// a line that is not JSON (`ordersync: …` on a configuration error).
func lastLogError(path string, from int64) string {
	last := "see " + path
	f, err := os.Open(path)
	if err != nil {
		return last
	}
	defer f.Close()
	if _, err := f.Seek(from, io.SeekStart); err != nil {
		return last
	}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		var rec map[string]any
		switch {
		case line == "":
		case json.Unmarshal([]byte(line), &rec) != nil:
			last = line
		case rec["level"] == "ERROR":
			last = fmt.Sprint(rec["msg"])
			if e, ok := rec["err"]; ok {
				last += ": " + fmt.Sprint(e)
			}
		}
	}
	return last
}

// logSize is the log file's size: the offset where what is logged next begins.
func logSize(path string) int64 {
	fi, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return fi.Size()
}
