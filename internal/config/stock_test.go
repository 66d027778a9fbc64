package config

import (
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/shopspring/decimal"

	"github.com/ordersync/ordersync/internal/stock"
)

// feedToken is a valid connectors.kaspi.feed_token; an error or the effective
// configuration that shows it leaks a secret.
const feedToken = "kaspi-feed_Tok3n-0123456789"

// stockYAML publishes two schedules to the three marketplaces, every stock key set
// away from its default.
const stockYAML = `
connectors:
  kaspi:
    enabled: true
    token: ` + kaspiToken + `
    warehouse: WH1
    stores: {WH1: PP1, "WH.2": PP2, "0001": PP3}
    feed_token: ` + feedToken + `
    company: Магазин "Ромашка"
    merchant_id: 123456
  ozon:
    enabled: true
    client_id: "123456"
    api_key: ` + ozonKey + `
    warehouse: WH1
    stock_warehouses:
      WH1: 1020000000001
      WH.2: "1020000000002"
      "0001": 1020000000003
  wildberries:
    enabled: true
    token: ` + wbToken + `
    warehouse: WH1
    stock_warehouses: {WH1: 507, "WH.2": 508}
    content_url: http://127.0.0.1:8094
stock:
  timezone: Europe/Moscow
  catch_up: NONE
  full_refresh: 6h
  schedules:
    - name: main
      cron: "*/30 * * * *"
      warehouses: [WH1, WH.2, "0001"]
      publish: [kaspi, ozon]
    - name: fast_wb
      cron: "@every 2s"
      warehouses: [WH1]
      publish: [wildberries]
    - name: nightly
      cron: "@daily"
      warehouses: [WH.2]
`

// stockWant is what stockYAML loads to: its stock section and connectors.
func stockWant() (Stock, Connectors) {
	c := defaults().Connectors
	c.Kaspi.Enabled, c.Kaspi.Token, c.Kaspi.Warehouse = true, kaspiToken, "WH1"
	c.Kaspi.Stores = map[string]string{"WH1": "PP1", "WH.2": "PP2", "0001": "PP3"}
	c.Kaspi.FeedToken, c.Kaspi.Company, c.Kaspi.MerchantID = feedToken, `Магазин "Ромашка"`, "123456"
	c.Ozon.Enabled, c.Ozon.ClientID, c.Ozon.APIKey, c.Ozon.Warehouse = true, "123456", ozonKey, "WH1"
	c.Ozon.StockWarehouses = map[string]string{"WH1": "1020000000001", "WH.2": "1020000000002", "0001": "1020000000003"}
	c.Wildberries.Enabled, c.Wildberries.Token, c.Wildberries.Warehouse = true, wbToken, "WH1"
	c.Wildberries.StockWarehouses = map[string]string{"WH1": "507", "WH.2": "508"}
	c.Wildberries.ContentURL = "http://127.0.0.1:8094"
	s := Stock{
		Timezone:          "Europe/Moscow",
		CatchUp:           CatchUpNone,
		FullRefresh:       6 * time.Hour,
		Retention:         7 * 24 * time.Hour,
		RefreshAfterOrder: time.Minute,
		Schedules: []Schedule{
			{Name: "main", Cron: "*/30 * * * *", Warehouses: []string{"WH1", "WH.2", "0001"}, Publish: []string{stock.Kaspi, stock.Ozon}},
			{Name: "fast_wb", Cron: "@every 2s", Warehouses: []string{"WH1"}, Publish: []string{stock.Wildberries}},
			{Name: "nightly", Cron: "@daily", Warehouses: []string{"WH.2"}},
		},
	}
	return s, c
}

// noStockSecrets fails if text shows one of the tests' credentials.
func noStockSecrets(t *testing.T, text string) {
	t.Helper()
	for _, s := range []string{kaspiToken, ozonKey, wbToken, feedToken} {
		if strings.Contains(text, s) {
			t.Errorf("shows secret %q:\n%s", s, text)
		}
	}
}

func TestStockFile(t *testing.T) {
	t.Parallel()
	cfg := mustLoadYAML(t, stockYAML)
	wantStock, wantConn := stockWant()
	if !reflect.DeepEqual(cfg.Stock, wantStock) {
		t.Errorf("stock:\n got %+v\nwant %+v", cfg.Stock, wantStock)
	}
	if !reflect.DeepEqual(cfg.Connectors, wantConn) {
		t.Errorf("connectors:\n got %+v\nwant %+v", cfg.Connectors, wantConn)
	}

	// What the wiring reads.
	loc := cfg.Stock.Location()
	if got, want := loc.String(), "Europe/Moscow"; got != want {
		t.Errorf("Location() = %s, want %s", got, want)
	}
	specs := cfg.Stock.Specs()
	if len(specs) != 3 {
		t.Fatalf("Specs() = %v, want 3", specs)
	}
	for i, sc := range cfg.Stock.Schedules {
		want, err := stock.ParseSpec(sc.Cron, loc)
		if err != nil {
			t.Fatal(err)
		}
		got, err := sc.Spec(loc)
		if err != nil || !reflect.DeepEqual(got, want) || !reflect.DeepEqual(specs[i], want) {
			t.Errorf("schedule %s: Spec = %v, %v; Specs()[%d] = %v; want %v", sc.Name, got, err, i, specs[i], want)
		}
	}
	if got, want := specs[1].Every(), 2*time.Second; got != want {
		t.Errorf("fast_wb every = %v, want %v", got, want)
	}
	at := time.Date(2026, 9, 16, 10, 7, 0, 0, loc)
	if got, want := specs[0].Floor(at), time.Date(2026, 9, 16, 10, 0, 0, 0, loc); !got.Equal(want) {
		t.Errorf("main's slot at %v = %v, want %v (in stock.timezone)", at, got, want)
	}
	for _, tc := range []struct {
		m    string
		want bool
	}{{stock.Kaspi, true}, {stock.Ozon, true}, {stock.Wildberries, true}, {"ebay", false}} {
		if got := cfg.Stock.Publishes(tc.m); got != tc.want {
			t.Errorf("Publishes(%s) = %v, want %v", tc.m, got, tc.want)
		}
	}
	if cfg.Stock.Schedules[2].Publishes(stock.Ozon) || !cfg.Stock.Schedules[0].Publishes(stock.Ozon) {
		t.Error("Schedule.Publishes is wrong")
	}
	if got, want := cfg.Connectors.Ozon.StockWarehouseIDs(), map[string]int64{"WH1": 1020000000001, "WH.2": 1020000000002, "0001": 1020000000003}; !reflect.DeepEqual(got, want) {
		t.Errorf("Ozon.StockWarehouseIDs() = %v, want %v", got, want)
	}
	if got, want := cfg.Connectors.Wildberries.StockWarehouseIDs(), map[string]int64{"WH1": 507, "WH.2": 508}; !reflect.DeepEqual(got, want) {
		t.Errorf("Wildberries.StockWarehouseIDs() = %v, want %v", got, want)
	}
	if got := defaults().Connectors.Ozon.StockWarehouseIDs(); got != nil {
		t.Errorf("StockWarehouseIDs() of no map = %v, want nil", got)
	}
}

