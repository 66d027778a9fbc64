package odatasim

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ordersync/ordersync/internal/eventually"
	"github.com/ordersync/ordersync/internal/sim"
)

func start(t *testing.T, opts Options) *Server {
	t.Helper()
	opts.Username, opts.Password = "odata", "пароль"
	s := New(opts)
	if err := s.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

type reply struct {
	status int
	header http.Header
	body   map[string]any
	raw    string
}

// call sends a raw request: path below the root, as written (the test encodes it).
func call(t *testing.T, s *Server, method, path, body string) reply {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, s.URL()+"/"+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	req.SetBasicAuth("odata", "пароль")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	r := reply{status: resp.StatusCode, header: resp.Header, raw: string(b)}
	_ = json.Unmarshal(b, &r.body)
	return r
}

// esc escapes a query value with spaces as %20, as 1C reads a '+' as a plus.
func esc(v string) string { return strings.ReplaceAll(url.QueryEscape(v), "+", "%20") }

// values is a listing's value array.
func values(t *testing.T, r reply) []map[string]any {
	t.Helper()
	v, ok := r.body["value"].([]any)
	if r.status != http.StatusOK || !ok {
		t.Fatalf("listing: %d %s", r.status, r.raw)
	}
	out := make([]map[string]any, len(v))
	for i, e := range v {
		out[i] = e.(map[string]any)
	}
	return out
}

func odataCode(r reply) string {
	e, _ := r.body["odata.error"].(map[string]any)
	c, _ := e["code"].(string)
	return c
}

var orders = url.PathEscape(Orders)

const order1 = `{"Date":"2026-12-01T10:00:00","НомерПоДаннымКлиента":"kaspi:1","Комментарий":"Заказ покупателя Иванова",
"Неизвестное":"x","Товары":[{"LineNumber":"1","Номенклатура_Key":"6f1c2a10-0000-4000-8000-0000000000a1","Количество":2,"Цена":10,"Сумма":20}]}`

func TestCreateAnswers201WithRawUTF8LocationAndCutsSilently(t *testing.T) {
	s := start(t, Options{MaxLength: map[string]int{"Комментарий": 10}})
	r := call(t, s, http.MethodPost, orders+"?$format=json", order1)
	if r.status != http.StatusCreated {
		t.Fatalf("create: %d %s", r.status, r.raw)
	}
	loc := r.header.Get("Location")
	if !strings.Contains(loc, "/"+Orders+"(guid'") || !strings.Contains(loc, r.body["Ref_Key"].(string)) {
		t.Fatalf("Location %q: want the raw UTF-8 URL of the new order", loc)
	}
	if r.body["Комментарий"] != "Заказ поку" || r.body["Неизвестное"] != nil || r.body["Number"] != "КА-000001" {
		t.Fatalf("created %v: want the comment cut to 10, the unknown field dropped, a number", r.body)
	}
	if s.CountMarker("kaspi:1") != 1 {
		t.Fatal("the order is not held once")
	}
}

func TestRowsNeedContiguousLineNumbersFromOne(t *testing.T) {
	s := start(t, Options{})
	gap := strings.Replace(order1, `"LineNumber":"1"`, `"LineNumber":"2"`, 1)
	if r := call(t, s, http.MethodPost, orders, gap); r.status != http.StatusBadRequest {
		t.Fatalf("rows from 2: %d %s, want 400", r.status, r.raw)
	}
	none := strings.Replace(order1, `"LineNumber":"1",`, ``, 1)
	if r := call(t, s, http.MethodPost, orders, none); r.status != http.StatusInternalServerError {
		t.Fatalf("a row without LineNumber: %d %s, want 500", r.status, r.raw)
	}
	if r := call(t, s, http.MethodPost, orders, `{"Date":`); r.status != http.StatusInternalServerError || odataCode(r) != "-1" {
		t.Fatalf("malformed JSON: %d %s, want 500 code -1", r.status, r.raw)
	}
	if n := len(s.Orders()); n != 0 {
		t.Fatalf("%d orders created by refused requests", n)
	}
}

func TestRefKeyKeptOrIgnored(t *testing.T) {
	const ref = "e6de86b7-39a5-5ad4-a8d8-10b204bd5806"
	body := strings.Replace(order1, `{"Date"`, `{"Ref_Key":"`+ref+`","Date"`, 1)
	keep := start(t, Options{KeepRefKey: true})
	if r := call(t, keep, http.MethodPost, orders, body); r.status != 201 || r.body["Ref_Key"] != ref {
		t.Fatalf("kept: %d %v", r.status, r.body["Ref_Key"])
	}
	if r := call(t, keep, http.MethodPost, orders, body); r.status != 400 || odataCode(r) != "15" {
		t.Fatalf("again: %d %s, want 400 code 15", r.status, r.raw)
	}
	ignore := start(t, Options{})
	for range 2 {
		if r := call(t, ignore, http.MethodPost, orders, body); r.status != 201 || r.body["Ref_Key"] == ref {
			t.Fatalf("ignored: %d %v", r.status, r.body["Ref_Key"])
		}
	}
	if keep.CountMarker("kaspi:1") != 1 || ignore.CountMarker("kaspi:1") != 2 {
		t.Fatalf("held %d and %d, want 1 where the key is kept and 2 where it is not",
			keep.CountMarker("kaspi:1"), ignore.CountMarker("kaspi:1"))
	}
}

func TestFilterQuotesPlusAndLongQueries(t *testing.T) {
	s := start(t, Options{})
	body := strings.Replace(order1, `"kaspi:1"`, `"site:O'Brien 1+1"`, 1)
	if r := call(t, s, http.MethodPost, orders, body); r.status != 201 {
		t.Fatal(r.raw)
	}
	find := func(q string) reply {
		return call(t, s, http.MethodGet, orders+"?$format=json&$filter="+q, "")
	}
	if r := find(esc(Marker + " eq 'site:O''Brien 1+1'")); r.status != 200 || len(r.body["value"].([]any)) != 1 {
		t.Fatalf("found %d %s, want the order", r.status, r.raw)
	}
	// A '+' for a space is a plus to 1C: nothing matches.
	if r := find(strings.ReplaceAll(esc(Marker+" eq 'site:O''Brien 1+1'"), "%20", "+")); r.status == 200 && len(r.body["value"].([]any)) != 0 {
		t.Fatalf("spaces sent as '+' found %s", r.raw)
	}
	if r := find(esc(Marker + " in ('a')")); r.status != 400 || odataCode(r) != "14" {
		t.Fatalf("in: %d %s, want 400 code 14", r.status, r.raw)
	}
	long := find(esc(Marker + " eq '" + strings.Repeat("я", 400) + "'"))
	if long.status != 404 || !strings.Contains(long.raw, "<title>404") {
		t.Fatalf("a long query: %d %s, want the web server's HTML 404", long.status, long.raw)
	}
}

func TestPostNeedsAnEmptyBodySaid(t *testing.T) {
	s := start(t, Options{})
	r := call(t, s, http.MethodPost, orders, order1)
	ref := r.body["Ref_Key"].(string)
	post := orders + "(guid'" + ref + "')/Post?PostingModeOperational=false"
	// A request line and headers without Content-Length, as a client that leaves an
	// empty body unsaid sends it (Go's client always says it).
	u, _ := url.Parse(s.URL() + "/" + post)
	conn, err := net.Dial("tcp", u.Host)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: %s\r\nAuthorization: Basic %s\r\nConnection: close\r\n\r\n",
		u.RequestURI(), u.Host, base64.StdEncoding.EncodeToString([]byte("odata:пароль")))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusLengthRequired {
		t.Fatalf("post without Content-Length: %d, want 411", resp.StatusCode)
	}
	if r := call(t, s, http.MethodPost, post, ""); r.status != 200 {
		t.Fatalf("post: %d %s", r.status, r.raw)
	}
	if got := call(t, s, http.MethodGet, orders+"(guid'"+ref+"')?$format=json", ""); got.body["Posted"] != true {
		t.Fatalf("read after post: %v", got.body)
	}
	if r := call(t, s, http.MethodGet, orders+"(guid'"+strings.Repeat("0", 8)+"-0000-0000-0000-000000000000')", ""); r.status != 404 || odataCode(r) != "9" {
		t.Fatalf("missing: %d %s, want 404 code 9", r.status, r.raw)
	}
}

