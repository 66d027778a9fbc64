package wire

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ordersync/ordersync/internal/eventually"
	"github.com/ordersync/ordersync/internal/onec"
)

const prefix = "/trade/odata/standard.odata"

// plainJudge accepts what a call accepts and makes anything else a Permanent
// error (Transient for a 5xx). A 400 whose body is a JSON object is the service's
// own answer; any other 400 to a kept session is 1C refusing the session.
type plainJudge struct {
	// judging, when set, is called as the judge looks at an answer.
	judging func()
}

func (j plainJudge) Judge(k Call, ans Answer) (Answer, error) {
	if j.judging != nil {
		j.judging()
	}
	if k.Accepts(ans.Status) {
		return ans, nil
	}
	class := onec.Permanent
	if ans.Status >= 500 {
		class = onec.Transient
	}
	return Answer{}, &onec.Error{Class: class, Op: k.Op, Path: k.Path, Status: ans.Status, Message: onec.Snippet(ans.Body)}
}

func (plainJudge) SessionRefused(ans Answer) bool { return !bytes.HasPrefix(ans.Body, []byte("{")) }

// requests is what a test server received, in order.
type requests struct {
	mu   sync.Mutex
	list []*http.Request
}

func (rs *requests) add(r *http.Request) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	rs.list = append(rs.list, r)
}

func (rs *requests) all() []*http.Request {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	return append([]*http.Request(nil), rs.list...)
}

// serve starts a server that records each request (its body read) and answers
// it with h, and a Conn to it below prefix.
func serve(t *testing.T, h http.HandlerFunc, j Judge, mod ...func(*Config)) (*Conn, *requests) {
	t.Helper()
	rs := &requests{}
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		rs.add(r)
		h(w, r)
	}))
	t.Cleanup(ts.Close)
	cfg := Config{BaseURL: ts.URL + prefix, Username: "ordersync", Password: "пароль",
		Timeout: 2 * time.Second, GetRetries: 2, RetryBackoff: time.Millisecond}
	for _, m := range mod {
		m(&cfg)
	}
	c, err := New(cfg, j)
	if err != nil {
		t.Fatal(err)
	}
	return c, rs
}

func answer(status int, body string) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(status)
		io.WriteString(w, body)
	}
}

func get(path string) Call { return Call{Op: "read", Method: http.MethodGet, Path: path} }

// A RawQuery goes out byte for byte (%20 for a space, $ and ' as they are), and
// so does a path escaped the way the OData client escapes an entity set's
// Cyrillic name; the journal records both as sent.
func TestRawQueryAndPathAreSentByteForByte(t *testing.T) {
	t.Parallel()
	c, rs := serve(t, answer(200, `{"value":[]}`), plainJudge{})
	const set = "/Catalog_%D0%9D%D0%BE%D0%BC%D0%B5%D0%BD%D0%BA%D0%BB%D0%B0%D1%82%D1%83%D1%80%D0%B0(guid'5a1f')"
	const query = "$filter=Description%20eq%20'%D0%A7%D0%B0%D0%B9%D0%BD%D0%B8%D0%BA%20%D0%BD%D0%B0%2B1'&$format=json"
	rec := &onec.Recorder{}
	k := get(set)
	k.RawQuery = query
	if _, err := c.Do(onec.WithRecorder(context.Background(), rec), k); err != nil {
		t.Fatal(err)
	}
	r := rs.all()[0]
	if got, want := r.RequestURI, prefix+set+"?"+query; got != want {
		t.Fatalf("request URI = %s, want %s", got, want)
	}
	if got, want := r.URL.Path, prefix+"/Catalog_Номенклатура(guid'5a1f')"; got != want {
		t.Fatalf("path = %s, want %s", got, want)
	}
	if got, want := r.URL.Query().Get("$filter"), "Description eq 'Чайник на+1'"; got != want {
		t.Fatalf("$filter = %q, want %q", got, want)
	}
	if xs := rec.Exchanges(); len(xs) != 1 || xs[0].Path != prefix+set+"?"+query {
		t.Fatalf("recorded %+v, want the path and query as sent", xs)
	}
}

