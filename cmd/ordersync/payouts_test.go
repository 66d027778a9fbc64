package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/xuri/excelize/v2"

	"github.com/ordersync/ordersync/internal/eventually"
	"github.com/ordersync/ordersync/internal/payouts"
	"github.com/ordersync/ordersync/internal/sim/onecsim"
	"github.com/ordersync/ordersync/internal/sim/ozonsim"
	"github.com/ordersync/ordersync/internal/sim/wbsim"
)

// payoutsClock is a clock that never waits: After moves it on at once.
type payoutsTestClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *payoutsTestClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *payoutsTestClock) After(d time.Duration) <-chan time.Time {
	c.mu.Lock()
	c.now = c.now.Add(d)
	ch := make(chan time.Time, 1)
	ch <- c.now
	c.mu.Unlock()
	return ch
}

// cliClock runs a command as e.cli does, Wildberries' report limiter on clock.
func cliClock(e *env, clock *payoutsTestClock, args ...string) (stdout, stderr string, code int) {
	e.t.Helper()
	var out, errb bytes.Buffer
	a := &app{stdin: strings.NewReader(""), stdout: &out, stderr: &errb, environ: e.environ, payoutsClock: clock}
	code = a.execute(context.Background(), a.rootCommand(), args)
	return out.String(), errb.String(), code
}

func payoutsFetchJSON(t *testing.T, out string) fetchJSON {
	t.Helper()
	var f fetchJSON
	if err := json.Unmarshal([]byte(out), &f); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	return f
}

