package metrics

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"time"

	"github.com/ordersync/ordersync/internal/onec"
)

// OneCStatus is what the calls to 1C say of it: the last call that ended decides.
type OneCStatus struct {
	// Known is false until a call has ended that says something about 1C (a call cut
	// short by its own context says nothing).
	Known bool
	// Up: that call was answered by 1C (successfully, or refused for the order's
	// sake, or busy). Down: 1C could not be reached (no answer, 502, 503, 504), or
	// it refused the credentials or the publication is missing.
	Up       bool
	At       time.Time // when that call ended
	Endpoint string    // ping, find, create, cancel, stock, list, settle, find_returns, create_return
	// Reason says why 1C is taken for down: the error of the call.
	Reason string
	// LastUp is when a call was last answered; zero when none was.
	LastUp time.Time
}

type onecTracker struct {
	mu sync.Mutex
	st OneCStatus
}

// OneC returns what the calls through Client said of 1C last.
func (m *Metrics) OneC() OneCStatus {
	m.onec.mu.Lock()
	defer m.onec.mu.Unlock()
	return m.onec.st
}

// Client wraps c so that each call is timed into
// ordersync_onec_request_duration_seconds and its outcome sets ordersync_onec_up
// and what OneC returns. Give the engine (and anything else that calls 1C in the
// service) the wrapped client.
func (m *Metrics) Client(c onec.Client) onec.Client { return &timedClient{Client: c, m: m} }

type timedClient struct {
	onec.Client
	m *Metrics
}

func (c *timedClient) Ping(ctx context.Context) (onec.Info, error) {
	start := time.Now()
	v, err := c.Client.Ping(ctx)
	c.m.observe(ctx, "ping", start, err)
	return v, err
}

func (c *timedClient) FindOrders(ctx context.Context, externalID string) ([]onec.Order, error) {
	start := time.Now()
	v, err := c.Client.FindOrders(ctx, externalID)
	c.m.observe(ctx, "find", start, err)
	return v, err
}

func (c *timedClient) CreateOrder(ctx context.Context, req onec.CreateOrder) (onec.Created, error) {
	start := time.Now()
	v, err := c.Client.CreateOrder(ctx, req)
	c.m.observe(ctx, "create", start, err)
	return v, err
}

func (c *timedClient) CancelOrder(ctx context.Context, externalID, reason string) (onec.Cancelled, error) {
	start := time.Now()
	v, err := c.Client.CancelOrder(ctx, externalID, reason)
	c.m.observe(ctx, "cancel", start, err)
	return v, err
}

func (c *timedClient) Stock(ctx context.Context, warehouse string) (onec.Stock, error) {
	start := time.Now()
	v, err := c.Client.Stock(ctx, warehouse)
	c.m.observe(ctx, "stock", start, err)
	return v, err
}

func (c *timedClient) ListOrders(ctx context.Context, q onec.ListQuery) ([]onec.Order, error) {
	start := time.Now()
	v, err := c.Client.ListOrders(ctx, q)
	c.m.observe(ctx, "list", start, err)
	return v, err
}

func (c *timedClient) SettleOrder(ctx context.Context, o onec.Order, req onec.CreateOrder) error {
	start := time.Now()
	err := c.Client.SettleOrder(ctx, o, req)
	c.m.observe(ctx, "settle", start, err)
	return err
}

func (c *timedClient) SettleReturn(ctx context.Context, r onec.Return, req onec.CreateReturn) error {
	start := time.Now()
	err := c.Client.SettleReturn(ctx, r, req)
	c.m.observe(ctx, "settle_return", start, err)
	return err
}

func (c *timedClient) FindReturns(ctx context.Context, externalID string) ([]onec.Return, error) {
	start := time.Now()
	v, err := c.Client.FindReturns(ctx, externalID)
	c.m.observe(ctx, "find_returns", start, err)
	return v, err
}

func (c *timedClient) CreateReturn(ctx context.Context, req onec.CreateReturn) (onec.Created, error) {
	start := time.Now()
	v, err := c.Client.CreateReturn(ctx, req)
	c.m.observe(ctx, "create_return", start, err)
	return v, err
}

// observe records one call.
func (m *Metrics) observe(ctx context.Context, endpoint string, start time.Time, err error) {
	end := time.Now()
	outcome := "ok"
	up, reason := true, ""
	switch {
	case err == nil:
	case errors.Is(ctx.Err(), context.Canceled):
		outcome = "canceled"
	case ctx.Err() != nil:
		// The caller's deadline passed first: 1C did not answer in time (or every
		// onec.max_concurrency slot stayed busy that long).
		outcome = "timeout"
		up, reason = false, "no answer within the call's deadline: "+err.Error()
	default:
		outcome = classLabel(onec.ClassOf(err))
		up, reason = judge(err)
	}
	m.onecDuration.WithLabelValues(endpoint, outcome).Observe(end.Sub(start).Seconds())
	if outcome == "canceled" {
		return // cut short by its caller (a stop): says nothing of 1C
	}
	m.onec.mu.Lock()
	defer m.onec.mu.Unlock()
	st := &m.onec.st
	st.Known, st.Up, st.At, st.Endpoint, st.Reason = true, up, end, endpoint, reason
	if up {
		st.LastUp = end
		m.onecUp.Set(1)
	} else {
		m.onecUp.Set(0)
	}
}

// judge tells whether a call's outcome means 1C answers, and if not, why.
func judge(err error) (up bool, reason string) {
	if err == nil {
		return true, ""
	}
	var e *onec.Error
	if !errors.As(err, &e) {
		return false, err.Error()
	}
	if e.PerOrder {
		return true, "" // 1C answered about this order alone
	}
	switch e.Class {
	case onec.Configuration, onec.Auth:
		return false, err.Error()
	case onec.Permanent:
		return true, "" // 1C's own refusal of one request
	}
	switch e.Status {
	case 0, http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return false, err.Error() // no answer, or a proxy that has none from 1C
	}
	return true, "" // 406 no free session, 429, a lock conflict, a 500: 1C is there
}

func classLabel(c onec.Class) string {
	switch c {
	case onec.Transient:
		return "transient"
	case onec.Unknown:
		return "unknown"
	case onec.Permanent:
		return "permanent"
	case onec.Auth:
		return "auth"
	case onec.Configuration:
		return "configuration"
	default:
		return "other"
	}
}

// Pinger pings 1C through a client (the wrapped one, so that each ping counts)
// every interval, at once first, each ping bounded by timeout, until ctx ends. It
// keeps OneC current while nothing else calls 1C.
func Pinger(ctx context.Context, c onec.Client, interval, timeout time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		pctx, cancel := context.WithTimeout(ctx, timeout)
		c.Ping(pctx)
		cancel()
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