func TestStockEmpty(t *testing.T) {
	t.Parallel()
	// No schedule, however written; empty maps are no maps.
	for _, src := range []string{
		"", "stock:\n", "stock: {}\n", "stock:\n  schedules: []\n", "stock:\n  schedules:\n",
		"connectors:\n  ozon:\n    stock_warehouses: {}\n  kaspi:\n    stores:\n",
	} {
		cfg, err := loadYAML(t, src)
		if err != nil {
			t.Errorf("Load(%q): %v", src, err)
			continue
		}
		if !reflect.DeepEqual(cfg.Stock, defaults().Stock) || cfg.Connectors.Ozon.StockWarehouses != nil || cfg.Connectors.Kaspi.Stores != nil {
			t.Errorf("Load(%q): stock %+v, ozon.stock_warehouses %v, kaspi.stores %v; want the defaults",
				src, cfg.Stock, cfg.Connectors.Ozon.StockWarehouses, cfg.Connectors.Kaspi.Stores)
		}
	}
	cfg := mustLoadYAML(t, "", "ORDERSYNC_STOCK__SCHEDULES=", "ORDERSYNC_CONNECTORS__OZON__STOCK_WAREHOUSES=")
	if cfg.Stock.Schedules != nil || cfg.Connectors.Ozon.StockWarehouses != nil {
		t.Errorf("empty variables: schedules %v, stock_warehouses %v; want none", cfg.Stock.Schedules, cfg.Connectors.Ozon.StockWarehouses)
	}
	// A schedule that publishes nowhere takes snapshots only.
	cfg = mustLoadYAML(t, "stock:\n  schedules:\n    - {name: a, cron: '@hourly', warehouses: [WH1], publish: []}\n")
	if sc := cfg.Stock.Schedules; len(sc) != 1 || sc[0].Publish != nil {
		t.Errorf("schedules = %+v, want one publishing nowhere", sc)
	}
}

func TestStockEnv(t *testing.T) {
	t.Parallel()
	cfg, err := loadWithFiles(t, "", files{"/run/credentials/kaspi-feed": feedToken + "\n"},
		"ORDERSYNC_CONNECTORS__KASPI__ENABLED=true",
		"ORDERSYNC_CONNECTORS__KASPI__TOKEN="+kaspiToken,
		"ORDERSYNC_CONNECTORS__KASPI__WAREHOUSE=WH1",
		"ORDERSYNC_CONNECTORS__KASPI__STORES=WH1=PP1, WH.2=PP2,0001=PP3,",
		"ORDERSYNC_CONNECTORS__KASPI__FEED_TOKEN_FILE=/run/credentials/kaspi-feed",
		`ORDERSYNC_CONNECTORS__KASPI__COMPANY=Магазин "Ромашка"`,
		"ORDERSYNC_CONNECTORS__KASPI__MERCHANT_ID=123456",
		"ORDERSYNC_CONNECTORS__OZON__ENABLED=true",
		"ORDERSYNC_CONNECTORS__OZON__CLIENT_ID=123456",
		"ORDERSYNC_CONNECTORS__OZON__API_KEY="+ozonKey,
		"ORDERSYNC_CONNECTORS__OZON__WAREHOUSE=WH1",
		"ORDERSYNC_CONNECTORS__OZON__STOCK_WAREHOUSES=WH1=1020000000001,WH.2=1020000000002,0001=1020000000003",
		"ORDERSYNC_CONNECTORS__WILDBERRIES__ENABLED=true",
		"ORDERSYNC_CONNECTORS__WILDBERRIES__TOKEN="+wbToken,
		"ORDERSYNC_CONNECTORS__WILDBERRIES__WAREHOUSE=WH1",
		"ORDERSYNC_CONNECTORS__WILDBERRIES__STOCK_WAREHOUSES=WH1=507,WH.2=508",
		"ORDERSYNC_CONNECTORS__WILDBERRIES__CONTENT_URL=http://127.0.0.1:8094",
		"ORDERSYNC_STOCK__TIMEZONE=Europe/Moscow",
		"ORDERSYNC_STOCK__CATCH_UP=none",
		"ORDERSYNC_STOCK__FULL_REFRESH=6h",
		`ORDERSYNC_STOCK__SCHEDULES=[
			{"name": "main", "cron": "*/30 * * * *", "warehouses": ["WH1", "WH.2", "0001"], "publish": ["kaspi", "ozon"]},
			{"name": "fast_wb", "cron": "@every 2s", "warehouses": ["WH1"], "publish": ["wildberries"]},
			{"name": "nightly", "cron": "@daily", "warehouses": ["WH.2"]}
		]`,
	)
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	wantStock, wantConn := stockWant()
	if !reflect.DeepEqual(cfg.Stock, wantStock) {
		t.Errorf("stock from the environment:\n got %+v\nwant %+v", cfg.Stock, wantStock)
	}
	if !reflect.DeepEqual(cfg.Connectors, wantConn) {
		t.Errorf("connectors from the environment:\n got %+v\nwant %+v", cfg.Connectors, wantConn)
	}
}

func TestStockEnvReplacesFileWhole(t *testing.T) {
	t.Parallel()
	cfg := mustLoadYAML(t, stockYAML,
		"ORDERSYNC_CONNECTORS__OZON__STOCK_WAREHOUSES=WH1=42",
		`ORDERSYNC_STOCK__SCHEDULES=[{"name":"only","cron":"@hourly","warehouses":["WH1"],"publish":["ozon"]}]`,
	)
	if got, want := cfg.Connectors.Ozon.StockWarehouses, map[string]string{"WH1": "42"}; !reflect.DeepEqual(got, want) {
		t.Errorf("ozon.stock_warehouses = %v, want %v (the variable's map, not merged with the file's)", got, want)
	}
	if got, want := cfg.Stock.Schedules, []Schedule{{Name: "only", Cron: "@hourly", Warehouses: []string{"WH1"}, Publish: []string{"ozon"}}}; !reflect.DeepEqual(got, want) {
		t.Errorf("schedules = %+v, want %+v", got, want)
	}
	if got, want := cfg.Connectors.Wildberries.StockWarehouses["WH1"], "507"; got != want {
		t.Errorf("wildberries.stock_warehouses.WH1 = %q, want %q (file, not overridden)", got, want)
	}
}

