package ozon

import (
	"encoding/json"
	"testing"
	"time"
)

const seedOperation = `{"operation_id":1,"operation_type":"OperationAgentDeliveredToCustomer","operation_date":"2026-09-02 00:00:00",` +
	`"operation_type_name":"Доставка покупателю","amount":1234.56,"accruals_for_sale":1500,"sale_commission":-225,` +
	`"posting":{"posting_number":"0101-1"},"items":[{"sku":555,"name":"Чайник"}],` +
	`"services":[{"name":"MarketplaceServiceItemDirectFlowLogistic","price":-30.44},{"name":"MarketplaceServiceItemFulfillment","price":-10}]}`

// Every operation Ozon may send is either refused with a reason or a line whose
// amount is the exact sum of its parts, of a known kind, that the stores accept.
func FuzzFinanceOperation(f *testing.F) {
	fin := fuzzConnector(f).Finance(FinanceOptions{Location: time.UTC})
	f.Add([]byte(seedOperation))
	f.Add([]byte(`{"operation_id":4,"operation_type":"ClientReturnAgentOperation","operation_date":"2026-09-10 00:00:00","amount":-900.01,"accruals_for_sale":-1000.01,"sale_commission":100,"posting":{"posting_number":"0102-1"}}`))
	f.Add([]byte(`{"operation_id":9,"operation_type":"OperationMarketplaceServiceStorage","operation_date":"2026-09-30 23:59:59","amount":-811.05,"posting":{"posting_number":""}}`))
	f.Add([]byte(`{"operation_id":2,"amount":"ninety","posting":{"posting_number":"P-2"}}`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		if !json.Valid(raw) {
			return // a line is one element of a page that decoded: valid JSON on its own
		}
		l, err := fin.line(raw)
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
