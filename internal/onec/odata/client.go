package odata

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/google/uuid"
	"github.com/shopspring/decimal"

	"github.com/ordersync/ordersync/internal/onec"
	"github.com/ordersync/ordersync/internal/onec/wire"
)

var _ onec.Client = (*Client)(nil)

// DefaultItemsBy is the catalog field an order's SKU is matched to by default.
const DefaultItemsBy = "Артикул"

// pageSize is how many objects one listing's page asks for ($top).
const pageSize = 500

// SourceRefs are the references a source's orders are written with
// (onec.odata.sources.<source>): the partner, the counterparty, the agreement.
type SourceRefs struct {
	Partner, Counterparty, Agreement string
}

// Config configures a Client; the comments name the configuration keys.
type Config struct {
	// Wire is the connection: onec.base_url (the publication's …/odata/standard.odata
	// address), the credentials, onec.timeout, onec.max_concurrency, ….
	Wire wire.Config
	// Profile is onec.odata.profile, with onec.odata.marker applied (ProfileNamed).
	Profile Profile
	// ItemsBy is onec.odata.items_by: the catalog field a SKU is matched to.
	ItemsBy string
	// The base's fixed references (GUIDs): onec.odata.organization, .warehouse,
	// .currency, .price_type.
	Organization, Warehouse, Currency, PriceType string
	// Sources are onec.odata.sources, by source.
	Sources map[string]SourceRefs
	// CancelReason is onec.odata.cancel_reason (УТ: a ПричиныОтменыЗаказовКлиентов
	// GUID, optional); CancelledState onec.odata.cancelled_state (УНФ: the
	// СостоянияЗаказовПокупателей GUID of a cancelled order).
	CancelReason, CancelledState string
	// Accounts are the marketplace accounts' 1C mappings (connectors.<name>.onec),
	// by account name: `ordersync onec check` resolves their references too.
	Accounts map[string]onec.Mapping
}

// Client talks to one base over the standard OData interface. It is safe for
// concurrent use.
type Client struct {
	cfg   Config
	p     Profile
	conn  *wire.Conn
	urls  URLs
	items *Items
	// refKeySaid is set once the log has said whether the base keeps a client's
	// Ref_Key, which the first create shows.
	refKeySaid atomic.Bool
}

// New checks cfg and returns a client. Errors name the configuration key at fault.
func New(cfg Config) (*Client, error) {
	if cfg.Profile.Document == "" {
		return nil, errors.New("onec.odata.profile is required (ut11 or unf)")
	}
	cfg.ItemsBy = cmp.Or(cfg.ItemsBy, DefaultItemsBy)
	cfg.Wire.Example = cmp.Or(cfg.Wire.Example, "http://1c.local/trade/odata/standard.odata")
	cfg.Wire.FinishPath = cmp.Or(cfg.Wire.FinishPath, "/"+url.PathEscape(cfg.Profile.Document)+"?$top=1&$select=Ref_Key&$format=json")
	c := &Client{cfg: cfg, p: cfg.Profile}
	conn, err := wire.New(cfg.Wire, judge{c})
	if err != nil {
		return nil, err
	}
	c.conn = conn
	c.urls = NewURLs(conn.Base())
	c.items = &Items{Field: cfg.ItemsBy, Lookup: c.lookupItem}
	return c, nil
}

// Close ends the 1C sessions the client keeps.
func (c *Client) Close(ctx context.Context) error { return c.conn.Close(ctx) }

// Profile is the client's profile.
func (c *Client) Profile() Profile { return c.p }

// get reads the URL full (one of URLs'), op naming the call.
func (c *Client) get(ctx context.Context, op, full string) (wire.Answer, error) {
	return c.conn.Do(ctx, c.call(op, http.MethodGet, full, nil))
}

// stream GETs full and hands its body to fn as it arrives; it returns the bytes
// read.
func (c *Client) stream(ctx context.Context, op, full string, fn func(io.Reader) error) (int64, error) {
	k := c.call(op, http.MethodGet, full, nil)
	k.Stream = fn
	ans, err := c.conn.Do(ctx, k)
	return ans.Read, err
}

