package odata

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/ordersync/ordersync/internal/onec"
)

// A customer return is written as an order is: found by its marker before it is
// created, created once with a Ref_Key of its external id, read back and compared,
// posted, read and compared again. Its header's references are the order's, read
// from the order's document by its ref; its base (Profile.Basis) is that document.
//
// The engine's returns handler takes a return it finds as done, with no settle
// step of its own: so CreateReturn settles (reads back, compares, posts) before it
// answers, and a return it created that is not what was written, or that 1C did not
// post, fails at once (Permanent) naming the document, rather than be found and
// taken as it is by the next attempt.

// zeroRef is 1C's empty reference: a field that refers to nothing.
const zeroRef = "00000000-0000-0000-0000-000000000000"

// returnProfile is the profile's return document, or the Configuration error that
// says it has none (op naming the call).
func (c *Client) returnProfile(op string) (Profile, error) {
	if c.p.Return == nil {
		return Profile{}, &onec.Error{Class: onec.Configuration, Op: op, Path: "/returns",
			Message: fmt.Sprintf("the %s profile carries no customer returns over the standard OData interface: ordersync does not know which document of the configuration takes them "+
				"(returns are carried with onec.odata.profile ut11); register the returns in 1C by hand, or install the ordersync HTTP service (deploy/1c) and set onec.interface to httpservice; "+
				"the return operations wait (worker.give_up_after), the orders go on", c.p.Name)}
	}
	return *c.p.Return, nil
}

// unpublished makes 1C's "no such entity set" for the return document (a
// Configuration failure) say what to publish; any other error is err.
func unpublished(rp Profile, err error) error {
	var oe *onec.Error
	if !errors.As(err, &oe) || oe.Class != onec.Configuration {
		return err
	}
	_, name, _ := strings.Cut(rp.Document, "_")
	e := *oe
	e.Message = fmt.Sprintf("%s is not published: add the document %s (with its tabular part %s and the Post action) to the base's OData composition with «Настройка стандартного интерфейса OData», "+
		"and give the user the rights to read, add, change and post it (`ordersync onec check` names what is missing); the returns wait, the orders go on; 1C said: %s",
		rp.Document, name, rp.Rows, oe.Message)
	return &e
}

// FindReturns lists the returns whose marker is externalID (1C compares it
// without regard to letter case; the handler tells them apart), with the order
// each is based on and its total.
func (c *Client) FindReturns(ctx context.Context, externalID string) ([]onec.Return, error) {
	rp, err := c.returnProfile("find_returns")
	if err != nil {
		return nil, err
	}
	q := Query{Filter: rp.Marker + " eq " + Literal(externalID), OrderBy: "Date",
		Select: []string{"Ref_Key", "Number", "Date", "Posted", "DeletionMark", rp.Marker, rp.Total, rp.Basis}}
	out := []onec.Return{}
	err = c.list(ctx, "find_returns", rp.Document, q, func(raw json.RawMessage) error {
		d, err := rp.Parse(raw)
		if err != nil {
			return &onec.Error{Class: onec.Permanent, Op: "find_returns", Path: "/" + rp.Document,
				Message: "1C answered a return that does not read: " + onec.Snippet(raw), Err: err}
		}
		total := d.Total
		out = append(out, onec.Return{Ref: d.Ref, Number: d.Number, Date: d.Date, ExternalID: d.Marker,
			OrderRef: d.Basis, Posted: d.Posted, Deleted: d.Deleted, Total: &total})
		return nil
	})
	if err != nil {
		return nil, unpublished(rp, err)
	}
	return out, nil
}

// returnDocument is the return as ordersync writes it: the order's references,
// read from the order's document, its SKUs matched to items as an order's are,
// the marker, the order as its base. An unmatched SKU is this return's
// configuration error, and an order 1C no longer holds its permanent one; nothing
// is written.
func (c *Client) returnDocument(ctx context.Context, rp Profile, req onec.CreateReturn) (Document, error) {
	if req.OrderRef == "" {
		return Document{}, &onec.Error{Class: onec.Permanent, PerOrder: true, Op: "create_return",
			Message: fmt.Sprintf("the return %s names no 1C document of its order %s to be based on", req.ExternalID, req.OrderExternalID)}
	}
	base, _, err := c.readOf(ctx, c.p, "create_return", req.OrderRef)
	var oe *onec.Error
	if errors.As(err, &oe) && (oe.Status == http.StatusNotFound || oe.Code == fmt.Sprint(CodeNotFound)) {
		return Document{}, &onec.Error{Class: onec.Permanent, PerOrder: true, Op: "create_return", Path: "/" + c.p.Document,
			Status: oe.Status, API: oe.API, Code: oe.Code,
			Message: fmt.Sprintf("1C holds no %s %s, the order %s the return %s is based on: it was deleted in 1C; register the return by hand, or create the order again and requeue the return",
				c.p.Document, req.OrderRef, req.OrderExternalID, req.ExternalID), Err: err}
	}
	if err != nil {
		return Document{}, err
	}
	skus := make([]string, len(req.Lines))
	for i, l := range req.Lines {
		skus[i] = l.SKU
	}
	items, err := c.items.Match(ctx, skus)
	if err != nil {
		return Document{}, err
	}
	ref := func(r string) string {
		if r == zeroRef {
			return ""
		}
		return r
	}
	r := base.Refs
	d := Document{
		Marker: req.ExternalID,
		Date:   req.Date,
		Refs: Refs{Organization: ref(r.Organization), Partner: ref(r.Partner), Counterparty: ref(r.Counterparty),
			Agreement: ref(r.Agreement), Currency: ref(r.Currency), Warehouse: ref(r.Warehouse)},
		Total:     req.Total,
		Comment:   returnComment(req),
		Basis:     req.OrderRef,
		BasisType: "StandardODATA." + c.p.Document,
	}
	for i, l := range req.Lines {
		d.Rows = append(d.Rows, Row{Item: items[i], Quantity: l.Quantity, Price: l.Price, Amount: l.Amount})
	}
	return d, nil
}