func TestFaults(t *testing.T) {
	s := start(t, Options{})
	s.Faults.Add(1, sim.Fault{Op: "post", Status: 500, Body: `{"odata.error":{"code":"-1","message":{"lang":"ru","value":"Не удалось провести"}}}`})
	s.Faults.Add(1, sim.Fault{Op: "create", Kind: DropAfterCreate})
	req, _ := http.NewRequest(http.MethodPost, s.URL()+"/"+orders, strings.NewReader(order1))
	req.SetBasicAuth("odata", "пароль")
	if resp, err := http.DefaultClient.Do(req); err == nil {
		resp.Body.Close()
		t.Fatalf("drop after create answered %d", resp.StatusCode)
	}
	if s.CountMarker("kaspi:1") != 1 {
		t.Fatal("the dropped create is not committed")
	}
	ref := s.Orders()[0]["Ref_Key"].(string)
	if r := call(t, s, http.MethodPost, orders+"(guid'"+ref+"')/Post?PostingModeOperational=false", ""); r.status != 500 || odataCode(r) != "-1" {
		t.Fatalf("post fault: %d %s", r.status, r.raw)
	}
	s.Faults.Add(1, sim.Fault{Op: "create", Kind: SlowCreate, Delay: 300 * time.Millisecond})
	client := &http.Client{Timeout: 50 * time.Millisecond}
	req, _ = http.NewRequest(http.MethodPost, s.URL()+"/"+orders, strings.NewReader(strings.Replace(order1, "kaspi:1", "kaspi:2", 1)))
	req.SetBasicAuth("odata", "пароль")
	if resp, err := client.Do(req); err == nil {
		resp.Body.Close()
		t.Fatal("a slow create answered within the client's timeout")
	}
	eventually.True(t, "the slow create committed after the client gave up", func() bool { return s.CountMarker("kaspi:2") == 1 })
	if err := s.Faults.Check(1, sim.Fault{Op: "cancel", Status: 500}); err == nil {
		t.Fatal("a fault of an operation the simulator has not was accepted")
	}
}