// call is a request of a URL that URLs built: its path below the publication and
// its query as built, sent byte for byte (1C reads a '+' as a plus).
func (c *Client) call(op, method, full string, body []byte) wire.Call {
	path, query, _ := strings.Cut(strings.TrimPrefix(full, c.urls.Root), "?")
	k := wire.Call{Op: op, Method: method, Path: path, RawQuery: query, Body: body}
	switch {
	case method == http.MethodPost && body == nil:
		k.EmptyBody = true
	case method == http.MethodPost:
		k.Accept = func(st int) bool { return st == http.StatusOK || st == http.StatusCreated }
	case method == http.MethodDelete:
		k.Accept = func(st int) bool { return st == http.StatusOK || st == http.StatusNoContent }
	}
	return k
}

// list reads every page of a listing, in the order q.OrderBy keeps stable.
func (c *Client) list(ctx context.Context, op, set string, q Query, each func(json.RawMessage) error) error {
	q.Top = pageSize
	for q.Skip = 0; ; q.Skip += pageSize {
		full, err := c.urls.List(set, q)
		if err != nil {
			return &onec.Error{Class: onec.Permanent, Op: op, Path: "/" + set, Message: err.Error(), Err: err}
		}
		values, err := getPage[json.RawMessage](ctx, c, op, full)
		if err != nil {
			return err
		}
		for _, v := range values {
			if err := each(v); err != nil {
				return err
			}
		}
		if len(values) < pageSize {
			return nil
		}
	}
}

// keyed is an object of a listing read for its Ref_Key alone.
type keyed struct {
	Ref string `json:"Ref_Key"`
}

// getPage GETs one page of a listing (full, one of URLs') and decodes its value.
func getPage[T any](ctx context.Context, c *Client, op, full string) ([]T, error) {
	ans, err := c.get(ctx, op, full)
	if err != nil {
		return nil, err
	}
	var page struct {
		Value []T `json:"value"`
	}
	if err := json.Unmarshal(ans.Body, &page); err != nil {
		return nil, c.notOData(op, full, ans, err)
	}
	return page.Value, nil
}

// notOData is an answer of 200 that is not the standard interface's JSON: a
// publication's login page (an HTML page with 200 is how some answer credentials
// they do not take), or not the standard interface at all.
func (c *Client) notOData(op, full string, ans wire.Answer, err error) error {
	if b := strings.TrimSpace(string(ans.Body)); strings.HasPrefix(b, "<") {
		return &onec.Error{Class: onec.Auth, Op: op, Path: strings.TrimPrefix(full, c.urls.Root), Status: ans.Status,
			Message: fmt.Sprintf("1C answered HTTP %d with a web page instead of JSON, the way a publication answers credentials it does not take: check onec.username and onec.password, and that onec.base_url is the …/odata/standard.odata address (%s)",
				ans.Status, describeBody(ans.Body)), Err: err}
	}
	return &onec.Error{Class: onec.Permanent, Op: op, Path: strings.TrimPrefix(full, c.urls.Root), Status: ans.Status,
		Message: "1C answered JSON that is not the standard OData interface's: " + onec.Snippet(ans.Body), Err: err}
}

// Ping reads one order's key: the publication answers, the credentials are
// accepted, and the profile's document is published.
func (c *Client) Ping(ctx context.Context) (onec.Info, error) {
	full, err := c.urls.List(c.p.Document, Query{Select: []string{"Ref_Key"}, Top: 1})
	if err != nil {
		return onec.Info{}, err
	}
	if _, err := c.get(ctx, "ping", full); err != nil {
		return onec.Info{}, err
	}
	return onec.Info{Service: "1C standard OData interface", Version: c.p.Name}, nil
}

// header is what a find or a listing reads of an order.
type header struct {
	Ref     string `json:"Ref_Key"`
	Number  string `json:"Number"`
	Date    string `json:"Date"`
	Posted  bool   `json:"Posted"`
	Deleted bool   `json:"DeletionMark"`
}

func (c *Client) orderOf(raw json.RawMessage) (onec.Order, error) {
	var h header
	if err := json.Unmarshal(raw, &h); err != nil {
		return onec.Order{}, err
	}
	var m map[string]json.RawMessage
	_ = json.Unmarshal(raw, &m)
	var marker string
	_ = json.Unmarshal(m[c.p.Marker], &marker)
	return onec.Order{Ref: h.Ref, Number: h.Number, Date: h.Date, ExternalID: marker, Posted: h.Posted, Deleted: h.Deleted}, nil
}

