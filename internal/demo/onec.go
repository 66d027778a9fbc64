package demo

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/shopspring/decimal"

	"github.com/ordersync/ordersync/internal/config"
	"github.com/ordersync/ordersync/internal/sim"
	"github.com/ordersync/ordersync/internal/sim/odatasim"
	"github.com/ordersync/ordersync/internal/sim/onecsim"
)

// The simulated 1C the script plays against: the base's ordersync HTTP service
// (onecsim, contract v1) or its standard OData interface (odatasim, profile ut11).
// The script is written once against oneC; each says how the service reaches it,
// counts its orders by the marker ordersync writes (<source>:<external_id>), and
// plays the script's 1C troubles as its own closest faults.

// The interfaces of `demo --onec`: onec.interface's.
const (
	HTTPService = config.InterfaceHTTPService
	OData       = config.InterfaceOData
)

// Interfaces are the values `demo --onec` takes, the default first.
var Interfaces = []string{HTTPService, OData}

// trouble is one of the script's 1C faults, on the create of one order.
type trouble int

const (
	// lostReply: 1C creates the order and the connection drops before the answer.
	lostReply trouble = iota
	// busy: 1C has no free session; nothing is created, the answer is transient.
	busy
	// garbled: an answer the client cannot use. The HTTP service's lock conflict
	// (500, nothing created); over OData a 201 whose Location is mangled and whose
	// body is cut short (the order created).
	garbled
	// stall: the create takes longer than onec.timeout, and 1C finishes it after
	// the client has gone.
	stall
)

// queueTrouble queues on q table's fault for t, on the next n creates of the
// order marker.
func queueTrouble(q *sim.Faults, table map[trouble]sim.Fault, t trouble, n int, marker string) {
	f, ok := table[t]
	if !ok {
		panic(fmt.Sprintf("demo: no fault for trouble %d", t)) // a mistake in the script
	}
	f.Op, f.ExternalID = "create", marker
	q.Add(n, f)
}

// oneCOrder is an order 1C holds, as the verdict reads it.
type oneCOrder struct {
	marker    string // <source>:<external_id>
	cancelled bool
}

// oneC is the simulated 1C.
type oneC interface {
	Start(addr string) error
	Close()
	// name is the interface, as --onec names it; about says it for a person,
	// after "1C over"; markerField is where 1C holds the marker.
	name() string
	about() string
	markerField() string
	// environ is the service's onec.* configuration but onec.timeout and the
	// other timings, which the script sets for both.
	environ() []string
	// count is how many orders hold marker; orders are all of them.
	count(marker string) int
	orders() []oneCOrder
	// returnCount is how many customer returns hold marker (a return's 1C
	// external id, <source>:return:<id>); returnMarkers are the markers of all
	// of them, one per return.
	returnCount(marker string) int
	returnMarkers() []string
	// returnBases are the markers of the orders the returns holding marker are
	// based on, one per return ("" for a base 1C holds no order of).
	returnBases(marker string) []string
	// fault queues trouble t for the next n creates of the order marker;
	// pendingFaults is how many queued faults have not fired out; troubles is the
	// title of the step of the busy and garbled ones.
	fault(t trouble, n int, marker string)
	pendingFaults() int
	troubles() string
	// waitIdle waits, at most within, until 1C does nothing its client has
	// given up on.
	waitIdle(ctx context.Context, within time.Duration) error
	// warehouse is the stock schedule's warehouse: the stock is set there, and
	// snapshot is what a snapshot of it reads of items.
	warehouse() string
	setStock(items []onecsim.StockItem)
	snapshot(items []onecsim.StockItem) []onecsim.StockItem
	// where is --keep's line of the 1C simulator.
	where() string
}

// newOneC is the simulated 1C of interface iface, not started, with the items
// and the sources the script's orders name.
func newOneC(iface string, skus, sources []string) (oneC, error) {
	switch iface {
	case HTTPService, "":
		return &serviceOneC{sim: onecsim.New(onecsim.Options{Username: oneCUser, Password: oneCPassword})}, nil
	case OData:
		return newODataOneC(skus, sources), nil
	}
	return nil, fmt.Errorf("no 1C interface %q (%s, %s)", iface, HTTPService, OData)
}

// serviceOneC is 1C's ordersync HTTP service: contract v1.
type serviceOneC struct{ sim *onecsim.OneC }

func (s *serviceOneC) Start(addr string) error { return s.sim.Start(addr) }
func (s *serviceOneC) Close()                  { s.sim.Close() }
func (s *serviceOneC) name() string            { return HTTPService }
func (s *serviceOneC) about() string           { return "its ordersync HTTP service, contract v1" }
func (s *serviceOneC) markerField() string     { return "external_id" }

