package ui

import (
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
)

// The static files are served, and nothing else under /ui/static/: no directory
// listing, no way up to the templates, with or without a session.
func TestStaticServesItsFilesOnly(t *testing.T) {
	s := newSite(t, openStores(t, "sqlite"), nil)
	b := s.browser()
	if a := b.get("/ui/static/style.css"); a.status != 200 || !strings.Contains(a.header.Get("Content-Type"), "css") {
		t.Fatalf("style.css: %d %s", a.status, a.header.Get("Content-Type"))
	}
	for _, path := range []string{"/ui/static/", "/ui/static/%2e%2e/", "/ui/static/%2e%2e/templates/op.html",
		"/ui/static/../templates/op.html", "/ui/static/%2e%2e/templates/", "/ui/static/nothing.css"} {
		a := b.get(path)
		// A path with a literal "..", cleaned by the router, is redirected out of
		// /ui/static/ (to a page that does not exist); any other answer is 404.
		redirected := (a.status == 301 || a.status == 307) && !strings.HasPrefix(a.header.Get("Location"), "/ui/static/")
		if (a.status != 404 && !redirected) || strings.Contains(a.body, "{{") || strings.Contains(a.body, "<pre>") {
			t.Errorf("%s: %d %q, want 404 and no listing or template", path, a.status, truncate(a.body, 200))
		}
	}
}

// DNS rebinding: in the no-users loopback mode a page asked for under another
// site's name is refused, reads and actions alike; under its own address it is
// served, and under a name in ui.hosts.
func TestForeignHostRefused(t *testing.T) {
	s := newSite(t, openStores(t, "sqlite"), func(c *Config) { c.Hosts = []string{"journal.shop.kz"} })
	b := s.browser()
	for _, path := range []string{"/ui/journal", "/ui/journal/export.csv"} {
		if a := b.getHost(path, "rebind.attacker.example"); a.status != 403 {
			t.Errorf("%s for rebind.attacker.example: %d, want 403", path, a.status)
		}
		if a := b.getHost(path, "journal.shop.kz"); a.status != 200 {
			t.Errorf("%s for journal.shop.kz (ui.hosts): %d, want 200", path, a.status)
		}
		if a := b.get(path); a.status != 200 {
			t.Errorf("%s for its own address: %d, want 200", path, a.status)
		}
	}
	req, _ := http.NewRequest(http.MethodPost, s.url+"/ui/outbox/requeue", strings.NewReader("id=1"))
	req.Host = "rebind.attacker.example"
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 403 {
		t.Errorf("a requeue POST for rebind.attacker.example: %d, want 403", resp.StatusCode)
	}
}

func (b *browser) getHost(path, host string) answer {
	b.t.Helper()
	req, err := http.NewRequest(http.MethodGet, b.site.url+path, nil)
	if err != nil {
		b.t.Fatal(err)
	}
	req.Host = host
	resp, err := b.c.Do(req)
	if err != nil {
		b.t.Fatal(err)
	}
	defer resp.Body.Close()
	return answer{status: resp.StatusCode, header: resp.Header}
}

// Sign-ins are limited: after five failures for a name, the next attempt is
// refused before its password is checked (no bcrypt), with a message, even with
// the right password; another name from the same address still signs in.
func TestSignInLimited(t *testing.T) {
	var mu sync.Mutex
	outcomes := map[string]int{}
	s := newSite(t, openStores(t, "sqlite"), func(c *Config) {
		c.Users = []User{testUser(t, "anna", RoleViewer), testUser(t, "boris", RoleViewer)}
		c.OnSignIn = func(o string) { mu.Lock(); outcomes[o]++; mu.Unlock() }
	})
	b := s.browser()
	for i := range 5 {
		if a := b.signIn("anna", "wrong"); a.status != http.StatusUnauthorized {
			t.Fatalf("failure %d: %d, want 401", i+1, a.status)
		}
	}
	a := b.signIn("anna", testPassword)
	if a.status != http.StatusTooManyRequests || !strings.Contains(a.body, "Слишком много неудачных попыток") {
		t.Fatalf("the sixth attempt: %d, want 429 with the message\n%s", a.status, a.body)
	}
	s.browser().mustSignIn("boris")
	mu.Lock()
	defer mu.Unlock()
	if outcomes["failed"] != 5 || outcomes["limited"] != 1 || outcomes["ok"] != 1 {
		t.Fatalf("outcomes %v, want 5 failed, 1 limited, 1 ok", outcomes)
	}
}

// With Secure cookies, a sign-in form reached over plain HTTP says the browser
// will drop the cookie; through a TLS proxy it does not.
func TestSignInWarnsOfPlainHTTP(t *testing.T) {
	s := newSite(t, openStores(t, "sqlite"), func(c *Config) {
		c.Users = []User{testUser(t, "anna", RoleViewer)}
		c.SecureCookie = true
	})
	b := s.browser()
	if a := b.get("/ui/signin"); a.status != 200 || !strings.Contains(a.body, "signin-plain-http") {
		t.Fatalf("sign-in over plain HTTP: %d, no warning", a.status)
	}
	req, _ := http.NewRequest(http.MethodGet, s.url+"/ui/signin", nil)
	req.Header.Set("X-Forwarded-Proto", "https")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if strings.Contains(string(body), "signin-plain-http") {
		t.Fatal("the warning shows behind a TLS proxy")
	}
}
