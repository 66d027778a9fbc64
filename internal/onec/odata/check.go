package odata

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"strings"

	"github.com/google/uuid"

	"github.com/ordersync/ordersync/internal/onec"
)

// Ref is one configured reference, resolved: the key that names it, the catalog
// it is of, its GUID and what 1C calls it.
type Ref struct {
	Key  string // onec.odata.organization, onec.odata.sources.kaspi.partner, …
	Set  string // Catalog_Организации
	GUID string
	Name string // its Description; "" when not found
	// Problem says why it does not resolve: not found, marked for deletion, the
	// catalog unpublished.
	Problem string
}

// Report is what `ordersync onec check` found of a base.
type Report struct {
	Profile string
	// Metadata is how large $metadata was (bytes read) and what the profile needs
	// of it that is not published: the orders', then the customer returns' (marked
	// Returns).
	MetadataBytes int64
	Missing       []Missing
	// Returns says whether the profile's customer returns are carried over OData:
	// false for a profile that has no return document (ReturnsDocument ""), or
	// when a Missing marked Returns names what to publish.
	Returns         bool
	ReturnsDocument string
	// Marker is the marker field, and its length (0: unlimited or unknown).
	Marker       string
	MarkerLength int
	Refs         []Ref
	// Probe is the Ref_Key probe's outcome; nil when not run.
	Probe *Probe
}

// Problems counts what stops orders from being written: missing fields and
// references that do not resolve. What only the customer returns need (a Missing
// marked Returns) is listed in Missing and not counted: the orders go on without it.
func (r Report) Problems() int {
	n := 0
	for _, m := range r.Missing {
		if !m.Returns {
			n++
		}
	}
	for _, ref := range r.Refs {
		if ref.Problem != "" {
			n++
		}
	}
	return n
}

// Probe is what the write probe found: whether the base keeps a client's Ref_Key
// on create.
type Probe struct {
	KeepsRefKey bool
	Number      string // the probe document's number
	Deleted     bool   // the probe document was deleted again
	Note        string
}

// refsOf lists the configured references with the catalog each is of.
func (c *Client) refsOf() []Ref {
	cat := c.p.Catalogs
	var out []Ref
	add := func(key, set, guid string) {
		if guid != "" && set != "" {
			out = append(out, Ref{Key: key, Set: set, GUID: guid})
		}
	}
	add("onec.odata.organization", cat.Organization, c.cfg.Organization)
	add("onec.odata.warehouse", cat.Warehouse, c.cfg.Warehouse)
	add("onec.odata.currency", cat.Currency, c.cfg.Currency)
	add("onec.odata.price_type", cat.PriceType, c.cfg.PriceType)
	add("onec.odata.cancel_reason", cat.CancelReason, c.cfg.CancelReason)
	add("onec.odata.cancelled_state", cat.State, c.cfg.CancelledState)
	names := make([]string, 0, len(c.cfg.Sources))
	for name := range c.cfg.Sources {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		s := c.cfg.Sources[name]
		key := "onec.odata.sources." + name
		add(key+".partner", cat.Partner, s.Partner)
		add(key+".counterparty", cat.Counterparty, s.Counterparty)
		add(key+".agreement", cat.Agreement, s.Agreement)
	}
	for _, name := range slices.Sorted(maps.Keys(c.cfg.Accounts)) {
		m := c.cfg.Accounts[name]
		key := "connectors." + name + ".onec"
		add(key+".organization", cat.Organization, m.Organization)
		add(key+".warehouse", cat.Warehouse, m.Warehouse)
		add(key+".partner", cat.Partner, m.Partner)
		add(key+".counterparty", cat.Counterparty, m.Counterparty)
		add(key+".agreement", cat.Agreement, m.Agreement)
	}
	return out
}

// Check reads $metadata as a stream and says what the profile needs that is not
// published, resolves every configured reference by its GUID, and, with
// probeWrite, creates one draft document with a Ref_Key of ordersync's and
// deletes it, to tell whether the base keeps a client's Ref_Key. progress, when
// not nil, is told each step before it runs.
func (c *Client) Check(ctx context.Context, probeWrite bool, progress func(string)) (Report, error) {
	say := func(s string) {
		if progress != nil {
			progress(s)
		}
	}
	r := Report{Profile: c.p.Name, Marker: c.p.Marker}
	say("reading $metadata (large on a real base: it is read as a stream)")
	var md Metadata
	n, err := c.stream(ctx, "metadata", c.urls.Root+"/$metadata", func(body io.Reader) error {
		var err error
		md, err = ReadMetadata(body)
		return err
	})
	if err != nil {
		return r, err
	}
	r.MetadataBytes = n
	r.Missing = c.p.Needs(md, c.cfg.ItemsBy)
	returns := c.p.ReturnNeeds(md)
	r.Missing = append(r.Missing, returns...)
	if c.p.Return != nil {
		r.ReturnsDocument, r.Returns = c.p.Return.Document, len(returns) == 0
	}
	r.MarkerLength = md.MaxLength[c.p.Document+"."+c.p.Marker]
	say("resolving the configured references")
	for _, ref := range c.refsOf() {
		if !md.Sets[ref.Set] {
			ref.Problem = ref.Set + " is not published"
		} else {
			ref.Name, ref.Problem, err = c.resolve(ctx, ref.Set, ref.GUID)
			if err != nil {
				return r, err
			}
		}
		r.Refs = append(r.Refs, ref)
	}
	if probeWrite {
		say(fmt.Sprintf("creating one draft %s to see whether the base keeps a client's Ref_Key, and deleting it again", c.p.Document))
		p, err := c.probe(ctx)
		if err != nil {
			return r, err
		}
		r.Probe = &p
	}
	return r, nil
}