func TestStockEnvForms(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		env, key  string
		fragments []string
	}{
		{"ORDERSYNC_CONNECTORS__OZON__STOCK_WAREHOUSES=WH1", "connectors.ozon.stock_warehouses",
			[]string{"NAME=VALUE pairs", `got "WH1"`, "ORDERSYNC_CONNECTORS__OZON__STOCK_WAREHOUSES"}},
		{"ORDERSYNC_CONNECTORS__OZON__STOCK_WAREHOUSES==5", "connectors.ozon.stock_warehouses", []string{"NAME=VALUE pairs", `got "=5"`}},
		{"ORDERSYNC_CONNECTORS__KASPI__STORES=WH1=PP1,WH1=PP2", "connectors.kaspi.stores", []string{`the name "WH1" twice`}},
		{"ORDERSYNC_CONNECTORS__OZON__STOCK_WAREHOUSES__WH1=5", "connectors.ozon.stock_warehouses.wh1",
			[]string{"unknown key", "set whole", "ORDERSYNC_CONNECTORS__OZON__STOCK_WAREHOUSES"}},
		{"ORDERSYNC_STOCK__SCHEDULES__0__CRON=@hourly", "stock.schedules.0.cron", []string{"unknown key", "JSON list", "ORDERSYNC_STOCK__SCHEDULES"}},
		{`ORDERSYNC_STOCK__SCHEDULES={"name":"main"}`, "stock.schedules", []string{"JSON list", "got a section of keys", "ORDERSYNC_STOCK__SCHEDULES"}},
		{`ORDERSYNC_STOCK__SCHEDULES=[{"name":"main"}`, "stock.schedules", []string{"JSON list", "unexpected EOF"}},
		{`ORDERSYNC_STOCK__SCHEDULES=[] []`, "stock.schedules", []string{"nothing after it"}},
		{`ORDERSYNC_STOCK__SCHEDULES=["main"]`, "stock.schedules[0]", []string{"section of keys", `"main"`, "ORDERSYNC_STOCK__SCHEDULES"}},
		{`ORDERSYNC_STOCK__SCHEDULES=[{"name":"main","cron":"@hourly","warehouses":["WH1"],"publihs":["ozon"]}]`, "stock.schedules[0].publihs",
			[]string{"unknown key", "ORDERSYNC_STOCK__SCHEDULES", "did you mean stock.schedules[0].publish?"}},
		{`ORDERSYNC_STOCK__SCHEDULES=[{"name":5,"cron":"@hourly","warehouses":["WH1"]}]`, "stock.schedules[0].name",
			[]string{"must be a string", "got 5", "ORDERSYNC_STOCK__SCHEDULES"}},
		{`ORDERSYNC_STOCK__SCHEDULES=[{"name":"a","cron":"@hourly","warehouses":"WH1"}]`, "stock.schedules[0].warehouses", []string{"must be a list", `"WH1"`}},
		{"ORDERSYNC_STOCK__FULL_REFRESH=1d", "stock.full_refresh", []string{"30s", `"1d"`, "ORDERSYNC_STOCK__FULL_REFRESH"}},
	} {
		_, err := loadYAML(t, "", tc.env)
		wantProblem(t, err, tc.key, tc.fragments...)
	}
}

func TestStockValidation(t *testing.T) {
	t.Parallel()
	schedule := func(lines ...string) string {
		return "stock:\n  schedules:\n    - " + strings.Join(lines, "\n      ") + "\n"
	}
	for _, tc := range []struct {
		src, key, msg string
	}{
		{"stock:\n  timezone: Asia/Almatty\n", "stock.timezone", `unknown time zone "Asia/Almatty"`},
		{"stock:\n  timezone: ''\n", "stock.timezone", "Asia/Almaty"},
		{"stock:\n  catch_up: all\n", "stock.catch_up", `must be one of latest, none, got "all"`},
		{"stock:\n  full_refresh: 0s\n", "stock.full_refresh", "must be greater than 0, got 0s"},
		{"stock:\n  full_refresh: -1h\n", "stock.full_refresh", "must be greater than 0, got -1h"},
		{schedule("cron: '@hourly'", "warehouses: [WH1]"), "stock.schedules[0].name", "is required"},
		{schedule("name: Main", "cron: '@hourly'", "warehouses: [WH1]"), "stock.schedules[0].name", `must match [a-z0-9_-]{1,64}`},
		{schedule("name: "+strings.Repeat("a", 65), "cron: '@hourly'", "warehouses: [WH1]"), "stock.schedules[0].name", "must match"},
		{schedule("name: 'a:b'", "cron: '@hourly'", "warehouses: [WH1]"), "stock.schedules[0].name", "must match"},
		{schedule("name: manual", "cron: '@hourly'", "warehouses: [WH1]"), "stock.schedules[0].name", `"manual" is reserved`},
		{schedule("name: main", "cron: '@hourly'", "warehouses: [WH1]") + "    - {name: main, cron: '@daily', warehouses: [WH2]}\n",
			"stock.schedules[1].name", `"main" is the name of stock.schedules[0] already`},
		{schedule("name: main", "warehouses: [WH1]"), "stock.schedules[0].cron", "is required: five fields"},
		{schedule("name: main", "cron: '* * * * * *'", "warehouses: [WH1]"), "stock.schedules[0].cron", `got "* * * * * *": expected exactly 5 fields`},
		{schedule("name: main", "cron: '61 * * * *'", "warehouses: [WH1]"), "stock.schedules[0].cron", "above maximum"},
		{schedule("name: main", "cron: '@fortnightly'", "warehouses: [WH1]"), "stock.schedules[0].cron", "unrecognized descriptor"},
		{schedule("name: main", "cron: '@every 1500ms'", "warehouses: [WH1]"), "stock.schedules[0].cron", "whole number of seconds"},
		{schedule("name: main", "cron: '@every 0s'", "warehouses: [WH1]"), "stock.schedules[0].cron", "at least 1s"},
		{schedule("name: main", "cron: 'CRON_TZ=UTC * * * * *'", "warehouses: [WH1]"), "stock.schedules[0].cron", "stock.timezone"},
		{schedule("name: main", "cron: '@hourly'"), "stock.schedules[0].warehouses", "must list at least one 1C warehouse code"},
		{schedule("name: main", "cron: '@hourly'", "warehouses: []"), "stock.schedules[0].warehouses", "must list at least one"},
		{schedule("name: main", "cron: '@hourly'", "warehouses: [WH1, ' ']"), "stock.schedules[0].warehouses[1]", "got an empty value"},
		{schedule("name: main", "cron: '@hourly'", "warehouses: ['WH:1']"), "stock.schedules[0].warehouses[0]", `must not contain ':'`},
		{schedule("name: main", "cron: '@hourly'", "warehouses: [\"WH\\n1\"]"), "stock.schedules[0].warehouses[0]", "control characters"},
		{schedule("name: main", "cron: '@hourly'", "warehouses: [WH1, WH2, WH1]"), "stock.schedules[0].warehouses[2]", `"WH1" is listed twice`},
		{schedule("name: main", "cron: '@hourly'", "warehouses: [WH1]", "publish: [ebay]"), "stock.schedules[0].publish[0]",
			`unknown account "ebay", known: kaspi, ozon, wildberries, yandex_market, uzum`},
		{schedule("name: main", "cron: '@hourly'", "warehouses: [WH1]", "publish: [Ozon]"), "stock.schedules[0].publish[0]", `unknown account "Ozon"`},
	} {
		_, err := loadYAML(t, tc.src)
		wantProblem(t, err, tc.key, tc.msg)
	}

	// Good values: the forms of a spec, the edges of a name, a zone other than the
	// default, spellings normalised.
	for _, src := range []string{
		schedule("name: "+strings.Repeat("z", 64), "cron: '0 9 * * 1-5'", "warehouses: [WH1]"),
		schedule("name: a-b_1", "cron: ' @every 1h30m '", "warehouses: ['Склад №1', 'WH.2', '0001']"),
		schedule("name: x", "cron: '@yearly'", "warehouses: [WH1]", "publish: []"),
		"stock:\n  timezone: UTC\n  catch_up: Latest\n  full_refresh: 1s\n",
	} {
		if _, err := loadYAML(t, src); err != nil {
			t.Errorf("Load(%q): %v", src, err)
		}
	}
	if got := mustLoadYAML(t, "stock:\n  catch_up: NONE\n").Stock.CatchUp; got != CatchUpNone {
		t.Errorf("catch_up NONE = %q, want %q", got, CatchUpNone)
	}
}

