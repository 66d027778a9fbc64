package kaspisim

import (
	"cmp"
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// feedServer serves one price list with its validators, answering 304 when they
// match, or another status on demand; it records the conditional headers it got.
type feedServer struct {
	mu           sync.Mutex
	body         string
	etag         string
	lastModified string
	contentType  string
	status       int // other than 0: answer it with a plain reason
	seen         [][2]string
}

func (s *feedServer) set(body, etag, lastModified string) {
	s.mu.Lock()
	s.body, s.etag, s.lastModified = body, etag, lastModified
	s.mu.Unlock()
}

func (s *feedServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seen = append(s.seen, [2]string{r.Header.Get("If-None-Match"), r.Header.Get("If-Modified-Since")})
	if s.status != 0 {
		w.Header().Set("Retry-After", "300")
		http.Error(w, "no stock snapshot yet", s.status)
		return
	}
	w.Header().Set("ETag", s.etag)
	w.Header().Set("Last-Modified", s.lastModified)
	if r.Header.Get("If-None-Match") == s.etag {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	w.Header().Set("Content-Type", cmp.Or(s.contentType, "application/xml; charset=utf-8"))
	_, _ = w.Write([]byte(s.body))
}

func (s *feedServer) last() [2]string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.seen[len(s.seen)-1]
}

const kaspiFeedHead = `<?xml version="1.0" encoding="UTF-8"?>
<kaspi_catalog date="2026-09-16T10:00:00+05:00" xmlns="kaspiShopping" xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance" xsi:schemaLocation="kaspiShopping http://kaspi.kz/kaspishopping.xsd">
  <company>Рога &amp; Копыта</company>
  <merchantid>30391602</merchantid>
  <offers>
`

const kaspiFeedTail = `  </offers>
</kaspi_catalog>
`

func kaspiFeedDoc(offers ...string) string {
	return kaspiFeedHead + strings.Join(offers, "\n") + kaspiFeedTail
}

const (
	offerA = `<offer sku="A&amp;1"><model>SKU-A</model><brand>Acme</brand><availabilities>
  <availability available="yes" storeId="PP1" stockCount="5"/>
  <availability available="no" storeId="PP2" stockCount="0"/>
</availabilities><price> 1500 </price></offer>`
	offerB = `<offer sku="B"><model>SKU-B</model><availabilities><availability available="no" storeId="PP1"/></availabilities><price>20</price></offer>`
)

func TestKaspiFeedPuller(t *testing.T) {
	t.Parallel()
	srv := &feedServer{}
	srv.set(kaspiFeedDoc(offerA, offerB), `"v1"`, "Wed, 16 Sep 2026 05:00:00 GMT")
	ts := httptest.NewServer(srv)
	t.Cleanup(ts.Close)
	p := NewFeedPuller(ts.URL+"/feeds/kaspi/token.xml", FeedOptions{})
	ctx := context.Background()

	if _, ok := p.Catalog(); ok {
		t.Fatalf("a catalog before the first pull")
	}
	res, err := p.Pull(ctx)
	if err != nil || res.Status != 200 || !res.Changed || res.Offers != 2 {
		t.Fatalf("first pull %+v, %v", res, err)
	}
	if seen := srv.last(); seen != [2]string{} {
		t.Fatalf("the first pull was conditional: %q", seen)
	}
	cat, _ := p.Catalog()
	if cat.Company != "Рога & Копыта" || cat.MerchantID != "30391602" || cat.Date != "2026-09-16T10:00:00+05:00" || cat.ETag != `"v1"` {
		t.Fatalf("catalog header %+v", cat)
	}
	if strings.Join(cat.SKUs, ",") != "A&1,B" {
		t.Fatalf("SKUs %q", cat.SKUs)
	}
	a, ok := p.Offer("A&1")
	if !ok || a.Model != "SKU-A" || a.Brand != "Acme" || a.Price.String() != "1500" || strings.Join(a.StoreIDs, ",") != "PP1,PP2" {
		t.Fatalf("offer A %+v", a)
	}
	if a.Stores["PP1"] != (FeedAvailability{Available: true, StockCount: 5, HasCount: true}) ||
		a.Stores["PP2"] != (FeedAvailability{Available: false, StockCount: 0, HasCount: true}) {
		t.Fatalf("offer A stores %+v", a.Stores)
	}
	if b, _ := p.Offer("B"); b.Stores["PP1"] != (FeedAvailability{}) {
		t.Fatalf("offer B stores %+v", b.Stores)
	}

	// Unchanged: a conditional GET and a 304.
	res, err = p.Pull(ctx)
	if err != nil || res.Status != 304 || res.Changed || res.Offers != 2 {
		t.Fatalf("second pull %+v, %v", res, err)
	}
	if seen := srv.last(); seen != [2]string{`"v1"`, "Wed, 16 Sep 2026 05:00:00 GMT"} {
		t.Fatalf("second pull sent %q", seen)
	}

	// Changed: read again, validators moved on.
	srv.set(kaspiFeedDoc(offerB), `"v2"`, "Wed, 16 Sep 2026 05:30:00 GMT")
	if res, err = p.Pull(ctx); err != nil || !res.Changed || res.Offers != 1 {
		t.Fatalf("third pull %+v, %v", res, err)
	}
	if _, ok := p.Offer("A&1"); ok {
		t.Fatalf("an offer gone from the list is still held")
	}

	// A 503: an error with its Retry-After, the catalog kept.
	srv.mu.Lock()
	srv.status = http.StatusServiceUnavailable
	srv.mu.Unlock()
	res, err = p.Pull(ctx)
	if err == nil || res.Status != 503 || res.Retry != "300" || !strings.Contains(err.Error(), "no stock snapshot yet") || res.Offers != 1 {
		t.Fatalf("503 pull %+v, %v", res, err)
	}
	srv.mu.Lock()
	srv.status = 0
	srv.mu.Unlock()

	// Forget: the next pull is unconditional and a 200.
	p.Forget()
	if res, err = p.Pull(ctx); err != nil || res.Status != 200 {
		t.Fatalf("pull after Forget %+v, %v", res, err)
	}
	if seen := srv.last(); seen != [2]string{} {
		t.Fatalf("pull after Forget sent %q", seen)
	}

	st := p.Stats()
	want := FeedStats{Pulls: 5, OK: 3, NotModified: 1, Failed: 1, LastStatus: 200}
	if st != want {
		t.Fatalf("stats %+v, want %+v", st, want)
	}
}

func TestKaspiFeedPullerRefusesBadLists(t *testing.T) {
	t.Parallel()
	good := kaspiFeedDoc(offerA, offerB)
	cases := []struct{ name, body, contentType, want string }{
		{"not XML", "{}", "application/json", "Content-Type"},
		{"broken XML", good[:len(good)-20], "", "well-formed"},
		{"another root", strings.Replace(good, "kaspi_catalog", "catalog", 2), "", "root"},
		{"another namespace", strings.Replace(good, `xmlns="kaspiShopping"`, `xmlns="kaspi"`, 1), "", "root"},
		{"no date", strings.Replace(good, `date="2026-09-16T10:00:00+05:00"`, "", 1), "", "no date"},
		{"no merchantid", strings.Replace(good, "<merchantid>30391602</merchantid>", "", 1), "", "no merchantid"},
		{"no offers", kaspiFeedDoc(), "", "no offers"},
		{"duplicate sku", kaspiFeedDoc(offerB, offerB), "", "twice"},
		{"fractional price", kaspiFeedDoc(strings.Replace(offerB, "<price>20<", "<price>20.5<", 1)), "", "whole tenge"},
		{"zero price", kaspiFeedDoc(strings.Replace(offerB, "<price>20<", "<price>0<", 1)), "", "whole tenge"},
		{"no price", kaspiFeedDoc(strings.Replace(offerB, "<price>20</price>", "", 1)), "", "no price"},
		{"no model", kaspiFeedDoc(strings.Replace(offerB, "<model>SKU-B</model>", "", 1)), "", "no model"},
		{"available maybe", kaspiFeedDoc(strings.Replace(offerB, `available="no"`, `available="maybe"`, 1)), "", "yes or no"},
		{"negative stockCount", kaspiFeedDoc(strings.Replace(offerA, `stockCount="5"`, `stockCount="-5"`, 1)), "", "stockCount"},
		{"fractional stockCount", kaspiFeedDoc(strings.Replace(offerA, `stockCount="5"`, `stockCount="5.5"`, 1)), "", "stockCount"},
		{"duplicate store", kaspiFeedDoc(strings.Replace(offerA, `storeId="PP2"`, `storeId="PP1"`, 1)), "", "twice"},
		{"no storeId", kaspiFeedDoc(strings.Replace(offerB, ` storeId="PP1"`, "", 1)), "", "storeId"},
	}
	for _, c := range cases {
		srv := &feedServer{}
		srv.set(good, `"v1"`, "Wed, 16 Sep 2026 05:00:00 GMT")
		ts := httptest.NewServer(srv)
		p := NewFeedPuller(ts.URL, FeedOptions{})
		if _, err := p.Pull(context.Background()); err != nil {
			t.Fatalf("%s: the good list: %v", c.name, err)
		}
		srv.set(c.body, `"v2"`, "Wed, 16 Sep 2026 05:30:00 GMT")
		srv.mu.Lock()
		srv.contentType = c.contentType
		srv.mu.Unlock()
		res, err := p.Pull(context.Background())
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: pull %+v error %v, want one saying %q", c.name, res, err, c.want)
			continue
		}
		// The last good list stays, and so do its validators.
		if cat, ok := p.Catalog(); !ok || cat.ETag != `"v1"` || len(cat.Offers) != 2 {
			t.Errorf("%s: the refused list replaced the catalog: %+v", c.name, cat)
		}
		// The next pull still asks with the good list's validators: the server
		// back at that list answers 304.
		srv.set(good, `"v1"`, "Wed, 16 Sep 2026 05:00:00 GMT")
		srv.mu.Lock()
		srv.contentType = ""
		srv.mu.Unlock()
		if res, err := p.Pull(context.Background()); err != nil || res.Status != http.StatusNotModified {
			t.Errorf("%s: the pull after a refusal: %+v, %v (sent %q)", c.name, res, err, srv.last())
		}
		ts.Close()
		if st := p.Stats(); st.Refused != 1 || st.OK != 1 || st.NotModified != 1 {
			t.Errorf("%s: stats %+v", c.name, st)
		}
	}
}

func TestKaspiFeedPuller304First(t *testing.T) {
	t.Parallel()
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusNotModified)
	}))
	t.Cleanup(ts.Close)
	p := NewFeedPuller(ts.URL, FeedOptions{})
	if _, err := p.Pull(context.Background()); err == nil || !strings.Contains(err.Error(), "before any") {
		t.Fatalf("a 304 first: %v", err)
	}
}
