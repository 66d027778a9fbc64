package connectors

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-resty/resty/v2"
)

const (
	mib        = 1 << 20
	hugeAnswer = 256 * mib
)

// posting is one posting of a listing, followed by a comma.
const posting = `{"posting_number":"0123456789-0001-1","status":"awaiting_packaging","products":[{"offer_id":"A-1","quantity":1,"price":"1530.0000"}]},`

// streamListing writes a listing of about size bytes, generated as it goes, and
// adds what it wrote to sent; it stops at the first failed write.
func streamListing(w io.Writer, size int64, sent *atomic.Int64) {
	chunk := []byte(strings.Repeat(posting, 64<<10/len(posting)))
	write := func(b []byte) bool {
		n, err := w.Write(b)
		sent.Add(int64(n))
		return err == nil
	}
	if !write([]byte(`{"result":{"postings":[`)) {
		return
	}
	for n := int64(0); n < size; n += int64(len(chunk)) {
		if !write(chunk) {
			return
		}
	}
	write([]byte(`{}]}}`))
}

// exactListing is a listing of exactly size bytes.
func exactListing(size int) []byte {
	b := []byte(`{"result":{"postings":[` + strings.TrimSuffix(posting, ",") + `]}}`)
	return append(b, bytes.Repeat([]byte(" "), size-len(b))...)
}

func allocated(f func()) uint64 {
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// listingServer answers /huge with a 256 MiB listing (announcing its length when
// announce is set) and /small with exactly small bytes.
type listingServer struct {
	*httptest.Server
	requests atomic.Int32
	sent     atomic.Int64
	done     chan struct{}
}

func newListingServer(t *testing.T, announce bool, small int) *listingServer {
	t.Helper()
	s := &listingServer{done: make(chan struct{}, 8)}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() { s.done <- struct{}{} }()
		s.requests.Add(1)
		w.Header().Set("Content-Type", "application/json")
		if r.URL.Path == "/small" {
			body := exactListing(small)
			w.Header().Set("Content-Length", strconv.Itoa(len(body)))
			w.Write(body)
			return
		}
		if announce {
			w.Header().Set("Content-Length", strconv.Itoa(hugeAnswer))
		}
		streamListing(w, hugeAnswer-100, &s.sent)
	}))
	t.Cleanup(s.Close)
	return s
}

// TestHugeAnswerIsNotRead streams a 256 MiB listing to a marketplace client whose
// limit is 1 MiB: the read fails naming connectors.ozon.max_response, is not
// retried, allocates a small fraction of the answer, and the client goes on. Not
// parallel, so that the allocation figure is this call's.
func TestHugeAnswerIsNotRead(t *testing.T) {
	for _, announce := range []bool{false, true} {
		t.Run("Content-Length "+strconv.FormatBool(announce), func(t *testing.T) {
			srv := newListingServer(t, announce, mib)
			c := NewClient(ClientConfig{Connector: "ozon", BaseURL: srv.URL, MaxResponse: mib, Timeout: 30 * time.Second,
				MaxRetryWait: time.Millisecond})
			ctx := context.Background()
			var (
				resp *resty.Response
				err  error
			)
			alloc := allocated(func() {
				r, e := Read(c.R().SetContext(ctx)).Get("/huge")
				resp, err = r, Check("ozon", "connectors.ozon.api_key", "list postings", r, e)
			})
			t.Logf("Content-Length %v: the read allocated %.1f MiB (runtime.MemStats.TotalAlloc) for a %d MiB answer with max_response 1MiB",
				announce, float64(alloc)/mib, hugeAnswer/mib)
			var tl *ResponseTooLargeError
			if !errors.As(err, &tl) {
				t.Fatalf("err = %v (%T), want a *ResponseTooLargeError", err, err)
			}
			const want = "ozon: list postings: the answer (HTTP 200"
			for _, w := range []string{want, "is larger than connectors.ozon.max_response (1MiB), so it was not read",
				"raise connectors.ozon.max_response or lower connectors.ozon.page_size"} {
				if !strings.Contains(err.Error(), w) {
					t.Fatalf("err = %v, want it to contain %q", err, w)
				}
			}
			if tl.Status != 200 || tl.Limit != mib || tl.Key != "connectors.ozon.max_response" || resp.StatusCode() != 200 {
				t.Fatalf("err = %+v, status %d", tl, resp.StatusCode())
			}
			if alloc >= 32*mib {
				t.Fatalf("the read allocated %d bytes for a %d byte answer: it read the answer whole", alloc, hugeAnswer)
			}
			if got := srv.requests.Load(); got != 1 {
				t.Fatalf("server received %d requests, want 1: an answer over the limit is not retried", got)
			}
			select {
			case <-srv.done:
			case <-time.After(20 * time.Second):
				t.Fatal("the server is still writing: the client did not hang up")
			}
			if got := srv.sent.Load(); got >= 64*mib {
				t.Fatalf("the server wrote %d bytes before the client hung up", got)
			}

			// An answer of exactly the limit is read, and the client goes on.
			r, err := Read(c.R().SetContext(ctx)).Get("/small")
			if err := Check("ozon", "connectors.ozon.api_key", "list postings", r, err); err != nil {
				t.Fatalf("an answer of exactly the limit: %v", err)
			}
			if got := len(r.Body()); got != mib {
				t.Fatalf("read %d bytes, want %d", got, mib)
			}
		})
	}
}