const unfOrder = `{"Date":"2026-12-01T10:00:00","Комментарий":"kaspi:7","НомерПоДаннымКлиента":"ut11 only",
"ВидОперации":"ЗаказНаПродажу","СостояниеЗаказа_Key":"6f1c2a10-0000-4000-8000-0000000000d1",
"Запасы":[{"LineNumber":"1","Номенклатура_Key":"6f1c2a10-0000-4000-8000-0000000000a1","Количество":2,"Цена":10,"Сумма":20,"Отменено":true}]}`

func TestProfiles(t *testing.T) {
	unf := start(t, Options{Profile: "unf"})
	if unf.OrderSet() != UNFOrders || unf.RowsPart() != UNFRows || unf.MarkerField() != UNFMarker {
		t.Fatalf("unf serves %s/%s marked by %s", unf.OrderSet(), unf.RowsPart(), unf.MarkerField())
	}
	r := call(t, unf, http.MethodPost, url.PathEscape(UNFOrders)+"?$format=json", unfOrder)
	if r.status != http.StatusCreated {
		t.Fatalf("unf create: %d %s", r.status, r.raw)
	}
	row := r.body[UNFRows].([]any)[0].(map[string]any)
	if r.body["НомерПоДаннымКлиента"] != nil || r.body["Склад_Key"] != nil || row["Отменено"] != nil ||
		r.body["Договор_Key"] != zeroRef || r.body["ВидОперации"] != "ЗаказНаПродажу" || row["Цена"] != 10.0 {
		t.Fatalf("unf order %v: want УНФ's fields only, the unwritten empty", r.body)
	}
	if unf.CountMarker("kaspi:7") != 1 || len(unf.Orders()) != 1 {
		t.Fatalf("unf holds %d orders marked kaspi:7 in Комментарий, want 1", unf.CountMarker("kaspi:7"))
	}
	if r := call(t, unf, http.MethodGet, orders, ""); r.status != 400 || odataCode(r) != "8" {
		t.Fatalf("УТ's order set in УНФ: %d %s, want 400 code 8", r.status, r.raw)
	}

	ut := start(t, Options{Marker: "Комментарий"})
	r = call(t, ut, http.MethodPost, orders, order1)
	if r.status != 201 || r.body["Партнер_Key"] != zeroRef || r.body["Статус"] != "" || r.body["Posted"] != false {
		t.Fatalf("ut11 create: %d %v; want every field, the unwritten empty", r.status, r.body)
	}
	if ut.CountMarker("Заказ покупателя Иванова") != 1 || ut.CountMarker("kaspi:1") != 0 {
		t.Fatal("Options.Marker does not name the field CountMarker counts by")
	}
	if !slices.Contains(ut.Catalogs(), Agreements) || slices.Contains(unf.Catalogs(), Agreements) ||
		!slices.Contains(unf.Catalogs(), Contracts) {
		t.Fatalf("catalogs: ut11 %v, unf %v", ut.Catalogs(), unf.Catalogs())
	}
}

