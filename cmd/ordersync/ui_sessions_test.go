package main

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/ordersync/ordersync/internal/eventually"
	"github.com/ordersync/ordersync/internal/sim/onecsim"
)

// pagesOf starts `ordersync run` with the pages on a free loopback port and anna
// as their operator, and returns the service and the pages' base (http://host:port).
func pagesOf(t *testing.T, e *env, users string) (*service, string) {
	t.Helper()
	svc := e.startService("ORDERSYNC_UI__LISTEN=127.0.0.1:0", "ORDERSYNC_UI__USERS="+users, "ORDERSYNC_UI__LANG=en")
	var pages string
	eventually.True(t, "the UI's pages address in the log", func() bool {
		sc := bufio.NewScanner(strings.NewReader(svc.stderr.String()))
		for sc.Scan() {
			var rec map[string]any
			if json.Unmarshal(sc.Bytes(), &rec) == nil && strings.HasPrefix(rec["msg"].(string), "ui: listening on http://127.0.0.1:") {
				pages, _ = rec["url"].(string)
			}
		}
		return pages != ""
	})
	return svc, strings.TrimSuffix(pages, "/ui/journal")
}

// pagesClient is one browser: its cookies go to every replica (a cookie ignores the
// port), and it sees each redirect.
type pagesClient struct {
	t  *testing.T
	hc *http.Client
}

func newPagesClient(t *testing.T) *pagesClient {
	jar, _ := cookiejar.New(nil)
	return &pagesClient{t: t, hc: &http.Client{Jar: jar, Timeout: 10 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

var csrfField = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

func (c *pagesClient) do(resp *http.Response, err error) (int, string, string) {
	c.t.Helper()
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header.Get("Location"), string(b)
}

func (c *pagesClient) signIn(base, name, password string) {
	c.t.Helper()
	code, _, page := c.do(c.hc.Get(base + "/ui/signin"))
	m := csrfField.FindStringSubmatch(page)
	if code != http.StatusOK || m == nil {
		c.t.Fatalf("GET %s/ui/signin: %d\n%s", base, code, page)
	}
	code, loc, page := c.do(c.hc.PostForm(base+"/ui/signin", url.Values{"name": {name}, "password": {password}, "csrf": {m[1]}, "next": {"/ui/journal"}}))
	if code != http.StatusSeeOther || loc != "/ui/journal" {
		c.t.Fatalf("sign-in on %s: %d to %q\n%s", base, code, loc, page)
	}
}

// journal is the journal's page on base when signed in (its csrf token), "" when
// sent to sign in.
func (c *pagesClient) journal(base string) string {
	c.t.Helper()
	code, loc, page := c.do(c.hc.Get(base + "/ui/journal"))
	switch {
	case code == http.StatusOK && strings.Contains(page, `data-user="anna"`):
		m := csrfField.FindStringSubmatch(page)
		if m == nil {
			c.t.Fatalf("the journal on %s has no csrf token:\n%s", base, page)
		}
		return m[1]
	case code == http.StatusSeeOther && strings.HasPrefix(loc, "/ui/signin"):
		return ""
	}
	c.t.Fatalf("GET %s/ui/journal: %d to %q\n%s", base, code, loc, page)
	return ""
}

func annaUsers(t *testing.T, password string) string {
	t.Helper()
	hash, err := bcrypt.GenerateFromPassword([]byte(password), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	users, _ := json.Marshal([]map[string]string{{"name": "anna", "password_hash": string(hash), "role": "operator"}})
	return string(users)
}

// Two replicas of `ordersync run` on one PostgreSQL database share the pages'
// sessions: a sign-in on one holds on the other, a sign-out on the other ends it on
// the first.
func TestRunReplicasShareThePagesSessions(t *testing.T) {
	t.Parallel()
	e := newEnvOn(t, "postgres", onecsim.Options{}, true)
	users := annaUsers(t, "pw-анна")
	svc1, one := pagesOf(t, e, users)
	svc2, two := pagesOf(t, e, users)

	c := newPagesClient(t)
	c.signIn(one, "anna", "pw-анна")
	if c.journal(one) == "" {
		t.Fatal("signed out on the replica that signed in")
	}
	csrf := c.journal(two)
	if csrf == "" {
		t.Fatal("the other replica does not know the session")
	}
	if code, loc, page := c.do(c.hc.PostForm(two+"/ui/signout", url.Values{"csrf": {csrf}})); code != http.StatusSeeOther {
		t.Fatalf("sign-out on the second replica: %d to %q\n%s", code, loc, page)
	}
	if c.journal(one) != "" {
		t.Fatal("signed out on the second replica, still signed in on the first")
	}

	for _, svc := range []*service{svc1, svc2} {
		svc.signal(syscall.SIGTERM)
		if code := svc.wait(30 * time.Second); code != 0 {
			t.Fatalf("exit %d after SIGTERM:\n%s", code, svc.stderr.String())
		}
	}
}

// A restart of `ordersync run` on the embedded SQLite file signs nobody out.
func TestRunKeepsThePagesSessionsOverARestart(t *testing.T) {
	t.Parallel()
	e := newEnvOn(t, "sqlite", onecsim.Options{}, true)
	users := annaUsers(t, "pw-анна")
	svc, before := pagesOf(t, e, users)
	c := newPagesClient(t)
	c.signIn(before, "anna", "pw-анна")
	if c.journal(before) == "" {
		t.Fatal("signed out right after the sign-in")
	}
	svc.signal(syscall.SIGTERM)
	if code := svc.wait(30 * time.Second); code != 0 {
		t.Fatalf("exit %d after SIGTERM:\n%s", code, svc.stderr.String())
	}

	svc, after := pagesOf(t, e, users)
	if c.journal(after) == "" {
		t.Fatal("the restart signed anna out")
	}
	svc.signal(syscall.SIGTERM)
	if code := svc.wait(30 * time.Second); code != 0 {
		t.Fatalf("exit %d after SIGTERM:\n%s", code, svc.stderr.String())
	}
}