// A Query is encoded the usual way, spaces as '+'; a call with both a Query and a
// RawQuery is refused before anything is sent.
func TestQuery(t *testing.T) {
	t.Parallel()
	c, rs := serve(t, answer(200, `{}`), plainJudge{})
	k := get("/orders")
	k.Query = url.Values{"external_id": {"site:A 1"}}
	if _, err := c.Do(context.Background(), k); err != nil {
		t.Fatal(err)
	}
	if got, want := rs.all()[0].RequestURI, prefix+"/orders?external_id=site%3AA+1"; got != want {
		t.Fatalf("request URI = %s, want %s", got, want)
	}
	k.RawQuery = "x=1"
	_, err := c.Do(context.Background(), k)
	if onec.ClassOf(err) != onec.Permanent || !strings.Contains(err.Error(), "both Query and RawQuery") {
		t.Fatalf("err = %v, want a permanent error naming both", err)
	}
	if got := len(rs.all()); got != 1 {
		t.Fatalf("server received %d requests, want 1", got)
	}
}

// A POST with EmptyBody carries an explicit Content-Length: 0; a body goes with
// its Content-Type, JSON by default, and the extra headers with it.
func TestBodies(t *testing.T) {
	t.Parallel()
	c, rs := serve(t, answer(200, `{}`), plainJudge{})
	post := Call{Op: "post", Method: http.MethodPost, Path: "/Document(guid'1')/Post", RawQuery: "PostingModeOperational=false", EmptyBody: true}
	if _, err := c.Do(context.Background(), post); err != nil {
		t.Fatal(err)
	}
	r := rs.all()[0]
	if got := r.Header.Values("Content-Length"); len(got) != 1 || got[0] != "0" || r.ContentLength != 0 || len(r.TransferEncoding) != 0 {
		t.Fatalf("Content-Length %q (length %d, transfer encoding %v), want an explicit 0", got, r.ContentLength, r.TransferEncoding)
	}

	create := Call{Op: "create", Method: http.MethodPost, Path: "/Document", Body: []byte(`{"a":1}`),
		Header: map[string]string{"Accept": "application/json;odata=nometadata", "X-Test": "да"}}
	typed := create
	typed.ContentType = "application/xml"
	for _, tc := range []struct {
		k    Call
		want string
	}{{create, "application/json; charset=utf-8"}, {typed, "application/xml"}} {
		if _, err := c.Do(context.Background(), tc.k); err != nil {
			t.Fatal(err)
		}
		rr := rs.all()
		r := rr[len(rr)-1]
		body, _ := io.ReadAll(r.Body)
		if got := r.Header.Get("Content-Type"); got != tc.want || string(body) != `{"a":1}` {
			t.Fatalf("Content-Type %q, body %s; want %q and the body", got, body, tc.want)
		}
		if r.Header.Get("Accept") != "application/json;odata=nometadata" || r.Header.Get("X-Test") != "да" {
			t.Fatalf("headers %v, want the call's", r.Header)
		}
	}
}

// The judge looks at an answer while the call still holds its slot.
func TestJudgedInTheSlot(t *testing.T) {
	t.Parallel()
	var c *Conn
	var free atomic.Int32
	j := plainJudge{judging: func() { free.Store(int32(len(c.slots))) }}
	c, _ = serve(t, answer(200, `{}`), j, func(cfg *Config) { cfg.MaxConcurrency = 1 })
	free.Store(-1)
	if _, err := c.Do(context.Background(), get("/x")); err != nil {
		t.Fatal(err)
	}
	if got := free.Load(); got != 0 {
		t.Fatalf("%d slots free while the answer was judged, want 0", got)
	}
	if got := len(c.slots); got != 1 {
		t.Fatalf("%d slots free after the call, want 1", got)
	}
}

// oneSession is a base that knows one session, "s1", and refuses any other
// cookie with 400.
func oneSession(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("IBSession") == "start" {
		http.SetCookie(w, &http.Cookie{Name: "ibsession", Value: "s1"})
	} else if c, err := r.Cookie("ibsession"); err == nil && c.Value != "s1" {
		answer(400, "Сеанс отсутствует или удален")(w, r)
		return
	}
	answer(200, `{}`)(w, r)
}

