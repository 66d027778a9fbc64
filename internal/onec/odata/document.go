package odata

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/google/uuid"
	"github.com/shopspring/decimal"

	"github.com/ordersync/ordersync/internal/onec"
)

// Refs are the header's references, as GUIDs: the fixed ones of the base
// (onec.odata.organization, .warehouse, .currency) and the source's
// (onec.odata.sources.<source>.partner, .counterparty, .agreement).
type Refs struct {
	Organization, Partner, Counterparty, Agreement, Currency, Warehouse string
}

// Row is one line of the order's tabular part, its item a GUID.
type Row struct {
	Item     string
	Quantity decimal.Decimal
	Price    decimal.Decimal
	Amount   decimal.Decimal
}

// Document is a customer order as ordersync writes it and reads it back.
type Document struct {
	Ref     string // Ref_Key; on create, the deterministic one (RefKey)
	Number  string // 1C's number, as read back
	Date    string // 1C's zone-less local time, YYYY-MM-DDTHH:MM:SS
	Marker  string // the external id
	Refs    Refs
	Rows    []Row
	Total   decimal.Decimal
	Comment string
	// Basis is the GUID of the document this one is based on (Profile.Basis),
	// BasisType its type as 1C names it (StandardODATA.Document_ЗаказКлиента).
	Basis, BasisType string
	Posted           bool // as read back
	Deleted          bool // DeletionMark, as read back
}

// refNamespace makes RefKey's UUIDs ordersync's own: no other name-based UUID of
// the same key collides with them.
var refNamespace = uuid.NewSHA1(uuid.NameSpaceURL, []byte("https://github.com/ordersync/ordersync/onec/odata"))

// RefKey is the deterministic Ref_Key of an operation's document: a version 5
// UUID of its business key. A base that keeps a client's Ref_Key answers a repeated
// create with "key exists" (code 15), and the order is found, not made twice.
func RefKey(key string) string { return uuid.NewSHA1(refNamespace, []byte(key)).String() }

// number is a decimal as an exact JSON number.
func number(d decimal.Decimal) json.Number { return json.Number(d.String()) }

// Body is the JSON a create POSTs: the header with its references as <name>_Key,
// the marker, and the tabular part inline, every row numbered from 1.
func (p Profile) Body(d Document) ([]byte, error) {
	m := map[string]any{
		"Date":   d.Date,
		p.Marker: d.Marker,
	}
	if d.Ref != "" {
		m["Ref_Key"] = d.Ref
	}
	for field, ref := range p.refFields(d.Refs) {
		if field != "" && ref != "" {
			m[field+"_Key"] = ref
		}
	}
	if p.Total != "" {
		m[p.Total] = number(d.Total)
	}
	if p.Comment != "" && p.Comment != p.Marker && d.Comment != "" {
		m[p.Comment] = d.Comment
	}
	if p.Operation != "" {
		m[p.Operation] = p.OperationValue
	}
	if p.Basis != "" && d.Basis != "" {
		m[p.Basis] = d.Basis
		m[p.Basis+"_Type"] = d.BasisType
	}
	rows := make([]map[string]any, len(d.Rows))
	for i, r := range d.Rows {
		row := map[string]any{
			// A string, as 1C's own examples write it; a gap answers 400, a row
			// without one 500.
			"LineNumber":    strconv.Itoa(i + 1),
			p.Item + "_Key": r.Item,
			p.Quantity:      number(r.Quantity),
			p.Price:         number(r.Price),
			p.Amount:        number(r.Amount),
		}
		if p.RowWarehouse != "" && d.Refs.Warehouse != "" {
			row[p.RowWarehouse+"_Key"] = d.Refs.Warehouse
		}
		if p.Cancelled != "" {
			row[p.Cancelled] = false
		}
		rows[i] = row
	}
	m[p.Rows] = rows
	return encode(m)
}

