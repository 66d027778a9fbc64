package odata

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/ordersync/ordersync/internal/onec"
	"github.com/ordersync/ordersync/internal/sim/odatasim"
)

// startSim starts the simulator with send's credentials.
func startSim(t *testing.T, opts odatasim.Options) *odatasim.Server {
	t.Helper()
	opts.Username, opts.Password = "odata", "s3cret"
	s := odatasim.New(opts)
	if err := s.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

// send is one request to the simulator, its answer read whole.
func send(t *testing.T, method, url string, body []byte) (int, []byte) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	req.SetBasicAuth("odata", "s3cret")
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, b
}

// The request shapes against the OData stand-in built from 1C's documentation: a
// find by marker, a create, its read-back compared (the comment cut), the post,
// and a repeated create with the same Ref_Key refused as "key exists".
func TestShapesAgainstTheSimulator(t *testing.T) {
	s := startSim(t, odatasim.Options{KeepRefKey: true, MaxLength: map[string]int{"Комментарий": 12}})
	p, u, want := Profiles["ut11"], NewURLs(s.URL()+"/"), order(t)

	find, err := u.FindByMarker(p, want.Marker)
	if err != nil {
		t.Fatal(err)
	}
	if st, b := send(t, http.MethodGet, find, nil); st != 200 || !strings.Contains(string(b), `"value":[]`) {
		t.Fatalf("find before create: %d %s", st, b)
	}
	body, err := p.Body(want)
	if err != nil {
		t.Fatal(err)
	}
	st, b := send(t, http.MethodPost, u.Create(p.Document), body)
	if st != http.StatusCreated {
		t.Fatalf("create: %d %s", st, b)
	}
	created, err := p.Parse(b)
	if err != nil {
		t.Fatal(err)
	}
	st, b = send(t, http.MethodGet, u.Read(p.Document, created.Ref), nil)
	if st != 200 {
		t.Fatalf("read back: %d %s", st, b)
	}
	got, err := p.Parse(b)
	if err != nil {
		t.Fatal(err)
	}
	diffs := p.Compare(want, got)
	if got.Ref != want.Ref || len(diffs) != 1 || diffs[0].Field != "Комментарий" || diffs[0].Got != "Kaspi order " {
		t.Fatalf("read back %s with differences %v; want the deterministic ref and only the comment cut", got.Ref, diffs)
	}
	if st, b := send(t, http.MethodPost, u.Post(p.Document, got.Ref), nil); st != 200 {
		t.Fatalf("post: %d %s", st, b)
	}
	if st, b := send(t, http.MethodGet, find, nil); st != 200 || !strings.Contains(string(b), want.Ref) {
		t.Fatalf("find after create: %d %s", st, b)
	}
	st, b = send(t, http.MethodPost, u.Create(p.Document), body)
	if e := ParseError("create", p.Document, st, b, true); !KeyExists(e) {
		t.Fatalf("a repeated create: %d %s; want key exists", st, b)
	}
	if n := s.CountMarker(want.Marker); n != 1 || !s.Orders()[0]["Posted"].(bool) {
		t.Fatalf("1C holds %d orders with the marker (posted: %v), want 1 posted", n, s.Orders()[0]["Posted"])
	}
}

