package journal

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestStateOf(t *testing.T) {
	for _, c := range []struct {
		kind           string
		status, cancel Status
		want           State
	}{
		{"order.create", StatusDone, "", StateCreated},
		{"order.create", StatusPending, "", StatePending},
		{"order.create", StatusFailed, "", StateFailed},
		{"order.create", StatusDone, StatusDone, StateCancelled},
		{"order.create", StatusDone, StatusPending, StateCancelPending},
		{"order.create", StatusDone, StatusFailed, StateCancelFailed},
		{"order.create", StatusFailed, StatusDone, StateCancelled}, // a cancel before the create
		{"order.cancel", StatusDone, "", StateCancelled},
		{"order.cancel", StatusPending, "", StateCancelPending},
		{"order.cancel", StatusFailed, "", StateCancelFailed},
		{"stock.snapshot", StatusDone, "", StateDone},
		{"stock.snapshot", StatusFailed, "", StateFailed},
	} {
		if got := StateOf(c.kind, c.status, c.cancel); got != c.want {
			t.Errorf("StateOf(%s, %s, %q) = %s, want %s", c.kind, c.status, c.cancel, got, c.want)
		}
	}
}

func TestNeedlesOf(t *testing.T) {
	for term, want := range map[string]struct {
		text, digits, amount string
	}{
		"":                 {},
		"  ":               {},
		"ОС-000123":        {text: "ос-000123"},
		"51234410":         {text: "51234410", amount: "51234410"},
		"+7 701 234-56-78": {text: "+7 701 234-56-78", digits: "7012345678"},
		"3 000,20":         {text: "3 000,20", amount: "3000.2"},
		"1500.10":          {text: "1500.10", amount: "1500.1", digits: "150010"},
		"1e3":              {text: "1e3"},
		"-5":               {text: "-5"},
	} {
		n := NeedlesOf(term)
		amount := ""
		if n.Amount != nil {
			amount = n.Amount.String()
		}
		if n.Text != want.text || n.Digits != want.digits || amount != want.amount {
			t.Errorf("NeedlesOf(%q) = %q %q %q, want %+v", term, n.Text, n.Digits, amount, want)
		}
	}
}

func TestDeriveReadsTheOrder(t *testing.T) {
	p := json.RawMessage(`{"number":"A-1","created_at":"2026-09-30T23:58:00.1234567+06:00","currency":"KZT",
		"customer":{"name":"Жанна Ахметова","phone":"+7 701 234-56-78"},"lines":[{"quantity":2,"price":"1500.10"}]}`)
	d := Derive("site:order:A-1:create", "site", "A-1", p, &Result{Number: "ОС-1", Ref: "REF"})
	if d.OrderCreatedAt == nil || d.OrderCreatedAt.Format("2006-01-02T15:04:05.999999Z07:00") != "2026-09-30T17:58:00.123456Z" {
		t.Errorf("order date %v", d.OrderCreatedAt)
	}
	if d.Total == nil || d.Total.String() != "3000.2" || d.Currency != "KZT" {
		t.Errorf("total %v %s", d.Total, d.Currency)
	}
	if want := "site:order:a-1:create site:a-1 a-1   жанна ахметова 77012345678  ос-1 ref"; d.SearchText != want {
		t.Errorf("search text %q, want %q", d.SearchText, want)
	}
	// Amounts that do not read leave the texts.
	d = Derive("k", "s", "x", json.RawMessage(`{"number":"N","lines":[{"quantity":"x"}]}`), nil)
	if d.Total != nil || d.SearchText != "k s:x n     " {
		t.Errorf("a payload with a bad amount: %v %q", d.Total, d.SearchText)
	}
	// A return is found by its order's id.
	d = Derive("ozon:return:R-1:register", "ozon", "return:R-1", json.RawMessage(`{"id":"R-1","order_id":"0570-1"}`), nil)
	if !strings.HasSuffix(d.SearchText, " 0570-1") {
		t.Errorf("a return's search text %q lacks its order's id", d.SearchText)
	}
}

func TestDeriveReadsEscapedAndNumericTexts(t *testing.T) {
	d := Derive("k", "s", "x", json.RawMessage(`{"number":"A\"1\u0416","marketplace_id":512344101,"total":"99.50",
		"customer":{"name":"Tab\there"}}`), nil)
	if want := `k s:x a"1ж 512344101  tab	here  `; d.SearchText != want {
		t.Errorf("search text %q, want %q", d.SearchText, want)
	}
	if d.Total == nil || d.Total.String() != "99.5" {
		t.Errorf("total %v, want 99.5", d.Total)
	}
	// A total that does not read leaves no amount, even with lines that would.
	d = Derive("k", "s", "x", json.RawMessage(`{"total":"many","lines":[{"quantity":1,"price":"2"}]}`), nil)
	if d.Total != nil {
		t.Errorf("total %v from a payload whose total does not read", d.Total)
	}
}

// BenchmarkDerive is what every registration and verdict spends reading the list's
// columns off an order's payload.
func BenchmarkDerive(b *testing.B) {
	p := json.RawMessage(`{"source":"kaspi","external_id":"512344101","number":"512344101","created_at":"2026-09-30T23:58:00+06:00",
		"customer":{"name":"Жанна Ахметова","phone":"+77012345678"},"warehouse":"WH1","currency":"KZT",
		"lines":[{"sku":"SKU-8812","name":"Чайник","quantity":"2","price":"1500.10"},{"sku":"SKU-1","name":"Кружка","quantity":"1","price":"990"}],
		"total":"3990.20"}`)
	r := &Result{Number: "ОС-000123", Ref: "4f0c"}
	b.ReportAllocs()
	for b.Loop() {
		Derive("kaspi:order:512344101:create", "kaspi", "512344101", p, r)
	}
}