func TestPayoutsFetchOzonKeepsEachLineOnce(t *testing.T) {
	t.Parallel()
	e := newEnvOn(t, "sqlite", onecsim.Options{}, true)
	m := e.withMarketplaces()
	stockSetEnv(e, "ORDERSYNC_UI__TIMEZONE=UTC")
	day := func(d int) time.Time { return time.Date(2026, 9, d, 12, 0, 0, 0, time.UTC) }
	m.ozon.AddOperation(
		ozonsim.Operation{ID: 1, Type: "OperationAgentDeliveredToCustomer", Date: day(2), PostingNumber: "0101-1",
			Amount: dec("850.00"), AccrualsForSale: dec("1000.00"), SaleCommission: dec("-150.00")},
		ozonsim.Operation{ID: 2, Type: "ClientReturnAgentOperation", TransactionType: "returns", Date: day(9),
			PostingNumber: "0101-1", Amount: dec("-850.00"), AccrualsForSale: dec("-1000.00"), SaleCommission: dec("150.00")},
		ozonsim.Operation{ID: 3, Type: "OperationMarketplaceServiceStorage", Date: day(30), Amount: dec("-0.01")},
	)
	out, stderr, code := e.cli("", "payouts", "fetch", "--source", "ozon", "--from", "2026-09-01", "--to", "2026-09-30", "--format", "json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	f := payoutsFetchJSON(t, out)
	if f.Read != 3 || f.Saved != (payouts.Saved{Inserted: 3}) || f.Total == nil || !f.Total.Equal(dec("-0.01")) || !f.Sum.Equal(dec("-0.01")) {
		t.Errorf("first fetch: %+v", f)
	}
	if !strings.Contains(stderr, "page 1") {
		t.Errorf("no progress on stderr: %s", stderr)
	}
	out = cliOK(t, e, "payouts", "fetch", "--source", "ozon", "--from", "2026-09-01", "--to", "2026-09-30")
	wantLine(t, "repeated", out, `^repeated\s+3$`)
	wantLine(t, "new", out, `^new\s+0$`)
	wantLine(t, "total", out, `^marketplace's total\s+-0\.01$`)
	if v := m.ozon.FinanceViolations(); len(v) != 0 {
		t.Errorf("Ozon's rules broken: %+v", v)
	}
	out = cliOK(t, e, "payouts", "status", "--format", "json")
	var fs []payouts.Fetch
	if err := json.Unmarshal([]byte(out), &fs); err != nil {
		t.Fatal(err)
	}
	if len(fs) != 1 || fs[0].Source != "ozon" || fs[0].Saved.Repeated != 3 || fs[0].Total == nil {
		t.Errorf("status: %s", out)
	}
	db := openStockDB(t, e)
	lines, err := db.Payouts().Lines(context.Background(), payouts.Query{OrderIDs: []string{"0101-1"}})
	if err != nil || len(lines) != 2 || lines[0].Kind != payouts.KindSale || lines[1].Kind != payouts.KindReturn {
		t.Errorf("the order's lines: %+v, %v", lines, err)
	}
}

func TestPayoutsFetchWildberriesKeepsToTheLimit(t *testing.T) {
	t.Parallel()
	e := newEnvOn(t, "sqlite", onecsim.Options{}, true)
	m := e.withMarketplaces()
	clock := &payoutsTestClock{now: time.Date(2026, 10, 2, 9, 0, 0, 0, time.UTC)}
	m.wb.SetReportClock(clock.Now)
	msk := time.FixedZone("MSK", 3*3600)
	m.wb.AddReportRows(
		wbsim.ReportRow{RRDID: 11, DocTypeName: "Продажа", SupplierOperName: "Продажа", Quantity: 1, RetailAmount: dec("500"),
			PPVZForPay: dec("420.50"), AssemblyID: 4242, SRID: "s-4242", RRDate: time.Date(2026, 9, 3, 0, 0, 0, 0, msk)},
		wbsim.ReportRow{RRDID: 12, SupplierOperName: "Логистика", DeliveryRub: dec("60"), AssemblyID: 4242, SRID: "s-4242",
			RRDate: time.Date(2026, 9, 3, 0, 0, 0, 0, msk)},
	)
	stockSetEnv(e, "ORDERSYNC_PAYOUTS__WILDBERRIES_URL="+m.wb.URL(), "ORDERSYNC_UI__TIMEZONE=Europe/Moscow")
	out, stderr, code := cliClock(e, clock, "payouts", "fetch", "--source", "wildberries", "--from", "2026-09-01", "--to", "2026-09-30", "--format", "json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	f := payoutsFetchJSON(t, out)
	if f.Source != "wb" || f.Read != 2 || f.Saved.Inserted != 2 || f.Total != nil || !f.Sum.Equal(dec("360.50")) {
		t.Errorf("fetch: %+v", f)
	}
	if v := m.wb.ReportViolations(); len(v) != 0 {
		t.Errorf("the 1-a-minute limit was broken: %+v", v)
	}
	if n := len(m.wb.RequestsOf(wbsim.OpReport)); n != 2 {
		t.Errorf("%d report requests, want 2 (a page and the 204)", n)
	}
}

func TestPayoutsImportKaspi(t *testing.T) {
	t.Parallel()
	e := newEnvOn(t, "sqlite", onecsim.Options{}, true)
	good := filepath.Join("..", "..", "connectors", "kaspi", "testdata", "payouts.xlsx")
	out := cliOK(t, e, "payouts", "import", "--source", "kaspi", good)
	wantLine(t, "new", out, `^new\s+5$`)
	wantLine(t, "total", out, `^marketplace's total\s+12344178\.88$`)
	out = cliOK(t, e, "payouts", "import", "--source", "kaspi", good)
	wantLine(t, "repeated", out, `^repeated\s+5$`)

	// A file cut short, and one without the amount column, are refused, naming the
	// file (and the column); nothing more is kept.
	dir := t.TempDir()
	cut := filepath.Join(dir, "cut.xlsx")
	b, err := os.ReadFile(good)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cut, b[:len(b)/2], 0o644); err != nil {
		t.Fatal(err)
	}
	noAmount := filepath.Join(dir, "no-amount.xlsx")
	x := excelize.NewFile()
	for i, row := range [][]any{{"Номер заказа", "Дата операции", "Тип операции", "Комиссия"}, {"77", "16.09.2026", "Продажа", 5}} {
		cell, _ := excelize.CoordinatesToCellName(1, i+1)
		if err := x.SetSheetRow("Sheet1", cell, &row); err != nil {
			t.Fatal(err)
		}
	}
	if err := x.SaveAs(noAmount); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ file, want string }{
		{cut, "cut.xlsx: not an xlsx file"},
		{noAmount, "no-amount.xlsx: no payout table found: sheet «Sheet1» has no column «Сумма»"},
	} {
		_, stderr, code := e.cli("", "payouts", "import", "--source", "kaspi", tc.file)
		if code != 1 || !strings.Contains(stderr, tc.want) {
			t.Errorf("%s: exit %d, %s; want 1 and %q", tc.file, code, stderr, tc.want)
		}
	}
	db := openStockDB(t, e)
	lines, err := db.Payouts().Lines(context.Background(), payouts.Query{Source: "kaspi"})
	if err != nil || len(lines) != 5 {
		t.Errorf("%d kaspi lines (%v), want the 5 of the good file", len(lines), err)
	}
	out = cliOK(t, e, "payouts", "status")
	wantLine(t, "status", out, `kaspi\s+no-amount\.xlsx\s.*has no column «Сумма».*`)
}