func TestSessionExpiry(t *testing.T) {
	t.Parallel()
	expire := func(c *Conn) {
		s := <-c.slots
		s.cookie = "gone"
		c.slots <- s
	}
	session := func(cfg *Config) { cfg.SessionReuse = true; cfg.MaxConcurrency = 1 }
	t.Run("a GET starts a new session and goes on", func(t *testing.T) {
		t.Parallel()
		c, rs := serve(t, oneSession, plainJudge{}, session)
		expire(c)
		if _, err := c.Do(context.Background(), get("/x")); err != nil {
			t.Fatal(err)
		}
		if got, want := len(rs.all()), 2; got != want {
			t.Fatalf("server received %d, want %d (the refused one, then one on a new session)", got, want)
		}
		s := <-c.slots
		if s.cookie != "s1" {
			t.Fatalf("kept cookie %q, want s1", s.cookie)
		}
		c.slots <- s
	})
	t.Run("a POST is not resent", func(t *testing.T) {
		t.Parallel()
		c, rs := serve(t, oneSession, plainJudge{}, session)
		expire(c)
		post := Call{Op: "create", Method: http.MethodPost, Path: "/x", Body: []byte(`{}`)}
		_, err := c.Do(context.Background(), post)
		var e *onec.Error
		if !errors.As(err, &e) || e.Class != onec.Transient || e.Status != 400 || !strings.Contains(e.Message, "session expired") {
			t.Fatalf("err = %v, want Transient 400, the session expired", err)
		}
		if got := len(rs.all()); got != 1 {
			t.Fatalf("server received %d, want 1", got)
		}
		if _, err := c.Do(context.Background(), post); err != nil {
			t.Fatalf("the next POST, on a new session: %v", err)
		}
	})
	t.Run("a 400 the judge calls the service's own is judged", func(t *testing.T) {
		t.Parallel()
		c, rs := serve(t, answer(400, `{"error":"bad"}`), plainJudge{}, session)
		expire(c)
		if _, err := c.Do(context.Background(), get("/x")); onec.ClassOf(err) != onec.Permanent {
			t.Fatalf("err = %v, want it judged Permanent", err)
		}
		if got := len(rs.all()); got != 1 {
			t.Fatalf("server received %d, want 1", got)
		}
	})
}

// Close finishes each kept session with a GET of FinishPath.
func TestCloseFinishesSessions(t *testing.T) {
	t.Parallel()
	c, rs := serve(t, oneSession, plainJudge{}, func(cfg *Config) { cfg.SessionReuse = true; cfg.FinishPath = "/$metadata" })
	if _, err := c.Do(context.Background(), get("/x")); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	all := rs.all()
	if len(all) != 2 {
		t.Fatalf("server received %d requests, want the call and one finish", len(all))
	}
	fin := all[1]
	if ck, err := fin.Cookie("ibsession"); err != nil || ck.Value != "s1" || fin.Header.Get("IBSession") != "finish" ||
		fin.Method != http.MethodGet || fin.URL.Path != prefix+"/$metadata" {
		t.Fatalf("finish = %s %s, IBSession %q, cookie %v; want GET of FinishPath finishing s1",
			fin.Method, fin.URL.Path, fin.Header.Get("IBSession"), ck)
	}
}

// The connection's own checks beyond httpservice's: the example in the error,
// the base, and the configuration with defaults applied.
func TestNew(t *testing.T) {
	t.Parallel()
	if _, err := New(Config{}, plainJudge{}); err == nil || err.Error() != "onec.base_url is required" {
		t.Fatalf("New without a URL or an example = %v", err)
	}
	const example = "http://1c.local/trade/odata/standard.odata"
	if _, err := New(Config{Example: example}, plainJudge{}); err == nil || err.Error() != "onec.base_url is required, e.g. "+example {
		t.Fatalf("New without a URL = %v, want the example", err)
	}
	c, err := New(Config{BaseURL: example + "/", GetRetries: -1}, plainJudge{})
	if err != nil {
		t.Fatal(err)
	}
	got := c.Config()
	if c.Base() != example || got.Timeout != DefaultTimeout || got.MaxConcurrency != DefaultMaxConcurrency ||
		got.RetryBackoff != DefaultRetryBackoff || got.MaxResponse != DefaultMaxResponse || got.GetRetries != -1 || c.retries != 0 {
		t.Fatalf("base %q, config %+v, retries %d: want the defaults, and no GET retries", c.Base(), got, c.retries)
	}
}