// TestStockEntryKeys: the keys of a list's entries are checked as strictly as any
// other, each problem said once.
func TestStockEntryKeys(t *testing.T) {
	t.Parallel()
	_, err := loadYAML(t, `
stock:
  schedules:
    - name: main
      crom: "*/30 * * * *"
      warehouses: [WH1]
      publihs: [ozon]
      Name: again
    -
    - name: other
      cron: "@hourly"
      warehouses: [WH1]
`)
	wantProblem(t, err, "stock.schedules[0].crom", "unknown key", testPath, "did you mean stock.schedules[0].cron?")
	wantProblem(t, err, "stock.schedules[0].publihs", "unknown key", "did you mean stock.schedules[0].publish?")
	wantProblem(t, err, "stock.schedules[0].Name", "unknown key", "did you mean stock.schedules[0].name?")
	wantProblem(t, err, "stock.schedules[0].cron", "is required")
	wantProblem(t, err, "stock.schedules[1]", "must be a section of keys", "got nothing")
	if got, want := problemKeys(t, err), []string{
		"stock.schedules[0].Name", "stock.schedules[0].crom", "stock.schedules[0].publihs",
		"stock.schedules[1]", "stock.schedules[0].cron",
	}; !slices.Equal(got, want) {
		t.Errorf("problem keys = %q, want %q\n%v", got, want, err)
	}

	// The list written as a section, an entry that is no section, a value that
	// is no list: each said once, with the list's key.
	for _, tc := range []struct {
		src, key  string
		fragments []string
	}{
		{"stock:\n  schedules:\n    main:\n      cron: '@hourly'\n      warehouses: [WH1]\n", "stock.schedules", []string{"must be a list of sections", testPath}},
		{"stock:\n  schedules: {}\n", "stock.schedules", []string{"must be a list of sections", "got a section of keys"}},
		{"stock:\n  schedules: main\n", "stock.schedules", []string{"must be a list of sections", `got "main"`}},
		{"stock:\n  schedules: [main]\n", "stock.schedules[0]", []string{"section of keys", `got "main"`, testPath}},
		{"stock:\n  schedules:\n    - name: main\n      cron: 5\n      warehouses: WH1\n", "stock.schedules[0].cron", []string{"must be a string", "got 5", "quotes", testPath}},
		{"stock:\n  schedules:\n    - name: main\n      cron: 5\n      warehouses: WH1\n", "stock.schedules[0].warehouses", []string{"must be a list", `got "WH1"`, testPath}},
		{"stock:\n  schedules:\n    - {name: main, cron: '@hourly', warehouses: [1]}\n", "stock.schedules[0].warehouses[0]", []string{"must be a string", "got 1", "quotes"}},
		{"stock:\n  schedules:\n    - {name: main, cron: '@hourly', warehouses: [WH1], publish: ozon}\n", "stock.schedules[0].publish", []string{"must be a list"}},
	} {
		_, err := loadYAML(t, tc.src)
		wantProblem(t, err, tc.key, tc.fragments...)
		if n := len(problemsOf(t, err)); n != 1 && !strings.Contains(tc.src, "cron: 5") {
			t.Errorf("Load(%q): %d problems, want 1:\n%v", tc.src, n, err)
		}
	}
}

