package odatasim

import (
	"bufio"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
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
	esc := func(v string) string { return strings.ReplaceAll(url.QueryEscape(v), "+", "%20") }
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