func TestPatchUnpostAndValues(t *testing.T) {
	s := start(t, Options{})
	r := call(t, s, http.MethodPost, orders, strings.Replace(order1, `"Date":"2026-12-01T10:00:00"`,
		`"Date":"2026-12-01T10:00:00Z","СуммаДокумента":"двадцать","Контрагент_Key":"6f1c2a10-0000-4000-8000-00000000ffff"`, 1))
	if r.status != 201 || r.body["Date"] != "2026-12-01T10:00:00" || r.body["СуммаДокумента"] != 0.0 ||
		r.body["Контрагент_Key"] != "6f1c2a10-0000-4000-8000-00000000ffff" || r.body["DataVersion"] != "AAAAAAAAAAE=" {
		t.Fatalf("create %d %v: want the zone dropped, a string in a number left 0, a broken ref kept", r.status, r.body)
	}
	ref := r.body["Ref_Key"].(string)
	for _, bad := range []string{`{"Контрагент_Key":"Иванов"}`, `{"DeletionMark":"нет"}`, `{"Date":"1 декабря"}`} {
		if r := call(t, s, http.MethodPatch, orders+"(guid'"+ref+"')", bad); r.status != 400 || odataCode(r) != "1" {
			t.Fatalf("patch %s: %d %s, want 400 code 1", bad, r.status, r.raw)
		}
	}
	r = call(t, s, http.MethodPatch, orders+"(guid'"+ref+"')?$format=json", `{"Комментарий":"другой","Ref_Key":"`+zeroRef+`","Number":"X"}`)
	if r.status != 200 || r.body["Комментарий"] != "другой" || r.body["Ref_Key"] != ref || r.body["Number"] != "КА-000001" ||
		r.body["DataVersion"] != "AAAAAAAAAAI=" {
		t.Fatalf("patch: %d %v; want the comment written, the key and number kept, the version grown", r.status, r.body)
	}
	post := orders + "(guid'" + ref + "')/"
	if r := call(t, s, http.MethodPost, post+"Post", ""); r.status != 400 || odataCode(r) != "12" {
		t.Fatalf("post without its mode: %d %s, want 400 code 12", r.status, r.raw)
	}
	if r := call(t, s, http.MethodPost, post+"Post()?PostingModeOperational=true", ""); r.status != 200 || !s.Posted(ref) {
		t.Fatalf("post(): %d %s", r.status, r.raw)
	}
	if r := call(t, s, http.MethodPost, post+"Unpost", ""); r.status != 200 || s.Posted(ref) {
		t.Fatalf("unpost: %d %s", r.status, r.raw)
	}
	if r := call(t, s, http.MethodPost, post+"Провести", ""); r.status != 400 || odataCode(r) != "6" {
		t.Fatalf("an unknown function: %d %s, want 400 code 6", r.status, r.raw)
	}
	if d, ok := s.Order(ref); !ok || d["DataVersion"] != "AAAAAAAAAAQ=" {
		t.Fatalf("order after a patch, a post and an unpost: %v %v", d, ok)
	}
	if _, ok := s.Order(zeroRef); ok || s.Posted(zeroRef) {
		t.Fatal("a missing order is found")
	}
	if r := call(t, s, http.MethodPost, orders, `{"Товары":[{"LineNumber":"1","Отменено":"да"}]}`); r.status != 400 || len(s.Orders()) != 1 {
		t.Fatalf("a row's boolean given a string: %d %s, want 400 and nothing created", r.status, r.raw)
	}
}

