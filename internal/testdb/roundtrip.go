package testdb

import (
	"context"
	"net"
	"sync"
	"sync/atomic"

	"github.com/jackc/pgx/v5/pgxpool"
)

// RoundTrips counts database round trips on every connection of the pools it is
// installed in: a round trip is a burst of client writes that follows a read from the
// server (or opens the connection). Batches and pipelines therefore count once; the
// connection's start-up (TLS, authentication) counts too, so measure after a warm-up
// and Reset. Measure one sequence at a time: the counter is shared by all connections.
//
//	var rt testdb.RoundTrips
//	db, _ := postgres.Open(ctx, postgres.Config{URL: testdb.URL(t), ConfigurePool: rt.Install})
//	rt.Reset(); …; t.Logf("round trips: %d", rt.Count())
type RoundTrips struct {
	n atomic.Int64

	mu    sync.Mutex
	conns []*atomic.Int64 // per connection, in the order they were opened
}

// Install wraps the pool's dialer so that its connections are counted. Its signature
// fits postgres.Config.ConfigurePool.
func (r *RoundTrips) Install(cfg *pgxpool.Config) {
	dial := cfg.ConnConfig.DialFunc
	if dial == nil {
		var d net.Dialer
		dial = d.DialContext
	}
	cfg.ConnConfig.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		per := new(atomic.Int64)
		r.mu.Lock()
		r.conns = append(r.conns, per)
		r.mu.Unlock()
		return &countingConn{Conn: c, n: &r.n, per: per, afterRead: true}, nil
	}
}

// Count is the number of round trips since the last Reset.
func (r *RoundTrips) Count() int64 { return r.n.Load() }

// PerConn is the round trips since the last Reset of each connection that made any,
// in the order the connections were opened: a claim shows as [1 1], one round trip
// on the claim's connection and one on the attempt's.
func (r *RoundTrips) PerConn() []int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []int64
	for _, c := range r.conns {
		if n := c.Load(); n > 0 {
			out = append(out, n)
		}
	}
	return out
}

// Reset sets the counts to zero.
func (r *RoundTrips) Reset() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.n.Store(0)
	for _, c := range r.conns {
		c.Store(0)
	}
}

// Measure resets the counter, runs fn and returns the round trips it made.
func (r *RoundTrips) Measure(fn func()) int64 {
	r.Reset()
	fn()
	return r.Count()
}

type countingConn struct {
	net.Conn
	n, per *atomic.Int64

	mu        sync.Mutex
	afterRead bool // the next write starts a round trip
}

func (c *countingConn) Write(b []byte) (int, error) {
	c.mu.Lock()
	if c.afterRead && len(b) > 0 {
		c.afterRead = false
		c.n.Add(1)
		c.per.Add(1)
	}
	c.mu.Unlock()
	return c.Conn.Write(b)
}

func (c *countingConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	if n > 0 {
		c.mu.Lock()
		c.afterRead = true
		c.mu.Unlock()
	}
	return n, err
}