func TestMaxResponse(t *testing.T) {
	t.Parallel()
	serve := func(t *testing.T, size int) string {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Write(exactListing(size))
		}))
		t.Cleanup(srv.Close)
		return srv.URL
	}
	for _, tc := range []struct {
		name    string
		cfg     func(url string) ClientConfig
		size    int
		wantKey string // "" when the answer is read
	}{
		{"the default is 16MiB", func(u string) ClientConfig { return ClientConfig{Connector: "kaspi", BaseURL: u} },
			DefaultMaxResponse + 1, "connectors.kaspi.max_response"},
		{"the default reads 16MiB", func(u string) ClientConfig { return ClientConfig{Connector: "kaspi", BaseURL: u} },
			DefaultMaxResponse, ""},
		{"a configured transport's limit stands alone, above the default", func(u string) ClientConfig {
			return ClientConfig{Connector: "wildberries", BaseURL: u,
				Transport: BoundResponses(nil, 20*mib, "connectors.wildberries.max_response")}
		}, 18 * mib, ""},
		{"a configured transport's limit holds", func(u string) ClientConfig {
			return ClientConfig{Connector: "wildberries", BaseURL: u,
				Transport: BoundResponses(nil, 20*mib, "connectors.wildberries.max_response")}
		}, 20*mib + 1, "connectors.wildberries.max_response"},
		{"MaxResponse set and a bounding transport: the smaller wins", func(u string) ClientConfig {
			return ClientConfig{Connector: "ozon", BaseURL: u, MaxResponse: mib,
				Transport: BoundResponses(nil, 20*mib, "connectors.ozon.max_response")}
		}, 2 * mib, "connectors.ozon.max_response"},
		{"bitrix24's key is in webhooks", func(u string) ClientConfig {
			return ClientConfig{Connector: "bitrix24", BaseURL: u, MaxResponse: 1024}
		}, 1025, "webhooks.bitrix24.max_response"},
		{"a key of one's own", func(u string) ClientConfig {
			return ClientConfig{Connector: "x", BaseURL: u, MaxResponse: 1024, MaxResponseKey: "x.limit"}
		}, 2048, "x.limit"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := NewClient(tc.cfg(serve(t, tc.size)))
			r, err := Read(c.R().SetContext(context.Background())).Get("/")
			var tl *ResponseTooLargeError
			switch {
			case tc.wantKey == "" && (err != nil || len(r.Body()) != tc.size):
				t.Fatalf("read %d bytes, %v; want %d", len(r.Body()), err, tc.size)
			case tc.wantKey != "" && (!errors.As(err, &tl) || tl.Key != tc.wantKey):
				t.Fatalf("err = %v, want one naming %s", err, tc.wantKey)
			case tc.wantKey != "" && strings.Contains(tc.wantKey, "bitrix24") && strings.Contains(err.Error(), "page_size"):
				t.Fatalf("err = %v suggests a page_size bitrix24 does not have", err)
			}
		})
	}
}

func TestBoundedBody(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		size, limit int
		announced   bool
		ok          bool
	}{
		{0, 1, false, true}, {1, 1, true, true}, {2, 1, false, false}, {2, 1, true, false},
		{100, 150, true, true}, {5000, 5000, false, true}, {5001, 5000, false, false},
	} {
		body := bytes.Repeat([]byte("x"), tc.size)
		cl := int64(-1)
		if tc.announced {
			cl = int64(tc.size)
		}
		b := &boundedBody{rc: io.NopCloser(bytes.NewReader(body)), left: int64(tc.limit),
			tooLarge: &ResponseTooLargeError{Key: "k", Limit: int64(tc.limit), ContentLength: cl}}
		got, err := io.ReadAll(b)
		var tl *ResponseTooLargeError
		switch {
		case tc.ok && (err != nil || !bytes.Equal(got, body)):
			t.Errorf("size %d, limit %d: %d bytes, %v; want the body", tc.size, tc.limit, len(got), err)
		case !tc.ok && (!errors.As(err, &tl) || len(got) > tc.limit):
			t.Errorf("size %d, limit %d: %d bytes, %v; want too large, at most the limit read", tc.size, tc.limit, len(got), err)
		}
	}
}