func TestDeleteRemovesTheObject(t *testing.T) {
	s := start(t, Options{})
	ref := call(t, s, http.MethodPost, orders, order1).body["Ref_Key"].(string)
	item := s.AddItem("ART-1", "Чайник")
	for _, p := range []string{orders + "(guid'" + ref + "')", url.PathEscape(Items) + "(guid'" + item + "')"} {
		if r := call(t, s, http.MethodDelete, p, ""); r.status != http.StatusNoContent {
			t.Fatalf("delete %s: %d %s", p, r.status, r.raw)
		}
		if r := call(t, s, http.MethodGet, p, ""); r.status != 404 || odataCode(r) != "9" {
			t.Fatalf("read after delete: %d %s, want 404 code 9", r.status, r.raw)
		}
		if r := call(t, s, http.MethodDelete, p, ""); r.status != 404 || odataCode(r) != "9" {
			t.Fatalf("delete again: %d %s, want 404 code 9", r.status, r.raw)
		}
	}
	if s.Deletes() != 2 || s.CountMarker("kaspi:1") != 0 || len(s.Orders()) != 0 {
		t.Fatalf("%d deleted, %d orders left; want both gone, no deletion mark", s.Deletes(), len(s.Orders()))
	}
}

func TestCreateFaultsCommit(t *testing.T) {
	s := start(t, Options{})
	s.Faults.Add(1, sim.Fault{Op: "create", Kind: MangledLocation})
	r := call(t, s, http.MethodPost, orders, order1)
	loc := r.header.Get("Location")
	if r.status != http.StatusCreated || json.Valid([]byte(r.raw)) || s.CountMarker("kaspi:1") != 1 {
		t.Fatalf("mangled location: %d %q; want 201, a body cut short and the order committed", r.status, r.raw)
	}
	want := s.URL() + "/" + Orders + "(guid'" + s.Orders()[0]["Ref_Key"].(string) + "')"
	if loc != Latin1Mojibake(want) || strings.Contains(loc, "ЗаказКлиента") || !strings.Contains(loc, "Ð") {
		t.Fatalf("Location %q: want %q read as latin-1", loc, want)
	}

	s.Faults.Add(1, sim.Fault{Op: "create", Kind: GatewayAfterCreate})
	r = call(t, s, http.MethodPost, orders, strings.Replace(order1, "kaspi:1", "kaspi:2", 1))
	if r.status != http.StatusBadGateway || !strings.Contains(r.header.Get("Content-Type"), "text/html") ||
		!strings.Contains(r.raw, "502 Bad Gateway") || s.CountMarker("kaspi:2") != 1 {
		t.Fatalf("gateway after create: %d %s; want the proxy's 502 page and the order committed", r.status, r.raw)
	}

	// A fault narrowed to one marker lets the others through.
	s.Faults.Add(1, sim.Fault{Op: "create", ExternalID: "kaspi:4", Status: 503})
	if r := call(t, s, http.MethodPost, orders, strings.Replace(order1, "kaspi:1", "kaspi:3", 1)); r.status != 201 {
		t.Fatalf("another marker's create: %d", r.status)
	}
	if r := call(t, s, http.MethodPost, orders, strings.Replace(order1, "kaspi:1", "kaspi:4", 1)); r.status != 503 || s.CountMarker("kaspi:4") != 0 {
		t.Fatalf("the marker's create: %d, held %d", r.status, s.CountMarker("kaspi:4"))
	}
	if s.Creates() != 3 {
		t.Fatalf("%d creates reached 1C, want 3 (the refused one did not)", s.Creates())
	}
	for _, bad := range []sim.Fault{{Op: "post", Kind: MangledLocation}, {Op: "create", Kind: GatewayAfterCreate, Status: 502},
		{Op: "stock", ExternalID: "x", Status: 500}, {Op: "read", Status: 503, RetryAfter: time.Second}, {Op: "create", Kind: sim.Malformed}} {
		if err := s.Faults.Check(1, bad); err == nil {
			t.Fatalf("%+v was accepted", bad)
		}
	}
}

