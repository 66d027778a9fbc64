package odatasim

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/ordersync/ordersync/internal/sim"
)

var returns = url.PathEscape(Returns)

const return1 = `{"Date":"2026-12-04T10:00:00","НомерВходящегоДокумента":"kaspi:return:1","Комментарий":"брак",
"ДокументРеализации":"6f1c2a10-0000-4000-8000-0000000000aa","ДокументРеализации_Type":"StandardODATA.Document_ЗаказКлиента",
"СуммаДокумента":250,"Товары":[{"LineNumber":"1","Номенклатура_Key":"6f1c2a10-0000-4000-8000-000000000010","Количество":2,"Цена":125,"Сумма":250}]}`

// УТ's customer return is served as the order is: created with its own numbers,
// found by its marker, patched, posted, and counted apart from the orders; a
// fault narrowed to its marker applies to it alone.
func TestReturnsAreServedAsOrdersAre(t *testing.T) {
	s := start(t, Options{})
	if s.ReturnSet() != Returns || New(Options{Profile: "unf"}).ReturnSet() != "" {
		t.Fatalf("return set %q", s.ReturnSet())
	}
	s.Faults.Add(1, sim.Fault{Op: "create", ExternalID: "kaspi:return:1", Kind: DropAfterCreate})
	req, _ := http.NewRequest(http.MethodPost, s.URL()+"/"+returns+"?$format=json", strings.NewReader(return1))
	req.SetBasicAuth("odata", "пароль")
	if resp, err := http.DefaultClient.Do(req); err == nil {
		resp.Body.Close()
		t.Fatalf("drop after create answered %d", resp.StatusCode)
	}
	if n := s.CountReturns("kaspi:return:1"); n != 1 || len(s.Orders()) != 0 {
		t.Fatalf("%d returns with the marker, %d orders; want the dropped create committed once", n, len(s.Orders()))
	}
	found := call(t, s, http.MethodGet, returns+"?$format=json&$filter="+strings.ReplaceAll(url.QueryEscape("НомерВходящегоДокумента eq 'kaspi:return:1'"), "+", "%20"), "")
	list, _ := found.body["value"].([]any)
	if found.status != 200 || len(list) != 1 {
		t.Fatalf("find by marker: %d %s", found.status, found.raw)
	}
	d := list[0].(map[string]any)
	ref := d["Ref_Key"].(string)
	if d["Number"] != "ВК-000001" || d[ReturnBasis] != "6f1c2a10-0000-4000-8000-0000000000aa" || d[ReturnBasis+"_Type"] != "StandardODATA.Document_ЗаказКлиента" || d["Posted"] != false {
		t.Fatalf("return %v", d)
	}
	if r := call(t, s, http.MethodPatch, returns+"(guid'"+ref+"')?$format=json", `{"Комментарий":"брак, вскрыта упаковка"}`); r.status != 200 || r.body["Комментарий"] != "брак, вскрыта упаковка" {
		t.Fatalf("patch: %d %s", r.status, r.raw)
	}
	s.Faults.Add(1, sim.Fault{Op: "post", ExternalID: "kaspi:return:1", Status: 500})
	post := returns + "(guid'" + ref + "')/Post?PostingModeOperational=false"
	if r := call(t, s, http.MethodPost, post, ""); r.status != 500 {
		t.Fatalf("post with a fault queued: %d %s", r.status, r.raw)
	}
	if r := call(t, s, http.MethodPost, post, ""); r.status != 200 || s.Returns()[0]["Posted"] != true {
		t.Fatalf("post: %d %s", r.status, r.raw)
	}
	if s.CountMarker("kaspi:return:1") != 0 || s.Creates() != 1 {
		t.Fatalf("the return counted as an order, or %d creates", s.Creates())
	}
}