// TestStringMaps: the names of a map of strings are the user's (dots and case kept,
// strings in the file), its values strings or whole numbers as written.
func TestStringMaps(t *testing.T) {
	t.Parallel()
	cfg := mustLoadYAML(t, `
connectors:
  ozon:
    stock_warehouses:
      "Склад.1": 10
      wh1: "20"
      WH1: 18446744073709551615
      "": 1
`)
	want := map[string]string{"Склад.1": "10", "wh1": "20", "WH1": "18446744073709551615", "": "1"}
	if got := cfg.Connectors.Ozon.StockWarehouses; !reflect.DeepEqual(got, want) {
		t.Errorf("stock_warehouses = %q, want %q", got, want)
	}

	for _, tc := range []struct {
		src, key  string
		fragments []string
	}{
		{"connectors:\n  ozon:\n    stock_warehouses: {0001: 5}\n", "connectors.ozon.stock_warehouses.1", []string{"YAML reads as a whole number", "quotes", testPath}},
		{"connectors:\n  ozon:\n    stock_warehouses: {true: 5}\n", "connectors.ozon.stock_warehouses.true", []string{"true or false", "quotes"}},
		{"connectors:\n  ozon:\n    stock_warehouses: {WH1: 0123}\n", "connectors.ozon.stock_warehouses.WH1", []string{"is 0123", "the number 83", "quotes", testPath}},
		{"connectors:\n  ozon:\n    stock_warehouses: {WH1: 1_000}\n", "connectors.ozon.stock_warehouses.WH1", []string{"is 1_000", "quotes"}},
		{"connectors:\n  ozon:\n    stock_warehouses: {WH1: 1.5}\n", "connectors.ozon.stock_warehouses.WH1", []string{"a string or a whole number", "got 1.5"}},
		{"connectors:\n  ozon:\n    stock_warehouses: {WH1: }\n", "connectors.ozon.stock_warehouses.WH1", []string{"a string or a whole number", "got nothing"}},
		{"connectors:\n  ozon:\n    stock_warehouses: {WH1: [1]}\n", "connectors.ozon.stock_warehouses.WH1", []string{"a string or a whole number", "a list"}},
		{"connectors:\n  ozon:\n    stock_warehouses: {WH1: {a: 1}}\n", "connectors.ozon.stock_warehouses.WH1", []string{"a string or a whole number", "a section"}},
		{"connectors:\n  ozon:\n    stock_warehouses: [WH1]\n", "connectors.ozon.stock_warehouses", []string{"a section of names and values", "got a list", testPath}},
		{"connectors:\n  kaspi:\n    stores: PP1\n", "connectors.kaspi.stores", []string{"a section of names and values", `got "PP1"`}},
		{"connectors:\n  kaspi:\n    merchant_id: 0x1F\n", "connectors.kaspi.merchant_id", []string{"is 0x1F", "the number 31", "quotes"}},
		{"connectors:\n  kaspi:\n    merchant_id: 1.5\n", "connectors.kaspi.merchant_id", []string{"must be a string", "1.5"}},
	} {
		_, err := loadYAML(t, tc.src)
		wantProblem(t, err, tc.key, tc.fragments...)
		if n := len(problemsOf(t, err)); n != 1 {
			t.Errorf("Load(%q): %d problems, want 1:\n%v", tc.src, n, err)
		}
	}

	// A good item stays when another fails.
	_, err := loadYAML(t, stockYAML+"\n", "ORDERSYNC_CONNECTORS__OZON__STOCK_WAREHOUSES=WH1=1,WH.2=x,0001=3")
	wantProblem(t, err, "connectors.ozon.stock_warehouses.WH.2", `must be the Ozon warehouse id, a whole number greater than 0, got "x"`)
	if n := len(problemsOf(t, err)); n != 1 {
		t.Errorf("%d problems, want 1:\n%v", n, err)
	}

	// A merchant id may be a number as written, or a string.
	for _, src := range []string{"merchant_id: 123456", "merchant_id: '123456'"} {
		if got := mustLoadYAML(t, "connectors:\n  kaspi:\n    "+src+"\n").Connectors.Kaspi.MerchantID; got != "123456" {
			t.Errorf("%s: merchant_id = %q, want %q", src, got, "123456")
		}
	}
}

func TestStockConnectorKeys(t *testing.T) {
	t.Parallel()
	// section returns the connectors of stockYAML with lines replacing keys of
	// the connector name.
	section := func(name string, lines ...string) string {
		src := stockYAML
		for _, l := range lines {
			key, _, _ := strings.Cut(l, ":")
			start := strings.Index(src, "  "+name+":\n")
			i := strings.Index(src[start:], "\n    "+key+":")
			if i < 0 {
				src = strings.Replace(src, "  "+name+":\n", "  "+name+":\n    "+l+"\n", 1)
				continue
			}
			i += start + 1
			j := strings.Index(src[i:], "\n") + i
			// A block map continues on indented lines.
			for strings.HasPrefix(src[j+1:], "      ") {
				j = strings.Index(src[j+1:], "\n") + j + 1
			}
			src = src[:i] + "    " + l + src[j:]
		}
		return src
	}
	if _, err := loadYAML(t, section("ozon", "warehouse: WH9")); err != nil {
		t.Fatalf("section() breaks the configuration: %v", err)
	}
	for _, tc := range []struct {
		src, key, msg string
	}{
		{section("ozon", "stock_warehouses: {WH1: 0, WH.2: 1, '0001': 2}"), "connectors.ozon.stock_warehouses.WH1", `must be the Ozon warehouse id, a whole number greater than 0, got "0"`},
		{section("ozon", "stock_warehouses: {WH1: -5, WH.2: 1, '0001': 2}"), "connectors.ozon.stock_warehouses.WH1", `got "-5"`},
		{section("ozon", "stock_warehouses: {WH1: '+5', WH.2: 1, '0001': 2}"), "connectors.ozon.stock_warehouses.WH1", `got "+5"`},
		{section("ozon", "stock_warehouses: {WH1: 'abc', WH.2: 1, '0001': 2}"), "connectors.ozon.stock_warehouses.WH1", `got "abc"`},
		{section("ozon", "stock_warehouses: {WH1: '99999999999999999999', WH.2: 1, '0001': 2}"), "connectors.ozon.stock_warehouses.WH1", "whole number greater than 0"},
		{section("ozon", "stock_warehouses: {WH1: 99999999999999999999, WH.2: 1, '0001': 2}"), "connectors.ozon.stock_warehouses.WH1", "a string or a whole number, got 1e+20"},
		{section("ozon", "stock_warehouses: {WH1: 1, WH.2: 1, '0001': 2, 'A:B': 3}"), "connectors.ozon.stock_warehouses.A:B", "is no warehouse: the name must not contain ':'"},
		{section("ozon", "stock_warehouses: {WH1: 1, WH.2: 1, '0001': 2, '': 3}"), "connectors.ozon.stock_warehouses", "has an empty name"},
		{section("wildberries", "stock_warehouses: {WH1: x, WH.2: 1}"), "connectors.wildberries.stock_warehouses.WH1", `must be the Wildberries seller warehouse id, a whole number greater than 0, got "x"`},
		{section("wildberries", "content_url: ''"), "connectors.wildberries.content_url", "is required when connectors.wildberries.enabled is true"},
		{section("wildberries", "content_url: content-api.wildberries.ru"), "connectors.wildberries.content_url", "absolute http:// or https:// URL"},
		{section("wildberries", "content_url: https://u:hunter2@content-api.wildberries.ru"), "connectors.wildberries.content_url", "must not contain a user name or password"},
		{section("wildberries", "content_url: 'https://content-api.wildberries.ru/?a=1'"), "connectors.wildberries.content_url", "must not have a query or fragment"},
		{section("kaspi", "stores: {WH1: ' ', WH.2: PP2, '0001': PP3}"), "connectors.kaspi.stores.WH1", "must be the Kaspi store id (storeId in the feed, such as PP1), got an empty value"},
		{section("kaspi", "stores: {WH1: \"PP\\n1\", WH.2: PP2, '0001': PP3}"), "connectors.kaspi.stores.WH1", "control characters"},
		{section("kaspi", "feed_token: short-token"), "connectors.kaspi.feed_token", "at least 16 characters of A-Z, a-z, 0-9, _ and -"},
		{section("kaspi", "feed_token: "+strings.Repeat("x", 20)+"/.."), "connectors.kaspi.feed_token", "at least 16 characters of A-Z, a-z, 0-9, _ and -"},
		{section("kaspi", "company: \"a\\nb\""), "connectors.kaspi.company", "control characters"},
		{section("kaspi", "merchant_id: \"1\\n2\""), "connectors.kaspi.merchant_id", "control characters"},
	} {
		_, err := loadYAML(t, tc.src)
		wantProblem(t, err, tc.key, tc.msg)
		noStockSecrets(t, errText(err))
		if err != nil && strings.Contains(err.Error(), "hunter2") {
			t.Errorf("error shows a password:\n%v", err)
		}
	}

	// A connector that is not enabled is not checked beyond the types of its keys.
	cfg := mustLoadYAML(t, `
connectors:
  ozon:
    stock_warehouses: {WH1: x, "A:B": 0}
  wildberries:
    content_url: not a url
  kaspi:
    stores: {WH1: ""}
    feed_token: short
`)
	if got, want := cfg.Connectors.Ozon.StockWarehouses, map[string]string{"WH1": "x", "A:B": "0"}; !reflect.DeepEqual(got, want) {
		t.Errorf("stock_warehouses = %v, want %v", got, want)
	}
}

