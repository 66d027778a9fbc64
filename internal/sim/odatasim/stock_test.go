package odatasim

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
)

func TestStockBalance(t *testing.T) {
	s := start(t, Options{})
	main, spare := s.AddRef(Warehouses, "Основной"), s.AddRef(Warehouses, "Запасной")
	kettle, mug := s.AddItem("ART-1", "Чайник"), s.AddItem("ART-2", "Кружка")
	s.SetStock(main, kettle, "12.500")
	s.SetStock(main, mug, "3")
	s.SetStock(spare, kettle, "7")
	s.SetStock(spare, mug, "1")
	s.SetStock(spare, mug, "0") // off the balance

	register := url.PathEscape(Stock) + "/"
	balance := func(path string) []map[string]any { return values(t, call(t, s, http.MethodGet, register+path, "")) }
	cond := "Condition='Склад_Key eq guid''" + main + "'''"
	for name, path := range map[string]string{
		"raw":                 "Balance(" + strings.ReplaceAll(cond, " ", "%20") + ")?$format=json",
		"percent-encoded":     url.PathEscape("Balance("+cond+")") + "?$format=json",
		"quotes not doubled":  url.PathEscape("Balance(Condition='Склад_Key eq guid'"+main+"'')") + "?$format=json",
		"in the query":        "Balance?$format=json&Condition=" + esc("Склад_Key eq guid'"+main+"'"),
		"and a period, first": url.PathEscape("Balance(Period=datetime'2026-12-01T00:00:00'," + cond + ")"),
	} {
		rows := balance(path)
		if len(rows) != 2 || rows[0]["Склад_Key"] != main || rows[0]["Номенклатура_Key"] != kettle || rows[0][StockBalance] != 12.5 ||
			rows[1]["Номенклатура_Key"] != mug || rows[1][StockBalance] != 3.0 || len(rows[0]) != 3 {
			t.Fatalf("%s: %v; want the main warehouse's two balances", name, rows)
		}
	}
	if rows := balance("Balance()"); len(rows) != 3 {
		t.Fatalf("no condition: %v, want every warehouse's non-zero balances", rows)
	}
	rows := balance("Balance?$orderby=" + esc(StockBalance+" desc") + "&$skip=1&$top=1")
	if len(rows) != 1 || rows[0][StockBalance] != 7.0 {
		t.Fatalf("ordered by balance, the second: %v", rows)
	}
	item := url.PathEscape("Balance(Condition='Номенклатура_Key eq guid''" + kettle + "'' and Склад_Key ne guid''" + main + "''')")
	if rows := balance(item); len(rows) != 1 || rows[0]["Склад_Key"] != spare {
		t.Fatalf("the kettle elsewhere: %v", rows)
	}
	for path, code := range map[string]string{
		url.PathEscape("Balance(Condition='Цена gt 1')"): "14",
		"Turnovers()":                        "6",
		"Balance(Condition)":                 "14",
		"Balance(Condition=1)":               "21",
		url.PathEscape("Balance(Склад='x')"): "21",
	} {
		if r := call(t, s, http.MethodGet, register+path, ""); r.status != 400 || odataCode(r) != code {
			t.Errorf("%s: %d %s, want 400 code %s", path, r.status, r.raw, code)
		}
	}
	if r := call(t, start(t, Options{Profile: "unf"}), http.MethodGet, register+"Balance()", ""); r.status != 400 || odataCode(r) != "8" {
		t.Fatalf("УТ's register in УНФ: %d %s, want 400 code 8", r.status, r.raw)
	}
}