// resolve reads one object of set by its GUID: its name, or why it does not do.
func (c *Client) resolve(ctx context.Context, set, guid string) (name, problem string, err error) {
	ans, err := c.get(ctx, "refs", c.urls.Entity(set, guid)+"?$format=json&$select=Description,DeletionMark")
	var oe *onec.Error
	if errors.As(err, &oe) && (oe.Status == http.StatusNotFound || oe.Code == fmt.Sprint(CodeNotFound)) {
		return "", fmt.Sprintf("no object of %s has this GUID", set), nil
	}
	if err != nil {
		return "", "", err
	}
	var v struct {
		Description  string `json:"Description"`
		DeletionMark bool   `json:"DeletionMark"`
	}
	if err := json.Unmarshal(ans.Body, &v); err != nil {
		return "", "", c.notOData("refs", set, ans, err)
	}
	if v.DeletionMark {
		return v.Description, "marked for deletion in 1C", nil
	}
	return v.Description, "", nil
}

// probe creates a draft document with no rows under a Ref_Key of ordersync's,
// reads whether 1C kept it, and deletes the document.
func (c *Client) probe(ctx context.Context) (Probe, error) {
	marker := "ordersync:probe:" + uuid.NewString()[:8]
	want := RefKey(marker)
	body, err := encode(map[string]any{"Ref_Key": want, c.p.Marker: marker, "Date": "0001-01-01T00:00:00", c.p.Rows: []any{}})
	if err != nil {
		return Probe{}, err
	}
	ans, err := c.conn.Do(ctx, c.call("create", http.MethodPost, c.urls.Create(c.p.Document), body))
	if err != nil {
		return Probe{}, fmt.Errorf("the probe's create: %w", err)
	}
	d, err := c.p.Parse(ans.Body)
	if err != nil || d.Ref == "" {
		return Probe{}, fmt.Errorf("the probe's create answered what does not read as a document (%s); look for %s %q in 1C and delete it", onec.Snippet(ans.Body), c.p.Marker, marker)
	}
	p := Probe{KeepsRefKey: d.Ref == want, Number: d.Number}
	if _, err := c.conn.Do(ctx, c.call("delete", http.MethodDelete, c.urls.Entity(c.p.Document, d.Ref), nil)); err != nil {
		p.Note = fmt.Sprintf("the probe document № %s (%s, %s %q) could not be deleted: %v; delete it in 1C", d.Number, d.Ref, c.p.Marker, marker, err)
		return p, nil
	}
	p.Deleted = true
	return p, nil
}

// Candidate is one object `ordersync onec refs` lists.
type Candidate struct {
	GUID, Code, Name string
}

// Refs lists the objects of catalog (Catalog_Партнеры, or Партнеры) whose name
// holds text (all when empty), not marked for deletion, by name: at most limit.
func (c *Client) Refs(ctx context.Context, catalog, text string, limit int) ([]Candidate, error) {
	set := catalog
	if !strings.Contains(set, "_") {
		set = "Catalog_" + set
	}
	filter := "DeletionMark eq false"
	if text != "" {
		filter = "substringof(" + Literal(text) + ", Description) and " + filter
	}
	full, err := c.urls.List(set, Query{Filter: filter, Select: []string{"Ref_Key", "Code", "Description"}, OrderBy: "Description", Top: limit})
	if err != nil {
		return nil, err
	}
	found, err := getPage[struct {
		Ref         string `json:"Ref_Key"`
		Code        any    `json:"Code"`
		Description string `json:"Description"`
	}](ctx, c, "refs", full)
	if err != nil {
		return nil, err
	}
	out := make([]Candidate, len(found))
	for i, v := range found {
		code := ""
		if v.Code != nil {
			code = fmt.Sprint(v.Code)
		}
		out[i] = Candidate{GUID: v.Ref, Code: code, Name: v.Description}
	}
	return out, nil
}