// FindOrders lists the orders whose marker is externalID (1C compares it without
// regard to letter case; the engine tells them apart).
func (c *Client) FindOrders(ctx context.Context, externalID string) ([]onec.Order, error) {
	q := Query{Filter: c.p.Marker + " eq " + Literal(externalID), OrderBy: "Date",
		Select: []string{"Ref_Key", "Number", "Date", "Posted", "DeletionMark", c.p.Marker}}
	out := []onec.Order{}
	err := c.list(ctx, "find", c.p.Document, q, func(raw json.RawMessage) error {
		o, err := c.orderOf(raw)
		if err != nil {
			return &onec.Error{Class: onec.Permanent, Op: "find", Path: "/" + c.p.Document,
				Message: "1C answered an order that does not read: " + onec.Snippet(raw), Err: err}
		}
		out = append(out, o)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// document is the order as ordersync writes it: its source's references, its SKUs
// matched to items, the marker. An unmatched SKU or a source without references
// is this order's configuration error; nothing is written.
//
// The account's mapping (req.Mapping), where it names a reference, takes the place
// of the base's organisation and warehouse and of the source's partner,
// counterparty and agreement, order by order; a source whose mapping names its
// buyer needs no onec.odata.sources entry.
func (c *Client) document(ctx context.Context, req onec.CreateOrder) (Document, error) {
	if err := checkMapping(req.Source, req.Mapping); err != nil {
		return Document{}, &onec.Error{Class: onec.Configuration, PerOrder: true, Op: "create", Message: err.Error(), Err: err}
	}
	m := req.Mapping
	src, ok := c.cfg.Sources[req.Source]
	if !ok && (m.Counterparty == "" || (c.p.Partner != "" && m.Partner == "")) {
		return Document{}, &onec.Error{Class: onec.Configuration, PerOrder: true, Op: "create",
			Message: fmt.Sprintf("onec.odata.sources.%s is not set: the orders of %s need its partner, counterparty and agreement (GUIDs; `ordersync onec refs` lists them)", req.Source, req.Source)}
	}
	skus := make([]string, len(req.Lines))
	for i, l := range req.Lines {
		skus[i] = l.SKU
	}
	refs, err := c.items.Match(ctx, skus)
	if err != nil {
		return Document{}, err
	}
	d := Document{
		Marker: req.ExternalID,
		Date:   req.Date,
		Refs: Refs{Organization: cmp.Or(m.Organization, c.cfg.Organization), Partner: cmp.Or(m.Partner, src.Partner),
			Counterparty: cmp.Or(m.Counterparty, src.Counterparty), Agreement: cmp.Or(m.Agreement, src.Agreement),
			Currency: c.cfg.Currency, Warehouse: cmp.Or(m.Warehouse, c.cfg.Warehouse)},
		Total:   req.Total,
		Comment: comment(req),
	}
	for i, l := range req.Lines {
		d.Rows = append(d.Rows, Row{Item: refs[i], Quantity: l.Quantity, Price: l.Price, Amount: l.Amount})
	}
	return d, nil
}

// checkMapping refuses a mapping that names a reference by anything but its GUID:
// the standard OData interface writes a reference as <name>_Key, and a code there
// would be refused by 1C or, worse, kept as a broken reference.
func checkMapping(source string, m onec.Mapping) error {
	for _, f := range []struct{ key, v string }{{"organization", m.Organization}, {"warehouse", m.Warehouse},
		{"partner", m.Partner}, {"counterparty", m.Counterparty}, {"agreement", m.Agreement}} {
		if f.v == "" {
			continue
		}
		if _, err := uuid.Parse(f.v); err != nil || len(f.v) != 36 {
			return &onec.MappingError{Source: source, Key: cmp.Or(m.Section, "connectors."+source+".onec") + "." + f.key,
				Reason: fmt.Sprintf("%q is not a GUID; over the standard OData interface each reference is the GUID of its catalog item (`ordersync onec refs` lists them)", f.v)}
		}
	}
	return nil
}

// comment is the order's text for the document's comment: where it comes from,
// the buyer, and the order's own comment.
func comment(req onec.CreateOrder) string {
	parts := []string{fmt.Sprintf("%s № %s", req.Source, req.Number)}
	if s := strings.TrimSpace(strings.Join(nonEmpty(req.Customer.Name, req.Customer.Phone, req.Customer.Email), ", ")); s != "" {
		parts = append(parts, "покупатель: "+s)
	}
	if req.Comment != "" {
		parts = append(parts, req.Comment)
	}
	return strings.Join(parts, "; ")
}

func nonEmpty(ss ...string) []string {
	var out []string
	for _, s := range ss {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

// CreateOrder POSTs the order once, with the marker and a Ref_Key of its external
// id (RefKey). A base that keeps the client's Ref_Key answers a repeated create
// "key exists": the order is read and returned as Existing. The answer's Location
// header is never read: 1C writes it in raw UTF-8, and the Ref_Key comes from the
// body.
func (c *Client) CreateOrder(ctx context.Context, req onec.CreateOrder) (onec.Created, error) {
	d, err := c.document(ctx, req)
	if err != nil {
		return onec.Created{}, err
	}
	d.Ref = RefKey(req.ExternalID)
	body, err := c.p.Body(d)
	if err != nil {
		return onec.Created{}, &onec.Error{Class: onec.Permanent, Op: "create", Message: "cannot encode the order", Err: err}
	}
	ans, err := c.conn.Do(ctx, c.call("create", http.MethodPost, c.urls.Create(c.p.Document), body))
	if KeyExists(err) {
		got, _, rerr := c.read(ctx, d.Ref)
		if rerr != nil {
			return onec.Created{}, &onec.Error{Class: onec.Unknown, Op: "create", Path: "/" + c.p.Document,
				Message: "1C answered that an object with the order's Ref_Key exists, and reading it failed: it is looked up by its marker before it is created again", Err: rerr}
		}
		return onec.Created{Ref: got.Ref, Number: got.Number, Date: got.Date, Existing: true, ExternalID: got.Marker}, nil
	}
	if err != nil {
		return onec.Created{}, err
	}
	got, perr := c.p.Parse(ans.Body)
	if perr != nil || got.Ref == "" {
		// 1C answered success; a proxy may have cut or mangled the answer (1C's raw
		// UTF-8 Location header breaks some). Only the find by marker can tell.
		return onec.Created{}, &onec.Error{Class: onec.Unknown, Op: "create", Path: "/" + c.p.Document, Status: ans.Status,
			Message: fmt.Sprintf("1C answered %d to the create with a body that does not read as the order: it may have been created, so it is looked up by its marker before it is created again (%s)",
				ans.Status, onec.Snippet(ans.Body)), Err: perr}
	}
	if log := c.cfg.Wire.Logger; log != nil && c.refKeySaid.CompareAndSwap(false, true) {
		if got.Ref == d.Ref {
			log.InfoContext(ctx, "the 1C base keeps a client's Ref_Key on create: a create repeated after a lost answer is refused by 1C (key exists) and taken as found")
		} else {
			log.InfoContext(ctx, "the 1C base ignores a client's Ref_Key on create: a create repeated after a lost answer is prevented by the find by marker alone")
		}
	}
	return onec.Created{Ref: got.Ref, Number: got.Number, Date: got.Date}, nil
}

// read GETs the order ref: parsed, and as 1C answered it.
func (c *Client) read(ctx context.Context, ref string) (Document, []byte, error) {
	return c.readOf(ctx, c.p, "read", ref)
}

// readOf GETs the document ref of p's set, op naming the call.
func (c *Client) readOf(ctx context.Context, p Profile, op, ref string) (Document, []byte, error) {
	full := c.urls.Read(p.Document, ref)
	ans, err := c.get(ctx, op, full)
	if err != nil {
		return Document{}, nil, err
	}
	d, err := p.Parse(ans.Body)
	if err != nil {
		return Document{}, nil, c.notOData(op, full, ans, err)
	}
	return d, ans.Body, nil
}

// SettleOrder reads the order back and compares it with what req writes, posts it
// when it is not posted, and reads and compares it again: 1C's posting handlers
// may change a document too. A difference is a *onec.Mismatch; a posting 1C
// refused is retried, never the create.
func (c *Client) SettleOrder(ctx context.Context, o onec.Order, req onec.CreateOrder) error {
	want, err := c.document(ctx, req)
	if err != nil {
		return err
	}
	got, _, err := c.read(ctx, o.Ref)
	if err != nil {
		return err
	}
	if err := c.compare(want, got); err != nil {
		return err
	}
	if got.Posted || got.Deleted {
		return nil // a document marked for deletion is not posted; the engine warns of it
	}
	if _, err := c.conn.Do(ctx, c.call("post", http.MethodPost, c.urls.Post(c.p.Document, got.Ref), nil)); err != nil {
		return c.postError(got, err)
	}
	again, _, err := c.read(ctx, o.Ref)
	if err != nil {
		return err
	}
	if !again.Posted {
		return &onec.Error{Class: onec.Transient, PerOrder: true, Op: "post", Path: "/" + c.p.Document,
			Message: fmt.Sprintf("1C answered the posting of the order № %s (%s) as done, and reads it back not posted: the posting is tried again", got.Number, got.Ref)}
	}
	return c.compare(want, again)
}

// compare says how got differs from want, as a *onec.Mismatch in an error of
// its class: a marker 1C cut cannot be found again, so that order is not retried
// (Permanent, or the next attempt would create it again); any other difference
// waits for an administrator (Configuration) and is looked at again.
func (c *Client) compare(want, got Document) error { return compareIn(c.p, want, got) }

// compareIn is compare of a document of p's set.
func compareIn(p Profile, want, got Document) error {
	diffs := p.Compare(want, got)
	if len(diffs) == 0 {
		return nil
	}
	m := &onec.Mismatch{Ref: got.Ref, Number: got.Number, Differences: diffs, Hint: hint(p, diffs)}
	e := &onec.Error{Class: onec.Configuration, PerOrder: true, Op: "readback", Path: "/" + p.Document,
		Message: m.Error(), Err: m}
	for _, d := range diffs {
		if d.Field == p.Marker {
			e.Class = onec.Permanent
			e.Message += "; the marker 1C holds is not the order's, so it cannot be found by it again and is not retried: " +
				"choose a longer field with onec.odata.marker, then resync the order after correcting the document in 1C"
		}
	}
	return e
}

// hint says what an administrator does about differences.
func hint(p Profile, diffs []onec.Difference) string {
	var empty, cut, other bool
	for _, d := range diffs {
		switch {
		case d.Got == "" || d.Got == "0":
			empty = true
		case d.Want != d.Got && strings.HasPrefix(d.Want, d.Got):
			cut = true
		default:
			other = true
		}
	}
	var hs []string
	if empty {
		hs = append(hs, fmt.Sprintf("a field that reads back empty is not published: add it to %s in «Настройка стандартного интерфейса OData» (ordersync onec check names what is missing)", p.Document))
	}
	if cut {
		hs = append(hs, "a text 1C holds shorter than written was cut to its field's length in 1C: correct the document in 1C, or widen the field")
	}
	if other {
		hs = append(hs, "correct the document in 1C (or the mapping in onec.odata), and the order is looked at again")
	}
	return strings.Join(hs, "; ")
}

// postError is a posting 1C refused: the order is created, not posted, and the
// posting alone is tried again (posting a document twice is harmless).
func (c *Client) postError(d Document, err error) error {
	return postRefused(c.p, "post", "order", d, err)
}

// postRefused is a posting of the document d (an "order", a "return") of p's set
// that 1C refused, as the operation op: created, not posted, and the posting alone
// tried again, with 1C's message; refused credentials are an authentication
// failure naming the rights the user needs.
func postRefused(p Profile, op, what string, d Document, err error) error {
	e := &onec.Error{Class: onec.Transient, PerOrder: true, Op: op, Path: "/" + p.Document + "/Post",
		Message: fmt.Sprintf("the %s № %s (%s) is created in 1C and 1C did not post it; the posting is tried again", what, d.Number, d.Ref), Err: err}
	var oe *onec.Error
	if errors.As(err, &oe) {
		e.Status, e.Code, e.API = oe.Status, oe.Code, oe.API
		if oe.Message != "" {
			e.Message += "; 1C said: " + oe.Message
		}
		if oe.Class == onec.Auth {
			e.Class, e.PerOrder = onec.Auth, false
			e.Message += " (the user needs the right to post " + p.Document + ": the role УдаленныйДоступСтандартныйИнтерфейсOData and the document's rights)"
		}
	}
	return e
}

// CancelOrder cancels the order with externalID as the profile says (УТ: every
// row Отменено with onec.odata.cancel_reason; УНФ: the cancelled state), as one
// PATCH built from a fresh read (1C replaces a tabular part whole), posts it again,
// and reads it back. Asking again is safe.
func (c *Client) CancelOrder(ctx context.Context, externalID, reason string) (onec.Cancelled, error) {
	found, err := c.FindOrders(ctx, externalID)
	if err != nil {
		return onec.Cancelled{}, err
	}
	var pick *onec.Order
	for i := range found {
		if found[i].ExternalID == externalID && (pick == nil || pick.Deleted && !found[i].Deleted) {
			pick = &found[i]
		}
	}
	if pick == nil {
		return onec.Cancelled{}, &onec.Error{Class: onec.Permanent, Op: "cancel", Path: "/" + c.p.Document, Status: http.StatusNotFound, API: true,
			Message: fmt.Sprintf("1C holds no order with %s %q", c.p.Marker, externalID)}
	}
	_, raw, err := c.read(ctx, pick.Ref)
	if err != nil {
		return onec.Cancelled{}, err
	}
	patch, err := c.p.CancelBody(raw, c.cfg.CancelReason, c.cfg.CancelledState)
	if err != nil {
		return onec.Cancelled{}, &onec.Error{Class: onec.Configuration, Op: "cancel", Path: "/" + c.p.Document, Message: err.Error(), Err: err}
	}
	if _, err := c.conn.Do(ctx, c.call("cancel", http.MethodPatch, c.urls.Read(c.p.Document, pick.Ref), patch)); err != nil {
		return onec.Cancelled{}, err
	}
	if !pick.Deleted {
		if _, err := c.conn.Do(ctx, c.call("post", http.MethodPost, c.urls.Post(c.p.Document, pick.Ref), nil)); err != nil {
			d := Document{Ref: pick.Ref, Number: pick.Number}
			return onec.Cancelled{}, c.postError(d, err)
		}
	}
	_, after, err := c.read(ctx, pick.Ref)
	if err != nil {
		return onec.Cancelled{}, err
	}
	if !c.p.IsCancelled(after, c.cfg.CancelledState) {
		return onec.Cancelled{}, &onec.Error{Class: onec.Configuration, Op: "cancel", Path: "/" + c.p.Document,
			Message: fmt.Sprintf("1C answered the cancel of the order № %s (%s) and reads it back not cancelled: publish %s in the OData composition", pick.Number, pick.Ref, c.p.cancelField())}
	}
	return onec.Cancelled{Ref: pick.Ref, Status: "cancelled"}, nil
}

// Stock reads the balance of warehouse (a Склад GUID; "" is onec.odata.warehouse)
// from the profile's balance register, with each item's SKU by onec.odata.items_by
// and, when onec.odata.price_type is set, its price from the price register.
func (c *Client) Stock(ctx context.Context, warehouse string) (onec.Stock, error) {
	wh, err := c.warehouse(ctx, warehouse)
	if err != nil {
		return onec.Stock{}, err
	}
	if c.p.Stock.Register == "" {
		return onec.Stock{}, &onec.Error{Class: onec.Configuration, Op: "stock",
			Message: fmt.Sprintf("the %s profile reads no stock over OData", c.p.Name)}
	}
	qty := map[string]decimal.Decimal{}
	var order []string
	set := c.p.Stock.Register + "/Balance(Condition='" + strings.ReplaceAll(c.p.Stock.Warehouse+"_Key eq "+GUID(wh), "'", "''") + "')"
	err = c.list(ctx, "stock", set, Query{OrderBy: c.p.Stock.Item + "_Key"}, func(raw json.RawMessage) error {
		var m map[string]json.RawMessage
		if err := json.Unmarshal(raw, &m); err != nil {
			return err
		}
		var item string
		_ = json.Unmarshal(m[c.p.Stock.Item+"_Key"], &item)
		q, err := decimal.NewFromString(strings.Trim(string(m[c.p.Stock.Balance]), `"`))
		if err != nil {
			return &onec.Error{Class: onec.Permanent, Op: "stock", Path: "/" + c.p.Stock.Register,
				Message: fmt.Sprintf("1C answered a balance of item %s that is not a number: %s", item, m[c.p.Stock.Balance])}
		}
		if _, seen := qty[item]; !seen {
			order = append(order, item)
		}
		qty[item] = qty[item].Add(q)
		return nil
	})
	if err != nil {
		return onec.Stock{}, err
	}
	skus, err := c.skusOf(ctx)
	if err != nil {
		return onec.Stock{}, err
	}
	prices, err := c.prices(ctx)
	if err != nil {
		return onec.Stock{}, err
	}
	// Every item with a SKU is listed, those the register has no balance of at 0:
	// the register lists no item a warehouse has none of, and a marketplace not
	// sent the 0 would keep selling the last quantity it was sent. An item with no
	// SKU in items_by is not sold on a marketplace.
	out := onec.Stock{Warehouse: wh, Items: []onec.StockItem{}}
	for _, item := range order {
		if sku := skus[item]; sku != "" {
			out.Items = append(out.Items, onec.StockItem{SKU: sku, Quantity: qty[item], Price: prices[item]})
		}
	}
	var none []onec.StockItem
	for item, sku := range skus {
		if _, held := qty[item]; !held {
			none = append(none, onec.StockItem{SKU: sku, Quantity: decimal.Zero, Price: prices[item]})
		}
	}
	slices.SortFunc(none, func(a, b onec.StockItem) int { return strings.Compare(a.SKU, b.SKU) })
	out.Items = append(out.Items, none...)
	return out, nil
}

// warehouse is the GUID of a stock schedule's warehouse: "" is
// onec.odata.warehouse, a GUID is itself, anything else the warehouse catalog's
// element of that Code, or else of that name.
func (c *Client) warehouse(ctx context.Context, w string) (string, error) {
	if w == "" {
		w = c.cfg.Warehouse
	}
	if w == "" {
		return "", &onec.Error{Class: onec.Configuration, Op: "stock",
			Message: "no warehouse: set onec.odata.warehouse, or name the warehouse (its GUID, code or name) in the stock schedule"}
	}
	if _, err := uuid.Parse(w); err == nil && len(w) == 36 {
		return w, nil
	}
	set := c.p.Catalogs.Warehouse
	for _, field := range []string{"Code", "Description"} {
		full, err := c.urls.List(set, Query{Filter: field + " eq " + Literal(w) + " and DeletionMark eq false", Select: []string{"Ref_Key"}, Top: 2})
		if err != nil {
			return "", &onec.Error{Class: onec.Configuration, Op: "stock", Message: err.Error(), Err: err}
		}
		found, err := getPage[keyed](ctx, c, "stock", full)
		if err != nil {
			return "", err
		}
		switch len(found) {
		case 0:
			continue
		case 1:
			return found[0].Ref, nil
		default:
			return "", &onec.Error{Class: onec.Configuration, Op: "stock", Path: "/" + set,
				Message: fmt.Sprintf("several warehouses of %s have %s %q: name the warehouse by its GUID in the stock schedule", set, field, w)}
		}
	}
	return "", &onec.Error{Class: onec.Configuration, Op: "stock", Path: "/" + set,
		Message: fmt.Sprintf("no warehouse of %s has the code or name %q: name it by its GUID, code or name (`ordersync onec refs %s`)", set, w, set)}
}

// skusOf maps every item of the catalog to its SKU (onec.odata.items_by): by
// barcode, the first of its barcodes in the register.
func (c *Client) skusOf(ctx context.Context) (map[string]string, error) {
	out := map[string]string{}
	if c.cfg.ItemsBy == ByBarcode {
		r := c.p.Barcodes
		err := c.list(ctx, "stock", r.Register, Query{Select: []string{r.Barcode, r.Item + "_Key"}, OrderBy: r.Barcode}, func(raw json.RawMessage) error {
			var m map[string]any
			if err := json.Unmarshal(raw, &m); err != nil {
				return err
			}
			item, _ := m[r.Item+"_Key"].(string)
			if code, _ := m[r.Barcode].(string); code != "" && out[item] == "" {
				out[item] = code
			}
			return nil
		})
		return out, err
	}
	err := c.list(ctx, "stock", ItemsSet, Query{Select: []string{"Ref_Key", c.cfg.ItemsBy}, OrderBy: "Ref_Key"}, func(raw json.RawMessage) error {
		var m map[string]any
		if err := json.Unmarshal(raw, &m); err != nil {
			return err
		}
		ref, _ := m["Ref_Key"].(string)
		if sku, _ := m[c.cfg.ItemsBy].(string); sku != "" {
			out[ref] = sku
		}
		return nil
	})
	return out, err
}

// prices reads the prices of onec.odata.price_type, by item; none when unset.
func (c *Client) prices(ctx context.Context) (map[string]decimal.Decimal, error) {
	out := map[string]decimal.Decimal{}
	if c.cfg.PriceType == "" || c.p.Prices.Register == "" {
		return out, nil
	}
	set := c.p.Prices.Register + "/SliceLast(Condition='" + strings.ReplaceAll(c.p.Prices.Kind+"_Key eq "+GUID(c.cfg.PriceType), "'", "''") + "')"
	err := c.list(ctx, "stock", set, Query{OrderBy: c.p.Prices.Item + "_Key"}, func(raw json.RawMessage) error {
		var m map[string]json.RawMessage
		if err := json.Unmarshal(raw, &m); err != nil {
			return err
		}
		var item string
		_ = json.Unmarshal(m[c.p.Prices.Item+"_Key"], &item)
		if p, err := decimal.NewFromString(strings.Trim(string(m[c.p.Prices.Price]), `"`)); err == nil {
			out[item] = p
		}
		return nil
	})
	return out, err
}

// ListOrders lists the profile's documents dated within the period whose marker
// is of q.Source, earliest first, with their totals and whether they are
// cancelled. 1C's filter takes the dates; the source is told by the marker's
// prefix here (1C has no "starts with" ordersync can rely on).
func (c *Client) ListOrders(ctx context.Context, q onec.ListQuery) ([]onec.Order, error) {
	if q.Source == "" {
		return nil, &onec.Error{Class: onec.Permanent, Op: "list", Message: "list orders: the source is required"}
	}
	prefix := q.Source + ":"
	filter := fmt.Sprintf("Date ge datetime'%s' and Date le datetime'%s'", q.DateFrom, q.DateTo)
	out := []onec.Order{}
	err := c.list(ctx, "list", c.p.Document, Query{Filter: filter, OrderBy: "Date,Ref_Key"}, func(raw json.RawMessage) error {
		o, err := c.orderOf(raw)
		if err != nil || !strings.HasPrefix(o.ExternalID, prefix) {
			return nil
		}
		d, err := c.p.Parse(raw)
		if err == nil {
			total := d.Total
			o.Total = &total
		}
		o.Cancelled = c.p.IsCancelled(raw, c.cfg.CancelledState)
		out = append(out, o)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// lookupItem lists the items whose items_by field is sku (ItemQuery), or, by
// barcode, the items the barcodes register gives for it.
func (c *Client) lookupItem(ctx context.Context, sku string) ([]string, error) {
	if c.cfg.ItemsBy == ByBarcode {
		return c.lookupBarcode(ctx, sku)
	}
	full, err := c.urls.ItemQuery(c.cfg.ItemsBy, sku)
	if err != nil {
		return nil, &onec.Error{Class: onec.Configuration, PerOrder: true, Op: "items", Path: "/" + ItemsSet, Message: err.Error(), Err: err}
	}
	found, err := getPage[keyed](ctx, c, "items", full)
	if err != nil {
		return nil, err
	}
	refs := make([]string, len(found))
	for i, v := range found {
		refs[i] = v.Ref
	}
	return refs, nil
}

// lookupBarcode lists the items barcode is the barcode of (two at most: one
// item's several packagings count once).
func (c *Client) lookupBarcode(ctx context.Context, barcode string) ([]string, error) {
	r := c.p.Barcodes
	full, err := c.urls.List(r.Register, Query{Filter: r.Barcode + " eq " + Literal(barcode), Select: []string{r.Item + "_Key"}, Top: 10})
	if err != nil {
		return nil, &onec.Error{Class: onec.Configuration, PerOrder: true, Op: "items", Path: "/" + r.Register, Message: err.Error(), Err: err}
	}
	found, err := getPage[map[string]any](ctx, c, "items", full)
	if err != nil {
		return nil, err
	}
	var refs []string
	for _, v := range found {
		if ref, _ := v[r.Item+"_Key"].(string); ref != "" && !slices.Contains(refs, ref) {
			refs = append(refs, ref)
		}
	}
	return refs, nil
}

// judge is the standard interface's reading of an answer, for the connection.
type judge struct{ c *Client }

func (j judge) Judge(k wire.Call, ans wire.Answer) (wire.Answer, error) {
	if k.Accepts(ans.Status) {
		return ans, nil
	}
	write := k.Method != http.MethodGet
	e := ParseError(k.Op, k.Path, ans.Status, ans.Body, write)
	if e.Class == onec.Auth {
		who := fmt.Sprintf("onec.username %q", j.c.cfg.Wire.Username)
		if j.c.cfg.Wire.Username == "" {
			who = "no credentials (onec.username is empty)"
		}
		e.Message = fmt.Sprintf("1C refused %s at onec.base_url %s (HTTP %d): check the user and password, and that the user has the role УдаленныйДоступСтандартныйИнтерфейсOData; %s",
			who, j.c.urls.Root, ans.Status, e.Message)
	}
	if e.Class == onec.Configuration && !e.API {
		e.Message = fmt.Sprintf("1C's web server answered %d for %s %s with a page, not 1C's answer: the publication or its OData box is missing, onec.base_url is wrong, or the query was too long (%s)",
			ans.Status, k.Method, k.Path, e.Message)
	}
	return wire.Answer{}, e
}

// SessionRefused: 1C answers 400 without its error object to a request on a
// session it no longer knows.
func (judge) SessionRefused(ans wire.Answer) bool {
	return ans.Status == http.StatusBadRequest && !ParseError("", "", ans.Status, ans.Body, false).API
}