// The moment a POST was written whole is stamped when it was written, not when
// the call began: a wait for a concurrency slot does not count.
func TestPostMarkedSentWhenWritten(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	var gets, posts atomic.Int32
	c, _ := serve(t, func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet {
			gets.Add(1)
			<-release
		} else {
			posts.Add(1)
		}
		answer(200, `{}`)(w, r)
	}, plainJudge{}, func(cfg *Config) { cfg.MaxConcurrency = 1 })
	var acquiring atomic.Int32
	c.acquiring = func() { acquiring.Add(1) }

	getRec := &onec.Recorder{}
	getDone := make(chan error, 1)
	go func() {
		_, err := c.Do(onec.WithRecorder(context.Background(), getRec), get("/x"))
		getDone <- err
	}()
	eventually.True(t, "the GET in the server, holding the slot", func() bool { return gets.Load() == 1 })

	rec := &onec.Recorder{}
	began := time.Now()
	posted := make(chan error, 1)
	go func() {
		_, err := c.Do(onec.WithRecorder(context.Background(), rec), Call{Op: "create", Method: http.MethodPost, Path: "/x", Body: []byte(`{}`)})
		posted <- err
	}()
	// The POST waits for the slot the GET holds.
	eventually.True(t, "the POST to wait for the slot", func() bool { return acquiring.Load() == 2 })
	if got := posts.Load(); got != 0 {
		t.Fatalf("the POST reached the server while the slot was held (%d)", got)
	}
	if got := rec.LastSent(); !got.IsZero() {
		t.Fatalf("LastSent = %v while the POST waited for a slot, want zero", got)
	}
	freed := time.Now()
	close(release)
	if err := <-getDone; err != nil {
		t.Fatal(err)
	}
	if err := <-posted; err != nil {
		t.Fatal(err)
	}
	done := time.Now()
	sent := rec.LastSent()
	if sent.IsZero() || sent.Before(freed) || sent.After(done) {
		t.Fatalf("LastSent = %v; want between the slot being freed (%v, %v after the call began) and the call's end (%v)",
			sent, freed, freed.Sub(began), done)
	}
	if got := getRec.LastSent(); !got.IsZero() {
		t.Fatalf("a GET stamped LastSent %v, want zero: only a request that may change 1C is marked", got)
	}
}

// The connection keeps as many idle connections to 1C as it has slots: rounds of
// onec.max_concurrency requests at once reuse the connections of the first round
// rather than opening new ones (each a TLS handshake to a real 1C).
func TestConnectionsKeptForEverySlot(t *testing.T) {
	const slots, rounds = 8, 3
	var (
		mu      sync.Mutex
		arrived int
		release = make(chan struct{})
		opened  atomic.Int64
	)
	ts := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Each round's requests are answered once all of them are in: the round
		// holds every slot, each on a connection of its own.
		mu.Lock()
		arrived++
		gate := release
		if arrived%slots == 0 {
			close(release)
			release = make(chan struct{})
		}
		mu.Unlock()
		<-gate
		io.WriteString(w, `{}`)
	}))
	ts.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			opened.Add(1)
		}
	}
	ts.Start()
	t.Cleanup(ts.Close)
	c, err := New(Config{BaseURL: ts.URL + prefix, Timeout: 10 * time.Second, MaxConcurrency: slots}, plainJudge{})
	if err != nil {
		t.Fatal(err)
	}
	for range rounds {
		var wg sync.WaitGroup
		for range slots {
			wg.Go(func() {
				if _, err := c.Do(context.Background(), get("/Catalog_Номенклатура")); err != nil {
					t.Error(err)
				}
			})
		}
		wg.Wait()
	}
	if n := opened.Load(); n != slots {
		t.Fatalf("%d rounds of %d requests opened %d connections, want %d (one per slot, kept)", rounds, slots, n, slots)
	}
}
