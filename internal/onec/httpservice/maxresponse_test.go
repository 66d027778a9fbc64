package httpservice

import (
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"net/http"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ordersync/ordersync/internal/onec"
	"github.com/ordersync/ordersync/internal/onec/wire"
)

const (
	mib        = 1 << 20
	hugeAnswer = 256 * mib
)

// findOrder is one order of a find answer, followed by a comma.
const findOrder = `{"ref":"5a1f","number":"ЗК-000123","date":"2026-09-16T10:00:00","external_id":"kaspi:1","posted":true,"deleted":false},`

// streamFind writes a find answer of about size bytes, generated as it goes (one
// chunk, written again and again), and adds what it wrote to sent. It stops at the
// first failed write: the client hung up.
func streamFind(w io.Writer, size int64, sent *atomic.Int64) {
	chunk := []byte(strings.Repeat(findOrder, 64<<10/len(findOrder)))
	write := func(b []byte) bool {
		n, err := w.Write(b)
		sent.Add(int64(n))
		return err == nil
	}
	if !write([]byte(`{"orders":[`)) {
		return
	}
	for n := int64(0); n < size; n += int64(len(chunk)) {
		if !write(chunk) {
			return
		}
	}
	write([]byte(`{"ref":"last","number":"1","date":"2026-09-16T10:00:00","external_id":"kaspi:1","posted":true,"deleted":false}]}`))
}

// exactFind is a find answer of exactly size bytes (whitespace pads it).
func exactFind(size int) []byte {
	b := []byte(`{"orders":[` + strings.TrimSuffix(findOrder, ",") + `]}`)
	return append(b, bytes.Repeat([]byte(" "), size-len(b))...)
}

// allocated is what runtime.MemStats.TotalAlloc grew by while f ran.
func allocated(f func()) uint64 {
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// TestHugeAnswerIsNotRead streams a 256 MiB find answer to a client whose
// onec.max_response is 1 MiB. The call fails naming the limit, and allocates a
// small fraction of the answer: it is never read whole. Not parallel, so that the
// allocation figure is this call's.
func TestHugeAnswerIsNotRead(t *testing.T) {
	for _, tc := range []struct {
		name string
		how  string // "chunked", "content-length" or "gzip"
	}{
		{"chunked, no Content-Length", "chunked"},
		{"Content-Length announced", "content-length"},
		{"gzip that inflates to 256 MiB", "gzip"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var sent atomic.Int64
			var smallCookie atomic.Value
			done := make(chan struct{}, 4)
			srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
				defer func() { done <- struct{}{} }()
				w.Header().Set("Content-Type", "application/json")
				if r.URL.Query().Get("external_id") == "small" {
					if c, err := r.Cookie("ibsession"); err == nil {
						smallCookie.Store(c.Value)
					}
					io.WriteString(w, `{"orders":[]}`)
					return
				}
				if r.Header.Get("IBSession") == "start" {
					http.SetCookie(w, &http.Cookie{Name: "ibsession", Value: "big-session"})
				}
				switch tc.how {
				case "content-length":
					w.Header().Set("Content-Length", strconv.Itoa(hugeAnswer))
					streamFind(w, hugeAnswer-200, &sent)
				case "gzip":
					w.Header().Set("Content-Encoding", "gzip")
					zw := gzip.NewWriter(w)
					streamFind(zw, hugeAnswer, &sent)
					zw.Close()
				default:
					streamFind(w, hugeAnswer, &sent)
				}
			})
			c := newClient(t, srv.URL, func(c *Config) {
				c.MaxResponse = mib
				c.MaxConcurrency = 1
				c.SessionReuse = true
				c.Timeout = 30 * time.Second
			})
			ctx := context.Background()
			var err error
			alloc := allocated(func() { _, err = c.FindOrders(ctx, "kaspi:1") })
			t.Logf("%s: the call allocated %.1f MiB (runtime.MemStats.TotalAlloc) for a %d MiB answer with onec.max_response 1MiB",
				tc.how, float64(alloc)/mib, hugeAnswer/mib)

			t.Logf("error: %v", err)
			e := asError(t, err)
			const want = "1C's answer to GET /orders is larger than onec.max_response (1MiB)"
			if !strings.Contains(err.Error(), want) {
				t.Fatalf("err = %v, want it to contain %q", err, want)
			}
			if e.Class != onec.Transient || e.Op != "find" || e.Status != http.StatusOK || !wire.TooLarge(err) {
				t.Fatalf("err = %+v, want a transient find error with status 200 over the limit", e)
			}
			if alloc >= 32*mib {
				t.Fatalf("the call allocated %d bytes for a %d byte answer: it read the answer whole", alloc, hugeAnswer)
			}
			if got := srv.count(); got != 1 {
				t.Fatalf("server received %d requests, want 1: an answer over the limit is not retried within the call", got)
			}

			// The connection was closed, not drained: the server's writes fail early.
			select {
			case <-done:
			case <-time.After(20 * time.Second):
				t.Fatal("the server is still writing the answer: the client did not hang up")
			}
			if got := sent.Load(); got >= 64*mib {
				t.Fatalf("the server wrote %d bytes before the client hung up, want far fewer than the answer's %d", got, hugeAnswer)
			}

			// The one slot is free again, and the session 1C started is kept: it
			// answered in full and is done with the request.
			ctx2, cancel := context.WithTimeout(ctx, 5*time.Second)
			defer cancel()
			orders, err := c.FindOrders(ctx2, "small")
			if err != nil || len(orders) != 0 {
				t.Fatalf("the next call = %v, %v; want it to work on the freed slot", orders, err)
			}
			if got, _ := smallCookie.Load().(string); got != "big-session" {
				t.Fatalf("the next call sent session cookie %q, want big-session", got)
			}
		})
	}
}

