package ui

import (
	"bytes"
	"embed"
	"fmt"
	"html/template"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/shopspring/decimal"
)

//go:embed templates/*.html static/*
var assets embed.FS

var pages = []string{"journal", "op", "signin", "reconcile", "payouts", "error"}

func parseTemplates(funcs template.FuncMap) (map[string]*template.Template, error) {
	out := map[string]*template.Template{}
	for _, p := range pages {
		t, err := template.New(p).Funcs(funcs).ParseFS(assets, "templates/layout.html", "templates/"+p+".html")
		if err != nil {
			return nil, fmt.Errorf("ui: template %s: %w", p, err)
		}
		out[p] = t
	}
	return out, nil
}

// view is what every page's layout gets.
type view struct {
	Lang  string
	Title string
	Who   who
	Zone  string // the pages' time zone, by name
	Page  string
	Data  any
}

// render writes the page with status. A template that fails (an unknown catalogue
// key) is a bug: 500 and a log line, never half a page.
func (s *Server) render(w http.ResponseWriter, r *http.Request, status int, page string, u who, title string, data any) {
	var buf bytes.Buffer
	v := view{Lang: s.cfg.Lang, Title: title, Who: u, Zone: s.cfg.Location.String(), Page: page, Data: data}
	if err := s.tmpl[page].ExecuteTemplate(&buf, "layout", v); err != nil {
		s.log.ErrorContext(r.Context(), "ui: render a page", "page", page, "err", err)
		http.Error(w, "internal error: "+page+" page", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	w.Write(buf.Bytes())
}

type errorData struct {
	Code    int
	Message string
	SignIn  bool
}

// refuse answers 403 with the catalogue's message.
func (s *Server) refuse(w http.ResponseWriter, r *http.Request, u who, key string) {
	s.render(w, r, http.StatusForbidden, "error", u, s.cat.t("err_forbidden_title"),
		errorData{Code: http.StatusForbidden, Message: s.cat.t(key), SignIn: u.Name == "" && len(s.users) > 0})
}

func (s *Server) notFound(w http.ResponseWriter, r *http.Request, u who, msg string) {
	s.render(w, r, http.StatusNotFound, "error", u, s.cat.t("err_not_found_title"),
		errorData{Code: http.StatusNotFound, Message: msg})
}

// failed answers 500 for a store that did not answer, saying so; the cause is logged.
func (s *Server) failed(w http.ResponseWriter, r *http.Request, u who, what string, err error) {
	s.log.ErrorContext(r.Context(), "ui: "+what, "err", err, "path", r.URL.Path)
	s.render(w, r, http.StatusInternalServerError, "error", u, s.cat.t("err_internal_title"),
		errorData{Code: http.StatusInternalServerError, Message: s.cat.t("err_store")})
}

// Times: "2026-11-03 14:05:09 +05" in the pages' zone (the zone's name is in the
// column headers and the footer).
func formatTime(t time.Time, loc *time.Location) string {
	if t.IsZero() {
		return ""
	}
	t = t.In(loc)
	_, off := t.Zone()
	sign := "+"
	if off < 0 {
		sign, off = "-", -off
	}
	zone := fmt.Sprintf("%s%02d", sign, off/3600)
	if m := off % 3600 / 60; m != 0 {
		zone += fmt.Sprintf(":%02d", m)
	}
	return t.Format(time.DateTime) + " " + zone
}

// formatMoney writes an exact amount with two decimals, digits grouped as the
// language writes them: 15 990,00 (ru), 15,990.00 (en).
func formatMoney(d decimal.Decimal, lang string) string {
	s := d.StringFixed(2)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	whole, frac, _ := strings.Cut(s, ".")
	group, point := ",", "."
	if lang == "ru" {
		group, point = "\u00a0", ","
	}
	var b strings.Builder
	if neg {
		b.WriteString("-")
	}
	for i, r := range whole {
		if i > 0 && (len(whole)-i)%3 == 0 {
			b.WriteString(group)
		}
		b.WriteRune(r)
	}
	b.WriteString(point)
	b.WriteString(frac)
	return b.String()
}

func truncate(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n]) + "…"
}

func (s *Server) funcs() template.FuncMap {
	loc := s.cfg.Location
	return template.FuncMap{
		"t": func(key string) (string, error) { return s.cat.lookup(key) },
		"tf": func(key string, args ...any) (string, error) {
			f, err := s.cat.lookup(key)
			if err != nil {
				return "", err
			}
			return fmt.Sprintf(f, args...), nil
		},
		// label is the catalogue's word for a value of a kind (status_done, …), the
		// value itself when the catalogue has none (a kind added later).
		"label": func(prefix string, value any) string { return s.cat.label(prefix, value) },
		"time":  func(t time.Time) string { return formatTime(t, loc) },
		"timep": func(t *time.Time) string {
			if t == nil {
				return ""
			}
			return formatTime(*t, loc)
		},
		"iso": func(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) },
		"money": func(d *decimal.Decimal) string {
			if d == nil {
				return ""
			}
			return formatMoney(*d, s.cfg.Lang)
		},
		"when": func(t time.Time) string { return formatWhen(t, loc, s.cfg.Lang) },
		"whenp": func(t *time.Time) string {
			if t == nil {
				return ""
			}
			return formatWhen(*t, loc, s.cfg.Lang)
		},
		"short": func(t time.Time) string { return formatShortWhen(t, loc, s.cfg.Lang) },
		// amount is money with its currency: −5 019,00 ₸.
		"amount": func(d *decimal.Decimal, currency string) string {
			if d == nil {
				return ""
			}
			return formatAmount(*d, currency, s.cfg.Lang)
		},
		"amountv":  func(d decimal.Decimal, currency string) string { return formatAmount(d, currency, s.cfg.Lang) },
		"qty":      func(d decimal.Decimal) string { return formatQuantity(d, s.cfg.Lang) },
		"detail":   s.eventDetail,
		"truncate": truncate,
		"actor":    s.actorLabel,
		"onecDate": s.oneCDate,
		"join":     strings.Join,
	}
}

// oneCDate is 1C's zone-less date, in 1C's own zone: 03.11.2026 10:05 (ru).
func (s *Server) oneCDate(d string) string {
	if t, err := time.Parse("2006-01-02T15:04:05", d); err == nil {
		return formatWhen(t, time.UTC, s.cfg.Lang)
	}
	return d
}

// actorLabel says who an actor is (journal.ActorOf), in words.
func (s *Server) actorLabel(actor string) string {
	if actor == "" {
		return s.cat.t("actor_none")
	}
	kind, rest, _ := strings.Cut(actor, ":")
	switch kind {
	case "retry":
		return s.cat.t("actor_retry")
	case "poller", "webhook", "cli", "ui":
		return fmt.Sprintf(s.cat.t("actor_"+kind), rest)
	case "bulk":
		return fmt.Sprintf(s.cat.t("actor_bulk"), s.actorLabel(rest))
	}
	return actor
}
