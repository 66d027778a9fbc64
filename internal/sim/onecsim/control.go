package onecsim

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/ordersync/ordersync/internal/sim"
)

// controlPrefix is where the control endpoints live, outside the publication and
// without authentication, latency or faults:
//
//	GET    /_sim/orders           every order, in creation order (Order JSON)
//	GET    /_sim/returns          every customer return, in creation order (Return JSON)
//	GET    /_sim/stats            Stats
//	POST   /_sim/faults           queue a fault (ControlFault): {"op","kind":"drop_after_create","times","delay":"2s","hold":"4s","external_id"}
//	DELETE /_sim/faults           drop every queued fault
//	POST   /_sim/latency          {"latency":"200ms"}
//	POST   /_sim/known_skus       {"known_skus":["SKU-1",…]}; null accepts every SKU
//	POST   /_sim/stock            {"warehouse":"WH1","items":[{"sku","quantity","price"}]}
//	POST   /_sim/expire_sessions  forget every 1C session
//	POST   /_sim/missing          {"ops":["create"]}: answer 404 HTML for these operations; no ops: every path
//	DELETE /_sim/missing          publish every path again
//	POST   /_sim/down             {"for":"2s"}: answer, then refuse connections for that long
const controlPrefix = "/_sim/"

func (s *OneC) serveControl(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 4<<20))
	if err != nil {
		return
	}
	bad := func(err error) {
		s.writeControl(w, http.StatusBadRequest, map[string]string{"error": err.Error()})
	}
	route := r.Method + " " + strings.TrimSuffix(strings.TrimPrefix(r.URL.Path, controlPrefix), "/")
	switch route {
	case "GET orders":
		s.writeControl(w, http.StatusOK, s.Orders())
	case "GET returns":
		s.writeControl(w, http.StatusOK, s.Returns())
	case "GET stats":
		s.writeControl(w, http.StatusOK, s.Stats())
	case "POST faults":
		var f ControlFault
		if err := json.Unmarshal(body, &f); err != nil {
			bad(err)
			return
		}
		s.Faults.Add(f.count(), f.Fault)
		s.writeControl(w, http.StatusOK, f)
	case "DELETE faults":
		s.Faults.Clear()
		s.writeControl(w, http.StatusOK, map[string]bool{"ok": true})
	case "POST latency":
		var v struct {
			Latency string `json:"latency"`
		}
		if err := json.Unmarshal(body, &v); err != nil {
			bad(err)
			return
		}
		d, err := time.ParseDuration(v.Latency)
		if err != nil || d < 0 {
			bad(fmt.Errorf("latency %q: want a non-negative Go duration such as 200ms", v.Latency))
			return
		}
		s.SetLatency(d)
		s.writeControl(w, http.StatusOK, map[string]string{"latency": d.String()})
	case "POST known_skus":
		var v struct {
			KnownSKUs []string `json:"known_skus"`
		}
		if err := json.Unmarshal(body, &v); err != nil {
			bad(err)
			return
		}
		s.SetKnownSKUs(v.KnownSKUs)
		s.writeControl(w, http.StatusOK, map[string]any{"known_skus": v.KnownSKUs})
	case "POST stock":
		var v struct {
			Warehouse string `json:"warehouse"`
			Items     []struct {
				SKU      string          `json:"sku"`
				Quantity json.RawMessage `json:"quantity"`
				Price    json.RawMessage `json:"price"`
			} `json:"items"`
		}
		if err := json.Unmarshal(body, &v); err != nil {
			bad(err)
			return
		}
		if v.Warehouse == "" {
			bad(fmt.Errorf("warehouse is required"))
			return
		}
		items := make([]StockItem, len(v.Items))
		for i, it := range v.Items {
			q, err := number(it.Quantity)
			if err != nil {
				bad(fmt.Errorf("items[%d].quantity: %w", i, err))
				return
			}
			p, err := number(it.Price)
			if err != nil {
				bad(fmt.Errorf("items[%d].price: %w", i, err))
				return
			}
			items[i] = StockItem{SKU: it.SKU, Quantity: q, Price: p}
		}
		s.SetStock(v.Warehouse, items...)
		s.writeControl(w, http.StatusOK, map[string]int{"items": len(items)})
	case "POST expire_sessions":
		s.ExpireSessions()
		s.writeControl(w, http.StatusOK, map[string]bool{"ok": true})
	case "POST missing":
		var v struct {
			Ops []string `json:"ops"`
		}
		if len(bytes.TrimSpace(body)) > 0 {
			if err := json.Unmarshal(body, &v); err != nil {
				bad(err)
				return
			}
		}
		if err := validateMissing(v.Ops); err != nil {
			bad(err)
			return
		}
		s.setMissing(v.Ops)
		s.writeControl(w, http.StatusOK, map[string]any{"ops": v.Ops})
	case "DELETE missing":
		s.ClearMissing()
		s.writeControl(w, http.StatusOK, map[string]bool{"ok": true})
	case "POST down":
		var v struct {
			For string `json:"for"`
		}
		if err := json.Unmarshal(body, &v); err != nil {
			bad(err)
			return
		}
		d, err := time.ParseDuration(v.For)
		if err != nil || d <= 0 {
			bad(fmt.Errorf("for %q: want a positive Go duration such as 2s", v.For))
			return
		}
		if s.Addr() == "" {
			bad(fmt.Errorf("the simulator was not started with Start: it cannot go down"))
			return
		}
		// Answer completely before the connection is cut by going down.
		b, _ := json.Marshal(map[string]string{"for": d.String()})
		w.Header().Set("Content-Type", "application/json; charset=utf-8")
		w.Header().Set("Content-Length", strconv.Itoa(len(b)))
		w.Header().Set("Connection", "close")
		w.WriteHeader(http.StatusOK)
		w.Write(b)
		if fl, ok := w.(http.Flusher); ok {
			fl.Flush()
		}
		if err := s.DownFor(d); err != nil {
			s.log.Error("1c sim: down", "err", err)
		}
	default:
		s.writeControl(w, http.StatusNotFound, map[string]string{"error": "no control endpoint " + route})
	}
}