func TestPayoutsUsageErrors(t *testing.T) {
	t.Parallel()
	e := newEnvOn(t, "sqlite", onecsim.Options{}, true)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"payouts", "fetch"}, "--source is required"},
		{[]string{"payouts", "fetch", "--source", "kaspi"}, "payouts import"},
		{[]string{"payouts", "fetch", "--source", "amazon"}, "--source must be"},
		{[]string{"payouts", "fetch", "--source", "ozon", "--from", "2026-09-01"}, "go together"},
		{[]string{"payouts", "fetch", "--source", "ozon", "--from", "2026-09-30", "--to", "2026-09-01"}, "before"},
		{[]string{"payouts", "fetch", "--source", "ozon"}, "connectors.ozon.enabled"},
		{[]string{"payouts", "import", "--source", "ozon", "x.xlsx"}, "only kaspi"},
		{[]string{"payouts", "import", "--source", "kaspi"}, "accepts 1 arg"},
		{[]string{"payouts", "import", "--source", "kaspi", "/nonexistent/p.xlsx"}, "no such file"},
	} {
		_, stderr, code := e.cli("", tc.args...)
		if code != 2 || !strings.Contains(stderr, tc.want) {
			t.Errorf("%s: exit %d, %q; want 2 and %q", strings.Join(tc.args, " "), code, stderr, tc.want)
		}
	}
}

func TestPayoutPeriodDefaultsToThePreviousMonth(t *testing.T) {
	t.Parallel()
	almaty, _ := time.LoadLocation("Asia/Almaty")
	// 1 October 02:00 in Almaty is still 30 September in UTC: the month is Almaty's.
	now := time.Date(2026, 9, 30, 21, 0, 0, 0, time.UTC)
	from, to, err := payoutPeriod("", "", almaty, now)
	if err != nil || !from.Equal(time.Date(2026, 9, 1, 0, 0, 0, 0, almaty)) || !to.Equal(time.Date(2026, 10, 1, 0, 0, 0, 0, almaty)) {
		t.Errorf("default period %s – %s (%v), want September in Almaty", from, to, err)
	}
	from, to, err = payoutPeriod("2026-02-01", "2026-02-28", time.UTC, now)
	if err != nil || !to.Equal(time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)) || !from.Equal(time.Date(2026, 2, 1, 0, 0, 0, 0, time.UTC)) {
		t.Errorf("period %s – %s (%v)", from, to, err)
	}
}

