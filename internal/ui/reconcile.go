package ui

import (
	"fmt"
	"net/http"
	"strings"

	"github.com/ordersync/ordersync/internal/journal/filter"
	"github.com/ordersync/ordersync/internal/reconcile"
)

type reconcileData struct {
	Available  bool
	Sources    []string
	Source     string
	From, To   string
	Problems   []string
	Report     *reconcile.Report
	Categories []reconcile.Category
	NotOK      int
}

func (s *Server) reconcilePage(w http.ResponseWriter, r *http.Request, u who) {
	v := r.URL.Query()
	d := reconcileData{Available: s.cfg.Reconcile != nil, Sources: s.cfg.ReconcileSources,
		Source: strings.TrimSpace(v.Get("source")), From: strings.TrimSpace(v.Get("from")), To: strings.TrimSpace(v.Get("to")),
		Categories: reconcile.Categories}
	title := s.cat.t("reconcile_title")
	if !d.Available || (d.Source == "" && d.From == "" && d.To == "") {
		if d.From == "" && d.To == "" {
			today := s.cfg.Now().In(s.cfg.Location)
			d.To = today.Format("2006-01-02")
			d.From = today.AddDate(0, 0, -(defaultDays - 1)).Format("2006-01-02")
		}
		s.render(w, r, http.StatusOK, "reconcile", u, title, d)
		return
	}
	var bad []string
	if d.Source == "" {
		bad = append(bad, s.cat.t("bad_reconcile_source"))
	} else if !filter.IsSource(d.Source) {
		bad = append(bad, fmt.Sprintf(s.cat.t("bad_source"), d.Source))
	}
	if d.From == "" || d.To == "" {
		bad = append(bad, s.cat.t("bad_reconcile_period"))
	}
	period, err := filter.ParsePeriod(d.From, d.To)
	bad = append(bad, s.filterProblems(err)...)
	if len(bad) > 0 {
		d.Problems = bad
		s.render(w, r, http.StatusBadRequest, "reconcile", u, title, d)
		return
	}
	rep, err := s.cfg.Reconcile(r.Context(), d.Source, period.From.In(s.cfg.Location), period.To.In(s.cfg.Location))
	if err != nil {
		// The reconciliation's own errors name their cause (a connector not enabled,
		// 1C not answering): the accountant reads them.
		s.log.WarnContext(r.Context(), "ui: reconciliation failed", "source", d.Source, "err", err)
		d.Problems = []string{fmt.Sprintf(s.cat.t("err_reconcile"), err.Error())}
		s.render(w, r, http.StatusBadGateway, "reconcile", u, title, d)
		return
	}
	for _, it := range rep.Items {
		if it.Category != reconcile.OK {
			d.NotOK++
		}
	}
	d.Report = &rep
	s.render(w, r, http.StatusOK, "reconcile", u, title, d)
}
