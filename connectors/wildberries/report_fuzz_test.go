package wildberries

import (
	"context"
	"encoding/json"
	"testing"
)

// Every realization report row is refused with a reason or becomes a line whose
// amount is the exact sum of its parts, of a known kind, that the stores accept.
func FuzzReportRow(f *testing.F) {
	r, err := NewReport(ReportConfig{BaseURL: "http://wb.invalid", Token: "t", Limiter: noWait{}})
	if err != nil {
		f.Fatal(err)
	}
	f.Add([]byte(`{"rrd_id":5,"doc_type_name":"Продажа","supplier_oper_name":"Продажа","retail_amount":100,"ppvz_for_pay":80,"delivery_rub":12.5,"penalty":0,"assembly_id":9,"srid":"s1","rr_dt":"2026-09-02","currency_name":"руб","quantity":1}`))
	f.Add([]byte(`{"rrd_id":6,"doc_type_name":"Возврат","supplier_oper_name":"Возврат","retail_amount":100,"ppvz_for_pay":80,"assembly_id":9,"rr_dt":"2026-09-03T10:00:00","currency_name":"руб"}`))
	f.Add([]byte(`{"rrd_id":7,"doc_type_name":"","supplier_oper_name":"Хранение","storage_fee":311.05,"rr_dt":"2026-09-30","currency_name":"KZT"}`))
	f.Add([]byte(`{"rrd_id":"x","retail_amount":"1e400"}`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		if !json.Valid(raw) {
			return // a line is one element of a page that decoded: valid JSON on its own
		}
		l, _, err := r.line(raw)
		if err != nil {
			if err.Error() == "" {
				t.Fatal("a refusal without a reason")
			}
			return
		}
		if verr := l.Validate(); verr != nil {
			t.Fatalf("a line the connector built does not validate: %v (%s)", verr, raw)
		}
		if len(l.Raw) > 0 && !json.Valid(l.Raw) {
			t.Fatalf("the line keeps raw JSON that is not valid: %q", l.Raw)
		}
	})
}

type noWait struct{}

func (noWait) Wait(context.Context) error { return nil }