// TestStockNeeds: what publishing needs from the connectors and the HTTP server,
// each key said once, with every schedule that needs it.
func TestStockNeeds(t *testing.T) {
	t.Parallel()
	_, err := loadYAML(t, `
http:
  listen: ""
stock:
  schedules:
    - name: main
      cron: "*/30 * * * *"
      warehouses: [WH1, WH2, "bad:code"]
      publish: [kaspi, ozon, wildberries, ebay]
    - name: night
      cron: "@daily"
      warehouses: [WH2]
      publish: [ozon, ozon]
`)
	if got, want := problemKeys(t, err), []string{
		"stock.schedules[0].warehouses[2]", "stock.schedules[0].publish[3]", "stock.schedules[1].publish[1]",
		"connectors.kaspi.enabled",
		"connectors.kaspi.stores.WH1", "connectors.kaspi.stores.WH2",
		"connectors.kaspi.feed_token", "connectors.kaspi.company", "connectors.kaspi.merchant_id", "http.listen",
		"connectors.ozon.enabled",
		"connectors.ozon.stock_warehouses.WH1", "connectors.ozon.stock_warehouses.WH2",
		"connectors.wildberries.enabled",
		"connectors.wildberries.stock_warehouses.WH1", "connectors.wildberries.stock_warehouses.WH2",
	}; !slices.Equal(got, want) {
		t.Errorf("problem keys = %q\nwant %q\n%v", got, want, err)
	}
	wantProblem(t, err, "connectors.kaspi.enabled", "must be true: stock.schedules[0] (main) publishes stock to kaspi")
	wantProblem(t, err, "connectors.ozon.enabled", "must be true: stock.schedules[0] (main) and stock.schedules[1] (night) publish stock to ozon")
	wantProblem(t, err, "connectors.ozon.stock_warehouses.WH1", "is missing: stock.schedules[0] (main) publishes warehouse WH1 to ozon; set it to the Ozon warehouse id")
	wantProblem(t, err, "connectors.ozon.stock_warehouses.WH2", "is missing: stock.schedules[0] (main) and stock.schedules[1] (night) publish warehouse WH2 to ozon")
	wantProblem(t, err, "connectors.wildberries.stock_warehouses.WH2", "publishes warehouse WH2 to wildberries; set it to the Wildberries seller warehouse id")
	wantProblem(t, err, "connectors.kaspi.stores.WH1", "is missing: stock.schedules[0] (main) publishes warehouse WH1 to kaspi; set it to the Kaspi store id")
	wantProblem(t, err, "connectors.kaspi.feed_token", "is required: stock.schedules[0] (main) publishes stock to kaspi", "/feeds/kaspi/<feed_token>.xml", "connectors.kaspi.feed_token_file")
	wantProblem(t, err, "connectors.kaspi.company", "is required", "<company>")
	wantProblem(t, err, "connectors.kaspi.merchant_id", "is required", "<merchantid>")
	wantProblem(t, err, "http.listen", "is empty, which disables the HTTP server, but stock.schedules[0] (main) publishes stock to kaspi")

	// With the connectors enabled and every warehouse mapped, it loads; each
	// missing piece is one problem.
	if _, err := loadYAML(t, stockYAML); err != nil {
		t.Fatalf("Load: %v", err)
	}
	for _, tc := range []struct {
		env []string
		key string
	}{
		{[]string{"ORDERSYNC_CONNECTORS__OZON__ENABLED=false"}, "connectors.ozon.enabled"},
		{[]string{"ORDERSYNC_CONNECTORS__WILDBERRIES__ENABLED=false"}, "connectors.wildberries.enabled"},
		{[]string{"ORDERSYNC_CONNECTORS__KASPI__ENABLED=false"}, "connectors.kaspi.enabled"},
		{[]string{"ORDERSYNC_CONNECTORS__OZON__STOCK_WAREHOUSES=WH1=1,0001=3"}, "connectors.ozon.stock_warehouses.WH.2"},
		{[]string{"ORDERSYNC_CONNECTORS__KASPI__STORES=WH1=PP1,WH.2=PP2"}, "connectors.kaspi.stores.0001"},
		{[]string{"ORDERSYNC_CONNECTORS__KASPI__FEED_TOKEN="}, "connectors.kaspi.feed_token"},
		{[]string{"ORDERSYNC_CONNECTORS__KASPI__COMPANY= "}, "connectors.kaspi.company"},
		{[]string{"ORDERSYNC_CONNECTORS__KASPI__MERCHANT_ID="}, "connectors.kaspi.merchant_id"},
		{[]string{"ORDERSYNC_HTTP__LISTEN="}, "http.listen"},
	} {
		_, err := loadYAML(t, stockYAML, tc.env...)
		if got := problemKeys(t, err); !slices.Equal(got, []string{tc.key}) {
			t.Errorf("with %q: problem keys = %q, want [%s]\n%v", tc.env, got, tc.key, err)
		}
		noStockSecrets(t, errText(err))
	}
	// A warehouse a schedule snapshots but does not publish needs no mapping.
	if _, err := loadYAML(t, stockYAML, "ORDERSYNC_CONNECTORS__WILDBERRIES__STOCK_WAREHOUSES=WH1=507"); err != nil {
		t.Errorf("nightly does not publish WH.2 to wildberries: %v", err)
	}
}