// run starts the nightly reading of the enabled marketplaces, and not when
// payouts.schedule is off.
func TestRunStartsThePayoutsSchedule(t *testing.T) {
	t.Parallel()
	for _, schedule := range []string{"45 2 * * *", "off"} {
		e := newEnvOn(t, "sqlite", onecsim.Options{}, true)
		e.withMarketplaces()
		stockSetEnv(e, "ORDERSYNC_PAYOUTS__SCHEDULE="+schedule)
		stop, log := e.runWithLog()
		eventually.True(t, "the service started, in the log", func() bool { return strings.Contains(log.String(), "connectors polling") })
		running := strings.Contains(log.String(), `"msg":"payouts schedule running"`)
		if code := stop(); code != 0 {
			t.Fatalf("run exit %d", code)
		}
		if want := schedule != "off"; running != want {
			t.Errorf("schedule %q: the payouts schedule running %v, want %v:\n%s", schedule, running, want, log.String())
		}
		if running && !strings.Contains(log.String(), `"sources":"ozon,wildberries"`) {
			t.Errorf("the schedule does not read ozon and wildberries:\n%s", log.String())
		}
	}
}

// TestPayoutsOfASecondOzonCabinet: a further Ozon account's financial lines are
// read with its own credentials and kept under its own source, apart from the
// first cabinet's, and the nightly schedule reads both.
func TestPayoutsOfASecondOzonCabinet(t *testing.T) {
	t.Parallel()
	e := newEnvOn(t, "sqlite", onecsim.Options{}, true)
	m := e.withMarketplaces()
	second := started(t, ozonsim.New(ozonsim.Options{ClientID: "222222", APIKey: "ozon-key-ip"}))
	stockSetEnv(e, "ORDERSYNC_UI__TIMEZONE=UTC",
		"ORDERSYNC_CONNECTORS__OZON-IP__TYPE=ozon",
		"ORDERSYNC_CONNECTORS__OZON-IP__ENABLED=true",
		"ORDERSYNC_CONNECTORS__OZON-IP__BASE_URL="+second.URL(),
		"ORDERSYNC_CONNECTORS__OZON-IP__CLIENT_ID=222222",
		"ORDERSYNC_CONNECTORS__OZON-IP__API_KEY=ozon-key-ip",
		"ORDERSYNC_CONNECTORS__OZON-IP__WAREHOUSE=WH2")
	day := time.Date(2026, 9, 2, 12, 0, 0, 0, time.UTC)
	m.ozon.AddOperation(ozonsim.Operation{ID: 1, Type: "OperationAgentDeliveredToCustomer", Date: day, PostingNumber: "0101-1",
		Amount: dec("850.00"), AccrualsForSale: dec("1000.00"), SaleCommission: dec("-150.00")})
	second.AddOperation(ozonsim.Operation{ID: 1, Type: "OperationAgentDeliveredToCustomer", Date: day, PostingNumber: "0101-1",
		Amount: dec("425.00"), AccrualsForSale: dec("500.00"), SaleCommission: dec("-75.00")})
	for _, src := range []string{"ozon", "ozon-ip"} {
		out, stderr, code := e.cli("", "payouts", "fetch", "--source", src, "--from", "2026-09-01", "--to", "2026-09-30", "--format", "json")
		if f := payoutsFetchJSON(t, out); code != 0 || f.Source != src || f.Saved.Inserted != 1 {
			t.Fatalf("payouts fetch --source %s: exit %d, %+v: %s", src, code, f, stderr)
		}
	}
	db := openStockDB(t, e)
	lines, err := db.Payouts().Lines(context.Background(), payouts.Query{OrderIDs: []string{"0101-1"}})
	if err != nil || len(lines) != 2 {
		t.Fatalf("the posting's lines: %+v, %v; want one per cabinet", lines, err)
	}
	bySource := map[string]string{}
	for _, l := range lines {
		bySource[l.Source] = l.Amount.String()
	}
	if bySource["ozon"] != "850" || bySource["ozon-ip"] != "425" {
		t.Errorf("lines by source %v, want ozon 850 and ozon-ip 425", bySource)
	}
	cfg, err := (&app{environ: e.environ, stdout: io.Discard, stderr: io.Discard}).loadConfig()
	if err != nil {
		t.Fatal(err)
	}
	if got := cfg.ScheduledSources(); !slices.Contains(got, "ozon") || !slices.Contains(got, "ozon-ip") {
		t.Errorf("the schedule reads %v, want both cabinets", got)
	}
}