// returnComment is the return's text for the document's comment: what it is, and
// why it came back.
func returnComment(req onec.CreateReturn) string {
	parts := nonEmpty(req.Comment)
	if len(parts) == 0 {
		parts = []string{fmt.Sprintf("%s return № %s", req.Source, req.Number)}
	}
	if r := strings.TrimSpace(req.Reason); r != "" {
		parts = append(parts, "причина: "+r)
	}
	return strings.Join(parts, "; ")
}

// CreateReturn POSTs the return once, based on the order's document, with the
// marker and a Ref_Key of its external id; SettleReturn then reads it back,
// compares it and posts it, as the engine settles a found or created return. A base
// that keeps the client's Ref_Key answers a repeated create "key exists": the
// return is read and answered as Existing. An unmatched SKU is refused before
// anything is written.
func (c *Client) CreateReturn(ctx context.Context, req onec.CreateReturn) (onec.Created, error) {
	rp, err := c.returnProfile("create_return")
	if err != nil {
		return onec.Created{}, err
	}
	want, err := c.returnDocument(ctx, rp, req)
	if err != nil {
		return onec.Created{}, err
	}
	want.Ref = RefKey(req.ExternalID)
	body, err := rp.Body(want)
	if err != nil {
		return onec.Created{}, &onec.Error{Class: onec.Permanent, Op: "create_return", Message: "cannot encode the return", Err: err}
	}
	ans, err := c.conn.Do(ctx, c.call("create_return", http.MethodPost, c.urls.Create(rp.Document), body))
	if KeyExists(err) {
		got, _, rerr := c.readOf(ctx, rp, "create_return", want.Ref)
		if rerr != nil {
			return onec.Created{}, &onec.Error{Class: onec.Unknown, Op: "create_return", Path: "/" + rp.Document,
				Message: "1C answered that an object with the return's Ref_Key exists, and reading it failed: it is looked up by its marker before it is created again", Err: rerr}
		}
		return onec.Created{Ref: got.Ref, Number: got.Number, Date: got.Date, Existing: true, ExternalID: got.Marker}, nil
	}
	if err != nil {
		return onec.Created{}, unpublished(rp, err)
	}
	got, perr := rp.Parse(ans.Body)
	if perr != nil || got.Ref == "" {
		return onec.Created{}, &onec.Error{Class: onec.Unknown, Op: "create_return", Path: "/" + rp.Document, Status: ans.Status,
			Message: fmt.Sprintf("1C answered %d to the create with a body that does not read as the return: it may have been created, so it is looked up by its marker before it is created again (%s)",
				ans.Status, onec.Snippet(ans.Body)), Err: perr}
	}
	return onec.Created{Ref: got.Ref, Number: got.Number, Date: got.Date}, nil
}

// SettleReturn makes sure the return r, found or just created, is what req asks
// and is posted, as SettleOrder does for an order: a read-back compared with req
// (a *onec.Mismatch: Configuration, or Permanent when the marker was cut), the
// posting when it is not posted (a refusal is Transient: the posting alone is
// tried again), and a second read-back.
func (c *Client) SettleReturn(ctx context.Context, r onec.Return, req onec.CreateReturn) error {
	rp, err := c.returnProfile("settle_return")
	if err != nil {
		return err
	}
	want, err := c.returnDocument(ctx, rp, req)
	if err != nil {
		return err
	}
	return c.settleReturn(ctx, rp, r.Ref, want)
}

// settleReturn reads the return ref back and compares it with want, posts it
// when it is not posted, and reads and compares it again.
func (c *Client) settleReturn(ctx context.Context, rp Profile, ref string, want Document) error {
	got, _, err := c.readOf(ctx, rp, "read_return", ref)
	if err != nil {
		return err
	}
	if err := compareIn(rp, want, got); err != nil {
		return err
	}
	if got.Posted || got.Deleted {
		return nil
	}
	if _, err := c.conn.Do(ctx, c.call("post_return", http.MethodPost, c.urls.Post(rp.Document, got.Ref), nil)); err != nil {
		return postRefused(rp, "post_return", "return", got, err)
	}
	again, _, err := c.readOf(ctx, rp, "read_return", ref)
	if err != nil {
		return err
	}
	if !again.Posted {
		return &onec.Error{Class: onec.Transient, PerOrder: true, Op: "post_return", Path: "/" + rp.Document,
			Message: "1C answered the posting as done, and the return reads back not posted"}
	}
	return compareIn(rp, want, again)
}