func TestStockFeedTokenFile(t *testing.T) {
	t.Parallel()
	src := strings.Replace(stockYAML, "feed_token: "+feedToken, "feed_token_file: /run/credentials/kaspi-feed", 1)
	cfg, err := loadWithFiles(t, src, files{"/run/credentials/kaspi-feed": feedToken + "\n"})
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	if got := cfg.Connectors.Kaspi.FeedToken; got != feedToken {
		t.Errorf("feed_token = %q, want %q (from its _file, newline trimmed)", got, feedToken)
	}
	_, err = loadWithFiles(t, src, files{"/run/credentials/kaspi-feed": "not/a\ntoken\n"})
	wantProblem(t, err, "connectors.kaspi.feed_token", "at least 16 characters")
	if strings.Contains(errText(err), "not/a") {
		t.Errorf("error shows the feed token:\n%v", err)
	}
	_, err = loadYAML(t, src+"\n", "ORDERSYNC_CONNECTORS__KASPI__FEED_TOKEN="+feedToken)
	if err != nil {
		t.Errorf("the variable overrides the file's feed_token_file: %v", err)
	}
}

func TestStockRetentionIsChecked(t *testing.T) {
	_, err := loadYAML(t, "stock:\n  retention: 30m\n")
	if err == nil || !strings.Contains(err.Error(), "stock.retention: must be at least 1h, got 30m") {
		t.Fatalf("err = %v, want stock.retention named", err)
	}
}

func TestStockEffective(t *testing.T) {
	t.Parallel()
	cfg := mustLoadYAML(t, stockYAML)
	out, err := cfg.Effective()
	if err != nil {
		t.Fatalf("Effective: %v", err)
	}
	text := string(out)
	for _, want := range []string{`
    max_response: 16MiB
    stores:
      "0001": PP3
      WH.2: PP2
      WH1: PP1
    feed_token: '***'
    company: Магазин "Ромашка"
    merchant_id: "123456"
`, `
    max_response: 16MiB
    stock_warehouses:
      "0001": "1020000000003"
      WH.2: "1020000000002"
      WH1: "1020000000001"
`, `
    stock_warehouses:
      WH.2: "508"
      WH1: "507"
    content_url: http://127.0.0.1:8094
`, `
stock:
  timezone: Europe/Moscow
  catch_up: none
  full_refresh: 6h
  retention: 168h
  schedules:
    - name: main
      cron: '*/30 * * * *'
      warehouses: [WH1, WH.2, "0001"]
      publish: [kaspi, ozon]
    - name: fast_wb
      cron: '@every 2s'
      warehouses: [WH1]
      publish: [wildberries]
    - name: nightly
      cron: '@daily'
      warehouses: [WH.2]
      publish: []
`} {
		if !strings.Contains(text, want) {
			t.Errorf("effective configuration:\n%s\nwant it to contain:%s", text, want)
		}
	}
	if !strings.Contains(text, "      publish: []\n  reserve: []\n  refresh_after_order: 1m\nui:\n") {
		t.Errorf("stock is not the section before ui:\n%s", text)
	}
	noStockSecrets(t, text)

	// Round trip, secrets restored in order.
	restored := text
	for _, s := range []string{kaspiToken, feedToken, ozonKey, wbToken} {
		restored = strings.Replace(restored, ": '***'\n", ": "+s+"\n", 1)
	}
	if again := mustLoadYAML(t, restored); !reflect.DeepEqual(again, cfg) {
		t.Errorf("round trip:\n got %+v %+v\nwant %+v %+v\nfrom:\n%s", again.Stock, again.Connectors, cfg.Stock, cfg.Connectors, restored)
	}

	// None: empty forms, which load back.
	cfg = mustLoadYAML(t, "")
	out, err = cfg.Effective()
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"    stores: {}\n", "    stock_warehouses: {}\n", "  schedules: []\n", "    feed_token: \"\"\n"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("effective configuration lacks %q:\n%s", want, out)
		}
	}
	if again := mustLoadYAML(t, string(out)); !reflect.DeepEqual(again, cfg) {
		t.Errorf("round trip of defaults:\n got %+v\nwant %+v", again.Stock, cfg.Stock)
	}
}

// TestEffectiveStringMapNames: a name prints so that it reads back as the same
// string, whatever YAML would take it for unquoted.
func TestEffectiveStringMapNames(t *testing.T) {
	t.Parallel()
	names := []string{"<<", "1", "null", "~", "true", "a: b", "-", "#x", "WH.1", "", " sp ", "[x]", "{y}", "*z", "&a", "!t", "%p", "@q", "'", `"`}
	var c Config
	c.Connectors.Kaspi.Stores = map[string]string{}
	for _, n := range names {
		c.Connectors.Kaspi.Stores[n] = n
	}
	out, err := c.Effective()
	if err != nil {
		t.Fatal(err)
	}
	var p problems
	flat, _, _, err := parseFile(out, "", map[string]string{}, &p)
	if err != nil || len(p) > 0 {
		t.Fatalf("effective output does not parse: %v %v\n%s", err, p.err(), out)
	}
	if got := flat["connectors.kaspi.stores"]; !reflect.DeepEqual(got, c.Connectors.Kaspi.Stores) {
		t.Errorf("stores read back = %q, want %q\n%s", got, c.Connectors.Kaspi.Stores, out)
	}
}

// TestDecodeProblemsAllReported: every value of the wrong type is reported, not the
// first only.
func TestDecodeProblemsAllReported(t *testing.T) {
	t.Parallel()
	_, err := loadYAML(t, `
onec:
  timeout: 30
  max_concurrency: four
worker:
  backoff_min: yes
stock:
  full_refresh: 24
  schedules:
    - {name: 1, cron: 2, warehouses: 3}
    - {name: ok, cron: '@hourly', warehouses: [WH1], publish: [4]}
`)
	if got, want := problemKeys(t, err), []string{
		"onec.timeout", "onec.max_concurrency", "worker.backoff_min", "stock.full_refresh",
		"stock.schedules[0].name", "stock.schedules[0].cron", "stock.schedules[0].warehouses", "stock.schedules[1].publish[0]",
	}; !sameSet(got, want) {
		t.Errorf("problem keys = %q, want %q\n%v", got, want, err)
	}
}

func sameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}

