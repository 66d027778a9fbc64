package ui

import (
	"io/fs"
	"net/http"
	"strings"

	"github.com/ordersync/ordersync/internal/hostcheck"
)

func (s *Server) routes() http.Handler {
	mux := http.NewServeMux()
	home := func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/ui/journal", http.StatusSeeOther)
	}
	mux.HandleFunc("GET /{$}", home)
	mux.HandleFunc("GET /ui", home)
	mux.HandleFunc("GET /ui/{$}", home)
	mux.HandleFunc("GET /ui/static/{name}", staticFile)

	mux.HandleFunc("GET /ui/signin", s.signinForm)
	mux.HandleFunc("POST /ui/signin", s.signin)
	mux.HandleFunc("POST /ui/signout", s.signoutAction())

	mux.HandleFunc("GET /ui/journal", s.page(s.journalPage))
	mux.HandleFunc("GET /ui/journal/op", s.page(s.opPage))
	mux.HandleFunc("GET /ui/journal/export.csv", s.page(s.exportCSV))
	mux.HandleFunc("GET /ui/journal/export.xlsx", s.page(s.exportXLSX))
	mux.HandleFunc("POST /ui/journal/resync", s.action(s.resync))
	mux.HandleFunc("POST /ui/outbox/requeue", s.action(s.requeueEvent))
	mux.HandleFunc("GET /ui/reconcile", s.page(s.reconcilePage))
	mux.HandleFunc("GET /ui/payouts", s.page(s.payoutsPage))
	// No catch-all: it would match a GET on a POST route, which must answer 405.
	return hostcheck.Guard(secure(mux), s.cfg.Hosts, "ui", s.log)
}

// staticFile serves one file of static/ by its name: no directory is listed, and
// no name reaches outside static/ (the templates beside it are not for reading).
func staticFile(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	if !fs.ValidPath(name) || strings.ContainsAny(name, `/\`) || name == "." || name == ".." {
		http.NotFound(w, r)
		return
	}
	f, err := fs.Stat(assets, "static/"+name)
	if err != nil || f.IsDir() {
		http.NotFound(w, r)
		return
	}
	http.ServeFileFS(w, r, assets, "static/"+name)
}

// secure sets the headers every answer carries: nothing is framed, run from
// elsewhere, sniffed, or cached, and no address leaves for another site.
func secure(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", "default-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'; object-src 'none'")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Referrer-Policy", "same-origin")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Cache-Control", "no-store")
		next.ServeHTTP(w, r)
	})
}