func TestPostFaultClearsAfterItsAttempts(t *testing.T) {
	s := start(t, Options{})
	ref := call(t, s, http.MethodPost, orders, order1).body["Ref_Key"].(string)
	const refused = `{"odata.error":{"code":"-1","message":{"lang":"ru","value":"Не удалось провести \"Заказ клиента\""}}}`
	s.Faults.Add(2, sim.Fault{Op: "post", Status: 500, Body: refused})
	post := orders + "(guid'" + ref + "')/Post?PostingModeOperational=false"
	for i := range 2 {
		r := call(t, s, http.MethodPost, post, "")
		if r.status != 500 || r.raw != refused || s.Posted(ref) {
			t.Fatalf("attempt %d: %d %s, want 1C's error and the order not posted", i+1, r.status, r.raw)
		}
	}
	if r := call(t, s, http.MethodPost, post, ""); r.status != 200 || !s.Posted(ref) || s.Faults.Pending() != 0 {
		t.Fatalf("third attempt: %d %s posted %v, %d faults left; want posted, none left", r.status, r.raw, s.Posted(ref), s.Faults.Pending())
	}
}

// TestLatencyIsPerRequestAndCounted: every request waits out the latency on its
// own, side by side with the others (a serialised wait would never hold them all
// at once), and each is counted once by its operation.
func TestLatencyIsPerRequestAndCounted(t *testing.T) {
	const n = 8
	s := start(t, Options{Latency: time.Hour})
	base := s.URL() + "/" + s.OrderSet()
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{}, n)
	for i := range n {
		go func() {
			defer func() { done <- struct{}{} }()
			u := base + "?$format=json"
			if i%2 == 1 {
				u = base + "(guid'" + newRef() + "')?$format=json"
			}
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
			req.SetBasicAuth("odata", "пароль")
			if resp, err := http.DefaultClient.Do(req); err == nil {
				resp.Body.Close()
			}
		}()
	}
	eventually.True(t, "every request waiting at once", func() bool { return s.Waiting() == n })
	cancel()
	for range n {
		<-done
	}
	eventually.True(t, "the waits over", func() bool { return s.Waiting() == 0 })

	s2 := start(t, Options{})
	call(t, s2, http.MethodGet, s2.OrderSet()+"?$format=json", "")
	call(t, s2, http.MethodGet, url.PathEscape(Items)+"?$format=json", "")
	call(t, s2, http.MethodGet, s2.OrderSet()+"(guid'"+newRef()+"')?$format=json", "")
	call(t, s2, http.MethodGet, "$metadata", "")
	call(t, s2, http.MethodGet, "nowhere", "")
	got := s2.Requests()
	want := map[string]int{"find": 1, "list": 1, "read": 1, "metadata": 1, "other": 1}
	if !maps.Equal(got, want) {
		t.Fatalf("Requests() = %v, want %v", got, want)
	}
}
