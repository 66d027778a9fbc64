package server

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// Bad requests sent together with good ones over real connections — wrong
// signatures, oversized and wrongly typed bodies, a disallowed Ozon address, a
// wrong Bitrix24 token, and clients that stall in the middle of their body — do
// not fail or hold up the good ones: every good one is answered 200 and stored,
// and nothing of the bad ones is.
func TestBadRequestsDoNotDisturbGoodOnes(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(c *Config) { c.MaxBody = 8 << 10 })
	if err := h.srv.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer h.srv.Stop(context.Background())
	base := "http://" + h.srv.Addr()

	// Stalled clients: headers and part of the body, then nothing.
	var stalled []net.Conn
	for range 5 {
		c, err := net.Dial("tcp", h.srv.Addr())
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(c, "POST /webhooks/site HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 4000\r\n\r\n{\"source\":")
		stalled = append(stalled, c)
	}
	defer func() {
		for _, c := range stalled {
			c.Close()
		}
	}()

	client := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	send := func(r *http.Request) (int, error) {
		req, err := http.NewRequest(r.Method, base+r.URL.Path, r.Body)
		if err != nil {
			return 0, err
		}
		req.Header = r.Header
		resp, err := client.Do(req)
		if err != nil {
			return 0, err
		}
		readAll(t, resp)
		return resp.StatusCode, nil
	}

	const n = 40
	bad := []func(i int) *http.Request{
		func(i int) *http.Request {
			return signedRequest("site", fmt.Sprintf("bad_sig_%d", i), testNow, orderJSON("site", fmt.Sprintf("BAD-%d", i)), otherSecret)
		},
		func(i int) *http.Request {
			big := append(bytes.Repeat([]byte(" "), 16<<10), orderJSON("site", fmt.Sprintf("BIG-%d", i))...)
			return signedRequest("site", fmt.Sprintf("bad_big_%d", i), testNow, big, siteSecret)
		},
		func(i int) *http.Request {
			r := signedRequest("site", fmt.Sprintf("bad_ct_%d", i), testNow, orderJSON("site", fmt.Sprintf("CT-%d", i)), siteSecret)
			r.Header.Set("Content-Type", "text/plain")
			return r
		},
		func(i int) *http.Request { return ozonRequest("", ozonNewPosting) }, // from 127.0.0.1: not allowed
		func(i int) *http.Request {
			return bitrixRequest(bitrixForm("ONCRMDEALADD", fmt.Sprint(1000+i), "1700000000", "not-the-token"))
		},
		func(i int) *http.Request {
			return signedRequest("site", fmt.Sprintf("bad_order_%d", i), testNow, []byte(`{"source":"site"}`), siteSecret)
		},
	}

	var wg sync.WaitGroup
	errs := make(chan string, 4*n)
	for i := range n {
		wg.Add(2)
		go func() {
			defer wg.Done()
			st, err := send(signedRequest("site", fmt.Sprintf("good_%d", i), testNow, orderJSON("site", fmt.Sprintf("GOOD-%d", i)), siteSecret))
			if err != nil || st != http.StatusOK {
				errs <- fmt.Sprintf("good %d: %d %v", i, st, err)
			}
		}()
		go func() {
			defer wg.Done()
			st, err := send(bad[i%len(bad)](i))
			if err == nil && st < 400 {
				errs <- fmt.Sprintf("bad %d (kind %d) accepted: %d", i, i%len(bad), st)
			}
		}()
	}
	wg.Wait()
	// Connections the client dialled but never used would hold Stop (net/http waits
	// for a new connection's first request for 5 seconds).
	client.CloseIdleConnections()
	close(errs)
	var msgs []string
	for m := range errs {
		msgs = append(msgs, m)
	}
	if len(msgs) > 0 {
		t.Fatalf("%d failures:\n%s", len(msgs), strings.Join(msgs, "\n"))
	}
	h.stored(n, n)
	for i := range n {
		if _, ok := h.inbox.op(fmt.Sprintf("site:order:GOOD-%d:create", i)); !ok {
			t.Fatalf("good order %d not registered", i)
		}
	}
	if h.registered() != n {
		t.Fatalf("OnRegistered %d times, want %d", h.registered(), n)
	}
}