func TestStockAccessorsPanicWithoutValidation(t *testing.T) {
	t.Parallel()
	for name, f := range map[string]func(){
		"Location":          func() { Stock{Timezone: "Nowhere/City"}.Location() },
		"Specs":             func() { Stock{Timezone: "UTC", Schedules: []Schedule{{Cron: "nonsense"}}}.Specs() },
		"StockWarehouseIDs": func() { Ozon{StockWarehouses: map[string]string{"WH1": "x"}}.StockWarehouseIDs() },
	} {
		func() {
			defer func() {
				if r := recover(); r == nil || !strings.Contains(r.(string), "without validation") {
					t.Errorf("%s: recovered %v, want a panic saying it was used without validation", name, r)
				}
			}()
			f()
		}()
	}
	if _, err := (Schedule{Cron: "nonsense"}).Spec(time.UTC); err == nil {
		t.Error("Schedule.Spec of nonsense: no error")
	}
}

// TestEntryKeysTable: the keys of a list's entries are known from the struct, and
// a field the machinery cannot handle fails loudly.
func TestEntryKeysTable(t *testing.T) {
	t.Parallel()
	f := keys().byKey["stock.schedules"]
	if f == nil || f.entries == nil {
		t.Fatalf("stock.schedules is not a list of sections: %+v", f)
	}
	var got []string
	for _, ef := range f.entries.fields {
		got = append(got, ef.key)
	}
	if want := []string{"name", "cron", "warehouses", "publish"}; !slices.Equal(got, want) {
		t.Errorf("entry keys = %q, want %q", got, want)
	}
	for _, key := range []string{"connectors.kaspi.stores", "connectors.ozon.stock_warehouses", "connectors.wildberries.stock_warehouses"} {
		if f := keys().byKey[key]; f == nil || !f.isStringMap() {
			t.Errorf("%s is not a map of strings: %+v", key, f)
		}
	}
	if f := keys().byKey["connectors.kaspi.merchant_id"]; f == nil || !f.numberText {
		t.Errorf("connectors.kaspi.merchant_id does not take numbers as text: %+v", f)
	}
	for name, typ := range map[string]any{
		"nested section": struct {
			L []struct {
				S struct{} `koanf:"s"`
			} `koanf:"l"`
		}{},
		"secret in an entry": struct {
			L []struct {
				S string `koanf:"s" secret:"true"`
			} `koanf:"l"`
		}{},
		"map in an entry": struct {
			L []struct {
				M map[string]string `koanf:"m"`
			} `koanf:"l"`
		}{},
		"secret map": struct {
			M map[string]string `koanf:"m" secret:"true"`
		}{},
		"number tag on an int": struct {
			N int `koanf:"n" number:"text"`
		}{},
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: no panic", name)
				}
			}()
			(&keyTable{byKey: map[string]*field{}, byFile: map[string]*field{}, sections: map[string]bool{}, maps: map[string]*mapSection{}}).
				walk(reflect.TypeOf(typ), "", nil, nil)
		}()
	}
}

func TestStockReserve(t *testing.T) {
	t.Parallel()
	cfg := mustLoadYAML(t, `stock:
  reserve:
    - {account: "*", sku: "*", quantity: "1"}
    - {account: Ozon, sku: SHOE-*, quantity: "2.5"}
`)
	got := cfg.Stock.Reserves()
	if len(got) != 2 || got[0].Account != stock.AnyAccount || got[0].SKU != "*" || !got[0].Quantity.Equal(decimal.NewFromInt(1)) ||
		got[1].Account != stock.Ozon || got[1].SKU != "SHOE-*" || got[1].Quantity.String() != "2.5" {
		t.Fatalf("Reserves() = %+v", got)
	}
	if q := got.For(stock.Ozon, "SHOE-42"); q.String() != "2.5" {
		t.Errorf("For(ozon, SHOE-42) = %s, want 2.5", q)
	}
	if r := mustLoadYAML(t, "stock:\n  reserve: []\n").Stock; r.Reserve != nil || r.Reserves() != nil {
		t.Errorf("empty reserve: %+v", r.Reserve)
	}
	// From the environment, a JSON list.
	cfg = mustLoadYAML(t, "", `ORDERSYNC_STOCK__RESERVE=[{"account":"wildberries","sku":"A?","quantity":"3"}]`)
	if got := cfg.Stock.Reserves(); len(got) != 1 || got[0].Account != stock.Wildberries || got[0].Quantity.String() != "3" {
		t.Errorf("from the environment: %+v", got)
	}
}

func TestStockReserveProblemsNameTheKey(t *testing.T) {
	t.Parallel()
	_, err := loadYAML(t, `stock:
  reserve:
    - {account: ozon, sku: A, quantity: "1"}
    - {account: amazon, sku: "[", quantity: "-1"}
    - {sku: "", quantity: "lots"}
    - {account: "*", sku: B}
    - {account: "*", sku: C, quantity: "1", qty: 2}
`)
	wantProblem(t, err, "stock.reserve[1].account", "must be one of", "amazon")
	wantProblem(t, err, "stock.reserve[1].sku", "not a valid pattern", `"["`)
	wantProblem(t, err, "stock.reserve[1].quantity", "at least 0", "-1")
	wantProblem(t, err, "stock.reserve[2].account", "is required")
	wantProblem(t, err, "stock.reserve[2].sku", "is required")
	wantProblem(t, err, "stock.reserve[2].quantity", "must be a number", "lots")
	wantProblem(t, err, "stock.reserve[3].quantity", "is required")
	wantProblem(t, err, "stock.reserve[4].qty")
	for _, p := range problemsOf(t, err) {
		if strings.HasPrefix(p.Key, "stock.reserve[0]") {
			t.Errorf("a valid entry has a problem: %v", p)
		}
	}
}

func TestStockRefreshAfterOrder(t *testing.T) {
	t.Parallel()
	if cfg := mustLoadYAML(t, "stock:\n  refresh_after_order: 30s\n"); cfg.Stock.RefreshAfterOrder != 30*time.Second {
		t.Errorf("refresh_after_order = %s, want 30s", cfg.Stock.RefreshAfterOrder)
	}
	if cfg := mustLoadYAML(t, "stock:\n  refresh_after_order: 0s\n"); cfg.Stock.RefreshAfterOrder != 0 {
		t.Errorf("refresh_after_order = %s, want 0 (disabled)", cfg.Stock.RefreshAfterOrder)
	}
	for _, bad := range []string{"-1s", "1s", "500ms"} {
		_, err := loadYAML(t, "stock:\n  refresh_after_order: "+bad+"\n")
		wantProblem(t, err, "stock.refresh_after_order", "at least 2s")
	}
}
