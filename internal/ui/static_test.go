package ui

import (
	"strings"
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