// A cancel is a whole-part PATCH built from a fresh read: every row kept, each
// marked cancelled with the reason.
func TestCancelAgainstTheSimulator(t *testing.T) {
	s := startSim(t, odatasim.Options{})
	p, u := Profiles["ut11"], NewURLs(s.URL())
	body, err := p.Body(order(t))
	if err != nil {
		t.Fatal(err)
	}
	st, b := send(t, http.MethodPost, u.Create(p.Document), body)
	if st != http.StatusCreated {
		t.Fatalf("create: %d %s", st, b)
	}
	created, err := p.Parse(b)
	if err != nil {
		t.Fatal(err)
	}
	_, fresh := send(t, http.MethodGet, u.Read(p.Document, created.Ref), nil)
	const reason = "6f1c2a10-0000-4000-8000-0000000000c1"
	patch, err := p.CancelBody(fresh, reason, "")
	if err != nil {
		t.Fatal(err)
	}
	if st, b := send(t, http.MethodPatch, u.Read(p.Document, created.Ref), patch); st != 200 {
		t.Fatalf("patch: %d %s", st, b)
	}
	rows, _ := s.Orders()[0]["Товары"].([]any)
	if len(rows) != 2 {
		t.Fatalf("after the cancel 1C holds %d rows, want both", len(rows))
	}
	for i, r := range rows {
		row := r.(map[string]any)
		if row["Отменено"] != true || row["ПричинаОтмены_Key"] != reason || row["Номенклатура_Key"] == nil || row["LineNumber"] != fmt.Sprint(i+1) {
			t.Fatalf("row %d after the cancel: %v", i+1, row)
		}
	}
	if _, err := Profiles["unf"].CancelBody(fresh, "", ""); err == nil || !strings.Contains(err.Error(), "cancelled_state") {
		t.Fatalf("unf without a cancelled state: %v", err)
	}
	if b, err := Profiles["unf"].CancelBody(fresh, "", "6f1c2a10-0000-4000-8000-0000000000d1"); err != nil ||
		string(b) != `{"СостояниеЗаказа_Key":"6f1c2a10-0000-4000-8000-0000000000d1"}` {
		t.Fatalf("unf cancel body %s %v", b, err)
	}
}

// Items are matched by the configured field, once per SKU; an unknown SKU and one
// that names two items are configuration errors naming the SKU.
func TestItemsAgainstTheSimulator(t *testing.T) {
	s := startSim(t, odatasim.Options{})
	ref := s.AddItem("ART-1", "Чайник")
	s.AddItem("ART-2", "Кружка")
	s.AddItem("ART-2", "Кружка, дубль")
	u := NewURLs(s.URL())
	lookups := 0
	items := &Items{Field: "Артикул", Lookup: func(ctx context.Context, sku string) ([]string, error) {
		lookups++
		q, err := u.ItemQuery("Артикул", sku)
		if err != nil {
			return nil, err
		}
		st, b := send(t, http.MethodGet, q, nil)
		if st != 200 {
			return nil, ParseError("items", ItemsSet, st, b, false)
		}
		var page struct {
			Value []struct {
				Ref string `json:"Ref_Key"`
			} `json:"value"`
		}
		if err := json.Unmarshal(b, &page); err != nil {
			return nil, err
		}
		var refs []string
		for _, v := range page.Value {
			refs = append(refs, v.Ref)
		}
		return refs, nil
	}}
	ctx := context.Background()
	for range 3 {
		if got, err := items.Match(ctx, []string{"ART-1", "ART-1"}); err != nil || got[0] != ref || got[1] != ref {
			t.Fatalf("ART-1: %s %v, want %s", got, err, ref)
		}
	}
	if lookups != 1 {
		t.Fatalf("%d lookups for one SKU asked three times, want 1", lookups)
	}
	for sku, want := range map[string]string{"ART-9": `no item of Catalog_Номенклатура has Артикул "ART-9"`,
		"ART-2": `several items of Catalog_Номенклатура have Артикул "ART-2"`} {
		_, err := items.Match(ctx, []string{"ART-1", sku})
		if onec.ClassOf(err) != onec.Configuration || onec.UnmatchedOf(err) == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("%s: %v, want a configuration error %q", sku, err, want)
		}
	}
	// Both at once: one error naming each.
	_, err := items.Match(ctx, []string{"ART-9", "ART-2", "ART-9"})
	if u := onec.UnmatchedOf(err); u == nil || len(u.Missing) != 1 || len(u.Several) != 1 {
		t.Fatalf("two unmatched SKUs: %v, want one error naming ART-9 missing and ART-2 several", err)
	}
}