func (s *serviceOneC) environ() []string {
	return []string{
		"ORDERSYNC_ONEC__BASE_URL=" + s.sim.URL(),
		"ORDERSYNC_ONEC__USERNAME=" + oneCUser,
		"ORDERSYNC_ONEC__PASSWORD=" + oneCPassword,
	}
}

func (s *serviceOneC) count(marker string) int { return s.sim.CountExternal(marker) }

func (s *serviceOneC) orders() []oneCOrder {
	var out []oneCOrder
	for _, o := range s.sim.Orders() {
		out = append(out, oneCOrder{marker: o.ExternalID, cancelled: o.Cancelled})
	}
	return out
}

func (s *serviceOneC) returnCount(marker string) int { return s.sim.CountReturnsExternal(marker) }

func (s *serviceOneC) returnMarkers() []string {
	var out []string
	for _, r := range s.sim.Returns() {
		out = append(out, r.ExternalID)
	}
	return out
}

func (s *serviceOneC) returnBases(marker string) []string {
	byRef := map[string]string{}
	for _, o := range s.sim.Orders() {
		byRef[o.Ref] = o.ExternalID
	}
	var out []string
	for _, r := range s.sim.Returns() {
		if r.ExternalID == marker {
			out = append(out, byRef[r.OrderRef])
		}
	}
	return out
}

// serviceTroubles are the HTTP service's faults for the script's troubles.
var serviceTroubles = map[trouble]sim.Fault{
	lostReply: {Kind: onecsim.DropAfterCreate},
	busy:      {Status: 406}, // no free 1C session
	garbled:   {Kind: onecsim.LockConflict500},
	stall:     {Kind: onecsim.Stall}, // until the client goes away
}

func (s *serviceOneC) fault(t trouble, n int, marker string) {
	queueTrouble(s.sim.Faults, serviceTroubles, t, n, marker)
}

func (s *serviceOneC) pendingFaults() int { return s.sim.Faults.Pending() }
func (s *serviceOneC) troubles() string   { return "no free 1C session and a lock conflict" }

func (s *serviceOneC) waitIdle(ctx context.Context, within time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, within)
	defer cancel()
	return s.sim.WaitIdle(ctx)
}

func (s *serviceOneC) warehouse() string { return "WH1" }

func (s *serviceOneC) setStock(items []onecsim.StockItem) { s.sim.SetStock(s.warehouse(), items...) }

// snapshot: the service answers every item of the warehouse, with its price.
func (s *serviceOneC) snapshot(items []onecsim.StockItem) []onecsim.StockItem { return items }

func (s *serviceOneC) where() string {
	return fmt.Sprintf("%s   (Basic %s / %s; orders: http://%s/_sim/orders)", s.sim.URL(), oneCUser, oneCPassword, s.sim.Addr())
}

// odataOneC is the base's standard OData interface, УТ 11, seeded with what the
// service is configured with: an organization, a warehouse, a currency, each
// source's partner, counterparty and agreement, and an item per SKU.
type odataOneC struct {
	sim  *odatasim.Server
	base odatasim.Base
	slow []string // markers given a slow create: 1C commits them after their client gave up
}

// slowCreate is how long the stalled create takes: longer than onec.timeout, so
// that the service, had it lived, would have given up; shorter than the time
// after which the restarted service takes the killed attempt over (3 ×
// onec.timeout + onec.settle_time), so that 1C holds the order by then.
const slowCreate = 2 * oneCTimeout

func newODataOneC(skus, sources []string) *odataOneC {
	s := odatasim.New(odatasim.Options{Profile: "ut11", Username: oneCUser, Password: oneCPassword})
	return &odataOneC{sim: s, base: s.Seed(sources, skus)}
}

func (o *odataOneC) Start(addr string) error { return o.sim.Start(addr) }
func (o *odataOneC) Close()                  { o.sim.Close() }
func (o *odataOneC) name() string            { return OData }
func (o *odataOneC) about() string           { return "its standard OData interface, УТ 11" }
func (o *odataOneC) markerField() string     { return o.sim.MarkerField() }

func (o *odataOneC) environ() []string {
	return append(o.base.Environ(o.sim.URL()),
		"ORDERSYNC_ONEC__USERNAME="+oneCUser,
		"ORDERSYNC_ONEC__PASSWORD="+oneCPassword)
}

func (o *odataOneC) count(marker string) int { return o.sim.CountMarker(marker) }

