// Package service owns the stock use cases that the command line and the pages
// share: taking snapshots by hand now (their slot times, their registration, their
// run, and the wait for their publishes, delivered in the foreground when no
// service delivers them), finding a snapshot by key or by the time it was in
// force, comparing two snapshots item by item, and the stock status (each
// schedule's last and next slot, its pending snapshots and last failure, each
// marketplace's last publish, the Kaspi feed's snapshots, the items not
// published). It reads and writes through the journal and the stock store it is
// given; parsing flags, wiring the engine and the relay, and printing are its
// callers'.
package service

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/ordersync/ordersync/internal/journal"
	"github.com/ordersync/ordersync/internal/stock"
	"github.com/ordersync/ordersync/internal/stock/scheduler"
)

// Journal is what the service needs of the journal: registering manual snapshots,
// and reading whether a key is taken.
type Journal interface {
	Register(ctx context.Context, op journal.NewOperation) (journal.Registration, error)
	Get(ctx context.Context, key string) (journal.Operation, error)
}

// Store is what the service reads of the stock store.
type Store interface {
	Snapshot(ctx context.Context, key string) (stock.Snapshot, error)
	Latest(ctx context.Context, warehouse string, at time.Time) (stock.Snapshot, error)
	Snapshots(ctx context.Context, f stock.Filter) ([]stock.Snapshot, error)
	Items(ctx context.Context, key string) ([]stock.Item, error)
	Publishes(ctx context.Context, f stock.PublishFilter) ([]stock.Publish, error)
	Problems(ctx context.Context, marketplace string, limit int) ([]stock.ItemState, error)
	ScheduleRuns(ctx context.Context, schedule, warehouse string) (stock.ScheduleRuns, error)
	States(ctx context.Context, marketplace, warehouse string) (map[string]stock.ItemState, error)
}

// Relay delivers due outbox events, one round at a time (outbox.Relay.RunOnce): how
// many it delivered.
type Relay interface {
	RunOnce(ctx context.Context) (int, error)
}

// Config is what a Service is made of.
type Config struct {
	Journal Journal
	Stock   Store
	// Location is stock.timezone: manual slots are labelled in it, and times
	// without a zone are read in it.
	Location *time.Location
	// Schedules are stock.schedules.
	Schedules []scheduler.Schedule
	// Warehouses are the warehouses configured (a schedule's or a marketplace's),
	// sorted: a lookup without a warehouse picks from them.
	Warehouses []string
	// PublishTo is where a manual snapshot of a warehouse goes without a schedule:
	// the enabled marketplaces that map it (nil: nowhere).
	PublishTo func(warehouse string) []string
	// KaspiStores are the warehouses the Kaspi feed serves, to its store ids (nil:
	// Kaspi is not enabled).
	KaspiStores map[string]string
	// KaspiSKUs are the Kaspi SKUs the SKU map gives a 1C SKU, for the items the
	// Kaspi feed leaves out (none); nil: no SKU map, every 1C SKU is its own.
	// KaspiSKUMap names the map's file in the reason given.
	KaspiSKUs   func(onecSKU string) []string
	KaspiSKUMap string
	// Run carries out the operations of keys now and returns them as they ended,
	// in order (the engine here, or a running service).
	Run func(ctx context.Context, keys []string) ([]journal.Operation, error)
	// Relay returns the relay that delivers the snapshots' publishing events in the
	// foreground, or nil (an interface holding no value) when a running service
	// delivers them. It is called once a snapshot taken has a publish to wait for;
	// a nil Relay func: a service delivers them.
	Relay func() (Relay, error)
	// Accounts are the enabled accounts stock may be published to, by name, in the
	// configuration's order; nil: stock.Marketplaces.
	Accounts []string
	// Reserves are stock.reserve, for SKU.
	Reserves stock.Reserves
	// Pending reads what the orders not yet in 1C hold of a warehouse, for SKU
	// (stock.ReadPending over the journal); nil: nothing is pending.
	Pending func(ctx context.Context, warehouse string) (stock.Pending, error)
	// ReadBack returns the reader of a marketplace whose sender can read its stock
	// back, nil (or a nil func) when it cannot: SKU shows no reading then.
	ReadBack func(marketplace string) stock.Reader
	// Now is the clock; nil: time.Now.
	Now func() time.Time
}

// Service is the stock use cases over one journal and stock store.
type Service struct {
	cfg Config
}

// New returns the service of cfg.
func New(cfg Config) *Service {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Location == nil {
		cfg.Location = time.UTC
	}
	if cfg.PublishTo == nil {
		cfg.PublishTo = func(string) []string { return []string{} }
	}
	return &Service{cfg: cfg}
}

// Location is stock.timezone, as the service reads and labels times.
func (s *Service) Location() *time.Location { return s.cfg.Location }

// Warehouses are the warehouses configured, sorted.
func (s *Service) Warehouses() []string { return slices.Clone(s.cfg.Warehouses) }

// TimeError is a time that does not read as one.
type TimeError struct {
	Text     string
	Location *time.Location
}

func (e *TimeError) Error() string {
	return fmt.Sprintf("%q is not a time: give 2026-09-16T10:00 (in %s), 2026-09-16, or an RFC 3339 time", e.Text, e.Location)
}

// WarehouseError is a lookup by time that names no single warehouse: Warehouses
// are those it could mean.
type WarehouseError struct {
	Ref        string
	Warehouses []string
}

func (e *WarehouseError) Error() string {
	return fmt.Sprintf("%s: name one warehouse (one of %s) to pick a snapshot by time", e.Ref, strings.Join(e.Warehouses, ", "))
}

// NotFoundError is a lookup that found no snapshot: of the key Ref (Warehouse ""),
// or of Warehouse at or before the time Ref. It is a stock.ErrNoSnapshot.
type NotFoundError struct {
	Ref, Warehouse string
}

func (e *NotFoundError) Error() string {
	if e.Warehouse == "" {
		return fmt.Sprintf("no snapshot %s is stored", e.Ref)
	}
	return fmt.Sprintf("no snapshot of %s at or before %s", e.Warehouse, e.Ref)
}

func (e *NotFoundError) Unwrap() error { return stock.ErrNoSnapshot }