func (s *OneC) writeControl(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		panic("sim: 1c: encode control answer: " + err.Error())
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	w.Write(b)
}

// Remote drives a simulated 1C base running in another process through its
// control endpoints.
type Remote struct {
	root string
	hc   *http.Client
}

// NewRemote returns a remote for the simulator serving at serverURL; only the
// scheme and host are used, so the service's base URL works too.
func NewRemote(serverURL string) (*Remote, error) {
	u, err := url.Parse(serverURL)
	if err != nil || u.Host == "" {
		return nil, fmt.Errorf("sim: 1c remote: %q is not an http URL", serverURL)
	}
	return &Remote{root: u.Scheme + "://" + u.Host, hc: &http.Client{Timeout: 30 * time.Second}}, nil
}

// Orders returns every order the simulator holds, Request parsed from Body.
func (c *Remote) Orders(ctx context.Context) ([]Order, error) {
	var out []Order
	if err := c.do(ctx, http.MethodGet, "orders", nil, &out); err != nil {
		return nil, err
	}
	for i := range out {
		if req, _, problem := parseCreate(out[i].Body); problem == nil {
			out[i].Request = req
		}
	}
	return out, nil
}

// CountExternal is the number of orders holding externalID.
func (c *Remote) CountExternal(ctx context.Context, externalID string) (int, error) {
	orders, err := c.Orders(ctx)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, o := range orders {
		if o.ExternalID == externalID {
			n++
		}
	}
	return n, nil
}

// Stats returns the simulator's counters.
func (c *Remote) Stats(ctx context.Context) (Stats, error) {
	var st Stats
	err := c.do(ctx, http.MethodGet, "stats", nil, &st)
	return st, err
}

// AddFaults queues f for the next n requests it matches (sim.Forever: every one),
// as OneC.Faults.Add does; n = 0 queues nothing.
func (c *Remote) AddFaults(ctx context.Context, n int, f sim.Fault) error {
	if n == 0 {
		return nil
	}
	return c.do(ctx, http.MethodPost, "faults", ControlFault{Fault: f, Times: n}, nil)
}

// ClearFaults drops every queued fault.
func (c *Remote) ClearFaults(ctx context.Context) error {
	return c.do(ctx, http.MethodDelete, "faults", nil, nil)
}

// SetLatency changes the latency added to every request.
func (c *Remote) SetLatency(ctx context.Context, d time.Duration) error {
	return c.do(ctx, http.MethodPost, "latency", map[string]string{"latency": d.String()}, nil)
}

// SetKnownSKUs replaces the catalogue; nil accepts every SKU.
func (c *Remote) SetKnownSKUs(ctx context.Context, skus []string) error {
	return c.do(ctx, http.MethodPost, "known_skus", map[string][]string{"known_skus": skus}, nil)
}

// SetStock sets what GET /stock answers for warehouse.
func (c *Remote) SetStock(ctx context.Context, warehouse string, items ...StockItem) error {
	wire := stockWire{Warehouse: warehouse, Items: make([]stockItemWire, len(items))}
	for i, it := range items {
		wire.Items[i] = stockItemWire{SKU: it.SKU, Quantity: exact(it.Quantity), Price: exact(it.Price)}
	}
	return c.do(ctx, http.MethodPost, "stock", wire, nil)
}

// ExpireSessions makes the simulator forget every 1C session.
func (c *Remote) ExpireSessions(ctx context.Context) error {
	return c.do(ctx, http.MethodPost, "expire_sessions", nil, nil)
}

// SetMissing makes the simulator answer 404 with a web server's HTML page for the
// named operations, or for every path when none is named, until ClearMissing.
func (c *Remote) SetMissing(ctx context.Context, ops ...string) error {
	if ops == nil {
		ops = []string{}
	}
	return c.do(ctx, http.MethodPost, "missing", map[string][]string{"ops": ops}, nil)
}

// ClearMissing publishes every path again.
func (c *Remote) ClearMissing(ctx context.Context) error {
	return c.do(ctx, http.MethodDelete, "missing", nil, nil)
}

// DownFor makes the simulator refuse connections for d, from just after it
// answers; it must have been started with Start.
func (c *Remote) DownFor(ctx context.Context, d time.Duration) error {
	return c.do(ctx, http.MethodPost, "down", map[string]string{"for": d.String()}, nil)
}

func (c *Remote) do(ctx context.Context, method, endpoint string, in, out any) error {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return fmt.Errorf("sim: 1c remote %s: %w", endpoint, err)
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.root+controlPrefix+endpoint, body)
	if err != nil {
		return fmt.Errorf("sim: 1c remote %s: %w", endpoint, err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.hc.Do(req)
	if err != nil {
		return fmt.Errorf("sim: 1c remote %s: %w", endpoint, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return fmt.Errorf("sim: 1c remote %s: %w", endpoint, err)
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("sim: 1c remote %s: HTTP %d: %s", endpoint, resp.StatusCode, bytes.TrimSpace(b))
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			return fmt.Errorf("sim: 1c remote %s: decode: %w", endpoint, err)
		}
	}
	return nil
}