// orders: an order of УТ is cancelled when every row of its goods is.
func (o *odataOneC) orders() []oneCOrder {
	var out []oneCOrder
	for _, d := range o.sim.Orders() {
		marker, _ := d[o.sim.MarkerField()].(string)
		rows, _ := d[o.sim.RowsPart()].([]any)
		cancelled := len(rows) > 0
		for _, r := range rows {
			if row, _ := r.(map[string]any); row["Отменено"] != true {
				cancelled = false
			}
		}
		out = append(out, oneCOrder{marker: marker, cancelled: cancelled})
	}
	return out
}

// returnCount: a customer return of УТ holds the marker in its incoming
// document number.
func (o *odataOneC) returnCount(marker string) int { return o.sim.CountReturns(marker) }

func (o *odataOneC) returnMarkers() []string {
	var out []string
	for _, d := range o.sim.Returns() {
		marker, _ := d[odatasim.ReturnMarker].(string)
		out = append(out, marker)
	}
	return out
}

// returnBases: a customer return refers to its order by the order's Ref_Key.
func (o *odataOneC) returnBases(marker string) []string {
	byRef := map[string]string{}
	for _, d := range o.sim.Orders() {
		ref, _ := d["Ref_Key"].(string)
		m, _ := d[o.sim.MarkerField()].(string)
		byRef[ref] = m
	}
	var out []string
	for _, d := range o.sim.Returns() {
		if d[odatasim.ReturnMarker] == marker {
			ref, _ := d[odatasim.ReturnBasis].(string)
			out = append(out, byRef[ref])
		}
	}
	return out
}

// odataTroubles are the standard interface's closest faults.
var odataTroubles = map[trouble]sim.Fault{
	lostReply: {Kind: odatasim.DropAfterCreate},
	// What the client retries after a backoff: a 503 to a create would leave its
	// outcome unknown, to be looked up first.
	busy:    {Status: 429},
	garbled: {Kind: odatasim.MangledLocation},
	stall:   {Kind: odatasim.SlowCreate, Delay: slowCreate},
}

func (o *odataOneC) fault(t trouble, n int, marker string) {
	if t == stall {
		o.slow = append(o.slow, marker)
	}
	queueTrouble(o.sim.Faults, odataTroubles, t, n, marker)
}

func (o *odataOneC) pendingFaults() int { return o.sim.Faults.Pending() }

func (o *odataOneC) troubles() string {
	return "1C busy (429) and a create answered with a mangled Location"
}

// waitIdle: the only work the simulated base does for a client that has gone is
// a slow create, which it commits after its delay.
func (o *odataOneC) waitIdle(ctx context.Context, within time.Duration) error {
	return poll(ctx, within, "1C to commit the slow creates", func() (bool, error) {
		for _, m := range o.slow {
			if o.sim.CountMarker(m) == 0 {
				return false, nil
			}
		}
		return true, nil
	}, nil)
}

// warehouse: over OData a snapshot's warehouse is the Склад's GUID.
func (o *odataOneC) warehouse() string { return o.base.Warehouse }

func (o *odataOneC) setStock(items []onecsim.StockItem) {
	for _, it := range items {
		ref, ok := o.base.Items[it.SKU]
		if !ok {
			panic("demo: stock of " + it.SKU + ", which is not among demoSKUs") // a mistake in the script
		}
		o.sim.SetStock(o.base.Warehouse, ref, it.Quantity.String())
	}
}

// snapshot: the register's Balance lists no item the warehouse has none of, and
// the prices come from a price register read only with onec.odata.price_type,
// which the demo leaves unset.
func (o *odataOneC) snapshot(items []onecsim.StockItem) []onecsim.StockItem {
	// Every item of the catalog, those the warehouse has none of at 0 (the client
	// lists the items the register has no balance of); no prices without
	// onec.odata.price_type.
	out := make([]onecsim.StockItem, 0, len(o.base.Items))
	for _, it := range items {
		out = append(out, onecsim.StockItem{SKU: it.SKU, Quantity: it.Quantity, Price: decimal.Zero})
	}
	for _, sku := range slices.Sorted(maps.Keys(o.base.Items)) {
		if !slices.ContainsFunc(items, func(it onecsim.StockItem) bool { return it.SKU == sku }) {
			out = append(out, onecsim.StockItem{SKU: sku, Quantity: decimal.Zero, Price: decimal.Zero})
		}
	}
	return out
}

func (o *odataOneC) where() string {
	return fmt.Sprintf("%s   (Basic %s / %s; orders: %s/%s?$format=json)", o.sim.URL(), oneCUser, oneCPassword,
		o.sim.URL(), o.sim.OrderSet())
}