// encode is v as 1C is sent JSON: on one line, with <, > and & as they are.
func encode(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

// refFields pairs the profile's header reference fields with refs' values.
func (p Profile) refFields(r Refs) map[string]string {
	out := map[string]string{}
	for field, ref := range map[string]string{p.Organization: r.Organization, p.Partner: r.Partner,
		p.Counterparty: r.Counterparty, p.Agreement: r.Agreement, p.Currency: r.Currency, p.Warehouse: r.Warehouse} {
		if field != "" {
			out[field] = ref
		}
	}
	return out
}

// Parse reads a document as 1C answers a create or a read ($format=json).
func (p Profile) Parse(b []byte) (Document, error) {
	var m map[string]json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	if err := dec.Decode(&m); err != nil {
		return Document{}, fmt.Errorf("%s: not a document: %w", p.Document, err)
	}
	var d Document
	var errs []error
	str := func(name string) string {
		var s string
		if raw, ok := m[name]; ok && json.Unmarshal(raw, &s) != nil {
			errs = append(errs, fmt.Errorf("%s is not a string", name))
		}
		return s
	}
	boolean := func(name string) bool {
		var v bool
		if raw, ok := m[name]; ok && json.Unmarshal(raw, &v) != nil {
			errs = append(errs, fmt.Errorf("%s is not true or false", name))
		}
		return v
	}
	dec1 := func(raw json.RawMessage, name string) decimal.Decimal {
		if raw == nil {
			return decimal.Zero
		}
		v, err := decimal.NewFromString(string(bytes.Trim(raw, `"`)))
		if err != nil {
			errs = append(errs, fmt.Errorf("%s is not a number: %s", name, raw))
		}
		return v
	}
	d.Ref, d.Number, d.Date, d.Marker = str("Ref_Key"), str("Number"), str("Date"), str(p.Marker)
	d.Posted, d.Deleted = boolean("Posted"), boolean("DeletionMark")
	key := func(field string) string {
		if field == "" {
			return ""
		}
		return str(field + "_Key")
	}
	d.Refs = Refs{Organization: key(p.Organization), Partner: key(p.Partner), Counterparty: key(p.Counterparty),
		Agreement: key(p.Agreement), Currency: key(p.Currency), Warehouse: key(p.Warehouse)}
	if p.Total != "" {
		d.Total = dec1(m[p.Total], p.Total)
	}
	if p.Comment != "" && p.Comment != p.Marker {
		d.Comment = str(p.Comment)
	}
	if p.Basis != "" {
		d.Basis, d.BasisType = str(p.Basis), str(p.Basis+"_Type")
	}
	var rows []map[string]json.RawMessage
	if raw, ok := m[p.Rows]; ok {
		if err := json.Unmarshal(raw, &rows); err != nil {
			errs = append(errs, fmt.Errorf("%s is not a list of rows", p.Rows))
		}
	}
	for i, r := range rows {
		var item string
		if raw, ok := r[p.Item+"_Key"]; ok && json.Unmarshal(raw, &item) != nil {
			errs = append(errs, fmt.Errorf("%s row %d: %s_Key is not a string", p.Rows, i+1, p.Item))
		}
		d.Rows = append(d.Rows, Row{Item: item,
			Quantity: dec1(r[p.Quantity], p.Quantity), Price: dec1(r[p.Price], p.Price), Amount: dec1(r[p.Amount], p.Amount)})
	}
	if len(errs) > 0 {
		return d, fmt.Errorf("%s %s: %v", p.Document, d.Ref, errs)
	}
	return d, nil
}

// Difference is one field that 1C holds otherwise than ordersync wrote it.
type Difference = onec.Difference

// Compare lists how got (read back) differs from want (written): the marker, the
// date, each reference written, the base document when one is written, each
// row's item, quantity, price and amount, the number of rows and the total. 1C answers 200 to a write it truncated or ignored,
// so a create is not done until Compare finds nothing.
func (p Profile) Compare(want, got Document) []Difference {
	var out []Difference
	diff := func(field, w, g string) {
		if w != g {
			out = append(out, Difference{Field: field, Want: w, Got: g})
		}
	}
	decimals := func(field string, w, g decimal.Decimal) {
		if !w.Equal(g) {
			out = append(out, Difference{Field: field, Want: w.String(), Got: g.String()})
		}
	}
	diff(p.Marker, want.Marker, got.Marker)
	diff("Date", want.Date, got.Date)
	wr, gr := p.refFields(want.Refs), p.refFields(got.Refs)
	for _, field := range []string{p.Organization, p.Partner, p.Counterparty, p.Agreement, p.Currency, p.Warehouse} {
		if field != "" && wr[field] != "" {
			diff(field+"_Key", wr[field], gr[field])
		}
	}
	if p.Total != "" {
		decimals(p.Total, want.Total, got.Total)
	}
	if p.Comment != "" && p.Comment != p.Marker && want.Comment != "" {
		diff(p.Comment, want.Comment, got.Comment)
	}
	if p.Basis != "" && want.Basis != "" {
		diff(p.Basis, want.Basis, got.Basis)
		diff(p.Basis+"_Type", want.BasisType, got.BasisType)
	}
	if len(want.Rows) != len(got.Rows) {
		diff(p.Rows, fmt.Sprintf("%d rows", len(want.Rows)), fmt.Sprintf("%d rows", len(got.Rows)))
	}
	for i := range min(len(want.Rows), len(got.Rows)) {
		w, g := want.Rows[i], got.Rows[i]
		at := fmt.Sprintf("%s[%d].", p.Rows, i+1)
		diff(at+p.Item+"_Key", w.Item, g.Item)
		decimals(at+p.Quantity, w.Quantity, g.Quantity)
		decimals(at+p.Price, w.Price, g.Price)
		decimals(at+p.Amount, w.Amount, g.Amount)
	}
	return out
}

// CancelBody is the PATCH that cancels an order, built from its fresh read (raw,
// as 1C answered the GET): for УТ every row of the tabular part, with all its
// fields as read, marked Отменено with the reason (onec.odata.cancel_reason, an
// optional ПричиныОтменыЗаказовКлиентов GUID) — 1C replaces a tabular part whole,
// so a row left out would be deleted; for УНФ the header's state set to
// cancelled (a СостоянияЗаказовПокупателей GUID). The order is posted again after.
func (p Profile) CancelBody(raw []byte, reason, cancelledState string) ([]byte, error) {
	var doc map[string]json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&doc); err != nil {
		return nil, fmt.Errorf("%s: not a document: %w", p.Document, err)
	}
	out := map[string]any{}
	switch {
	case p.Cancelled != "":
		var rows []map[string]any
		d := json.NewDecoder(bytes.NewReader(doc[p.Rows]))
		d.UseNumber()
		if err := d.Decode(&rows); err != nil || len(rows) == 0 {
			return nil, fmt.Errorf("%s: the read order has no %s to cancel", p.Document, p.Rows)
		}
		for i, r := range rows {
			delete(r, "Ref_Key") // the row's owner, not a field of the row
			r["LineNumber"] = strconv.Itoa(i + 1)
			r[p.Cancelled] = true
			if reason != "" {
				r[cancelReason+"_Key"] = reason
			}
		}
		out[p.Rows] = rows
	case p.Status != "":
		if cancelledState == "" {
			return nil, fmt.Errorf("onec.odata.cancelled_state: the %s profile cancels by the order's state; name the state's GUID", p.Name)
		}
		out[p.Status+"_Key"] = cancelledState
	default:
		return nil, fmt.Errorf("the %s profile says no way to cancel", p.Name)
	}
	return encode(out)
}

// IsCancelled reads a document as 1C answered it: for УТ every row Отменено, for
// УНФ its state the cancelled one (cancelledState).
func (p Profile) IsCancelled(raw []byte, cancelledState string) bool {
	var doc map[string]json.RawMessage
	if json.Unmarshal(raw, &doc) != nil {
		return false
	}
	switch {
	case p.Cancelled != "":
		var rows []map[string]any
		if json.Unmarshal(doc[p.Rows], &rows) != nil || len(rows) == 0 {
			return false
		}
		for _, r := range rows {
			if r[p.Cancelled] != true {
				return false
			}
		}
		return true
	case p.Status != "":
		var state string
		return json.Unmarshal(doc[p.Status+"_Key"], &state) == nil && cancelledState != "" && state == cancelledState
	}
	return false
}

// cancelField names what a cancel writes, for a message.
func (p Profile) cancelField() string {
	if p.Cancelled != "" {
		return p.Document + "_" + p.Rows + "_RowType." + p.Cancelled
	}
	return p.Document + "." + p.Status + "_Key"
}

// cancelReason is УТ's row field of the reason an order's row was cancelled.
const cancelReason = "ПричинаОтмены"