// TestAnswerAtTheLimit: an answer of exactly onec.max_response bytes is read and
// decoded; one byte more is not. With a Content-Length the body is read into one
// buffer of its size.
func TestAnswerAtTheLimit(t *testing.T) {
	const limit = mib
	for _, announce := range []bool{true, false} {
		for _, size := range []int{limit, limit + 1} {
			t.Run(fmt.Sprintf("size %d, Content-Length %v", size, announce), func(t *testing.T) {
				body := exactFind(size)
				srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
					w.Header().Set("Content-Type", "application/json")
					if announce {
						w.Header().Set("Content-Length", strconv.Itoa(len(body)))
					} else {
						w.(http.Flusher).Flush() // chunked from the start
					}
					w.Write(body)
				})
				c := newClient(t, srv.URL, func(c *Config) { c.MaxResponse = limit })
				rec := &onec.Recorder{}
				ctx := onec.WithRecorder(context.Background(), rec)
				var (
					orders []onec.Order
					err    error
				)
				alloc := allocated(func() { orders, err = c.FindOrders(ctx, "kaspi:1") })
				xs := rec.Exchanges()
				if len(xs) != 1 || xs[0].Status != 200 {
					t.Fatalf("exchanges = %+v, want one with status 200", xs)
				}
				if size > limit {
					if !wire.TooLarge(err) || !strings.Contains(err.Error(), "onec.max_response (1MiB)") {
						t.Fatalf("err = %v, want the answer over onec.max_response", err)
					}
					if !strings.Contains(xs[0].Error, "onec.max_response") || xs[0].ResponseSHA256 != "" {
						t.Fatalf("exchange = %+v, want the error recorded and no digest", xs[0])
					}
					return
				}
				if err != nil || len(orders) != 1 || orders[0].Ref != "5a1f" {
					t.Fatalf("find = %+v, %v; want the one order", orders, err)
				}
				if xs[0].ResponseSHA256 != onec.Digest(body) {
					t.Fatalf("response digest %s, want that of the body", xs[0].ResponseSHA256)
				}
				t.Logf("a %d byte answer allocated %.2f MiB", size, float64(alloc)/mib)
				if announce && alloc > limit+limit/2 {
					t.Fatalf("a %d byte answer with Content-Length allocated %d bytes: want it held once", size, alloc)
				}
			})
		}
	}
}

// TestEachOperationOverTheLimit: a POST whose answer is too large to read may
// have been carried out; a GET's is tried again later, not within the call.
func TestEachOperationOverTheLimit(t *testing.T) {
	t.Parallel()
	big := exactFind(2 * mib)
	for _, op := range []string{"create", "cancel", "stock", "ping"} {
		t.Run(op, func(t *testing.T) {
			t.Parallel()
			srv := newServer(t, reply(201, "application/json", string(big)))
			c := newClient(t, srv.URL, func(c *Config) { c.MaxResponse = mib })
			err := ops[op](context.Background(), c)
			t.Logf("error: %v", err)
			e := asError(t, err)
			switch op {
			case "create":
				if e.Class != onec.Unknown || !strings.Contains(e.Message, "1C's answer to POST /orders is larger than onec.max_response (1MiB)") ||
					!strings.Contains(e.Message, "the order may have been created") {
					t.Fatalf("err = %v, want an unknown outcome naming the limit", err)
				}
			case "cancel":
				if e.Class != onec.Unknown || !strings.Contains(e.Message, "POST /orders/cancel is larger than onec.max_response") {
					t.Fatalf("err = %v, want an unknown outcome naming the limit", err)
				}
			default:
				if e.Class != onec.Transient || !strings.Contains(e.Message, "onec.max_response (1MiB)") {
					t.Fatalf("err = %v, want a transient error naming the limit", err)
				}
			}
			if e.Op != op || e.Status != 201 {
				t.Fatalf("err = %+v, want op %s and status 201", e, op)
			}
			if got := srv.count(); got != 1 {
				t.Fatalf("server received %d requests, want 1", got)
			}
		})
	}
}
