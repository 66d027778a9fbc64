package ui

import (
	"bytes"
	"context"
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/shopspring/decimal"

	"github.com/ordersync/ordersync/internal/journal/export"
	payrec "github.com/ordersync/ordersync/internal/payouts/reconcile"
)

// PayoutsFunc reconciles one source's payouts over the days from..to (both
// inclusive, dates at midnight in the pages' zone).
type PayoutsFunc func(ctx context.Context, source string, from, to time.Time) (payrec.Report, error)

// payoutRow is one order of a category's section, as the page writes it.
type payoutRow struct {
	Item                                                       payrec.Item
	Ordered, FirstPaid, LastPaid                               string
	OneC, Accrued, Commission, Logistics, Penalty, Other, Paid string
	Difference, Return, Note                                   string
	Differs                                                    bool
}

// payoutSection is one category: its summary line and its orders.
type payoutSection struct {
	Category            payrec.Category
	Name, Hint          string
	Orders              int
	Accrued, Paid, OneC string
	Rows                []payoutRow
}

type payoutCabinet struct {
	Type   string
	Lines  int
	Amount string
}

type payoutsData struct {
	Available                               bool
	Sources                                 []string
	Source                                  string
	From, To                                string
	Problems                                []string
	Report                                  *payrec.Report
	Heading                                 string
	RanAt                                   time.Time
	XLSXURL                                 template.URL
	Sections                                []payoutSection
	Cabinet                                 []payoutCabinet
	CabinetSum, LinesSum, OrdersSum, Stated string
	Balance, Verdict                        string
}

func (s *Server) payoutsPage(w http.ResponseWriter, r *http.Request, u who) {
	v := r.URL.Query()
	d := payoutsData{Available: s.cfg.Payouts != nil, Sources: s.cfg.PayoutSources,
		Source: strings.TrimSpace(v.Get("source")), From: strings.TrimSpace(v.Get("from")), To: strings.TrimSpace(v.Get("to"))}
	title := s.cat.t("payouts_title")
	if !d.Available || (d.Source == "" && d.From == "" && d.To == "") {
		if d.From == "" && d.To == "" {
			// The last whole month: what a payout period usually is.
			today := s.cfg.Now().In(s.cfg.Location)
			first := time.Date(today.Year(), today.Month(), 1, 0, 0, 0, 0, s.cfg.Location)
			d.From = first.AddDate(0, -1, 0).Format(time.DateOnly)
			d.To = first.AddDate(0, 0, -1).Format(time.DateOnly)
		}
		s.render(w, r, http.StatusOK, "payouts", u, title, d)
		return
	}
	period, bad := s.sourceAndPeriod(d.Source, d.From, d.To)
	if len(bad) > 0 {
		d.Problems = bad
		s.render(w, r, http.StatusBadRequest, "payouts", u, title, d)
		return
	}
	rep, err := s.cfg.Payouts(r.Context(), d.Source, period.From.In(s.cfg.Location), period.To.In(s.cfg.Location))
	if err != nil {
		s.log.WarnContext(r.Context(), "ui: payout reconciliation failed", "source", d.Source, "err", err)
		d.Problems = []string{fmt.Sprintf(s.cat.t("err_payouts"), err.Error())}
		s.render(w, r, http.StatusBadGateway, "payouts", u, title, d)
		return
	}
	if v.Get("format") == "xlsx" {
		var buf bytes.Buffer
		if err := payrec.WriteXLSX(&buf, rep, s.cfg.Lang, s.cfg.Location); err != nil {
			s.failed(w, r, u, "write the payout reconciliation's xlsx", err)
			return
		}
		w.Header().Set("Content-Type", export.ContentTypeXLSX)
		w.Header().Set("Content-Disposition", fmt.Sprintf(`attachment; filename="payouts-%s-%s-%s.xlsx"`, rep.Source, rep.From, rep.To))
		w.Write(buf.Bytes())
		return
	}
	d.Report = &rep
	d.RanAt = s.cfg.Now()
	d.Heading = s.cat.tf("payouts_heading", export.SourceName(rep.Source),
		s.dateText(period.From.In(s.cfg.Location)), s.dateText(period.To.In(s.cfg.Location)))
	q := url.Values{"source": {d.Source}, "from": {d.From}, "to": {d.To}, "format": {"xlsx"}}
	d.XLSXURL = template.URL("/ui/payouts?" + q.Encode())
	s.payoutsView(&d, rep)
	s.render(w, r, http.StatusOK, "payouts", u, d.Heading, d)
}

// payoutsView words the report for the page: money with the currency, dates in
// the pages' zone, notes in the pages' language.
func (s *Server) payoutsView(d *payoutsData, rep payrec.Report) {
	lang, loc := s.cfg.Lang, s.cfg.Location
	cur := rep.Currency
	if strings.Contains(cur, ",") {
		cur = "" // several currencies: the amounts say none rather than a wrong one
	}
	money := func(x decimal.Decimal) string { return formatAmount(x, cur, lang) }
	moneyP := func(x *decimal.Decimal) string {
		if x == nil {
			return ""
		}
		return money(*x)
	}
	day := func(t *time.Time) string {
		if t == nil {
			return ""
		}
		return formatDay(*t, loc, lang)
	}
	for _, c := range payrec.Categories {
		tot := rep.Total(c)
		sec := payoutSection{Category: c, Name: c.Name(lang), Hint: s.cat.t("payouts_hint_" + string(c)), Orders: tot.Orders,
			Accrued: money(tot.Accrued), Paid: money(tot.Paid), OneC: money(tot.OneC)}
		for _, it := range rep.ItemsOf(c) {
			row := payoutRow{Item: it, Ordered: day(it.Ordered), FirstPaid: day(it.FirstPaid), LastPaid: day(it.LastPaid),
				OneC: moneyP(it.OneCTotal), Accrued: money(it.Accrued), Commission: money(it.Commission),
				Logistics: money(it.Logistics), Penalty: money(it.Penalty), Other: money(it.Other), Paid: money(it.Paid),
				Difference: moneyP(it.Difference), Differs: it.Difference != nil && !it.Difference.IsZero(),
				Note: payrec.Note(lang, it.NoteCode, it.NoteArgs, money)}
			if it.Return != "" {
				row.Return = payrec.ReturnWord(lang, it.Return)
			}
			sec.Rows = append(sec.Rows, row)
		}
		d.Sections = append(d.Sections, sec)
	}
	for _, c := range rep.Cabinet {
		d.Cabinet = append(d.Cabinet, payoutCabinet{Type: c.Type, Lines: c.Lines, Amount: money(c.Amount)})
	}
	t := rep.Totals
	d.CabinetSum, d.LinesSum, d.OrdersSum = money(t.Cabinet), money(t.LinesSum), money(t.Orders)
	d.Stated = moneyP(t.Stated)
	d.Balance, d.Verdict = payrec.Balance(lang, t, money), payrec.Verdict(lang, t, money)
}

// The payouts page's words.
func init() {
	for k, v := range map[string]string{
		"nav_payouts":            "Выплаты",
		"payouts_title":          "Сверка выплат",
		"payouts_unavailable":    "Сверка выплат в этой конфигурации недоступна.",
		"payouts_note":           "Каждая строка выплаты маркетплейса за период (даты включительно) сверяется с журналом ordersync и заказами в 1С.",
		"payouts_heading":        "Выплаты %s: %s — %s",
		"payouts_ran_at":         "Сверено %s.",
		"payouts_xlsx":           "Скачать XLSX",
		"payouts_summary":        "Итоги по категориям",
		"payouts_orders":         "Заказов",
		"payouts_accrued":        "Начислено",
		"payouts_paid":           "Выплачено",
		"payouts_onec":           "Сумма в 1С",
		"payouts_cabinet":        "Строки кабинета (без заказа)",
		"payouts_type":           "Тип",
		"payouts_lines":          "Строк",
		"payouts_amount":         "Сумма",
		"payouts_no_cabinet":     "Строк кабинета за период нет.",
		"payouts_check":          "Проверка итогов",
		"payouts_lines_sum":      "Все строки периода",
		"payouts_orders_sum":     "Строки заказов",
		"payouts_cabinet_sum":    "Строки кабинета",
		"payouts_stated":         "Итог маркетплейса",
		"payouts_none":           "Таких заказов нет.",
		"payouts_col_order":      "Заказ",
		"payouts_col_onec":       "Заказ 1С",
		"payouts_col_ordered":    "Дата заказа",
		"payouts_col_paid_on":    "Строки",
		"payouts_col_onec_total": "В 1С",
		"payouts_col_commission": "Комиссия",
		"payouts_col_logistics":  "Логистика",
		"payouts_col_penalty":    "Штрафы",
		"payouts_col_other":      "Прочее",
		"payouts_col_diff":       "Начислено − 1С",
		"payouts_col_return":     "Возврат",
		"err_payouts":            "Сверка выплат не выполнена: %s",

		"payouts_hint_paid_as_sold":         "Начислено за продажу ровно столько, сколько в 1С. Комиссия, логистика и прочие удержания маркетплейса показаны для проводок; делать ничего не нужно.",
		"payouts_hint_paid_with_difference": "Начисление за продажу не совпадает с суммой в 1С (или заказа либо суммы в 1С нет, или в периоде по заказу только удержания). Сверьте цену и количество в 1С с маркетплейсом; скидки маркетплейса проведите как скидку.",
		"payouts_hint_returned_in_1c":       "Маркетплейс сторнировал продажу, возврат проведён в 1С. Делать ничего не нужно.",
		"payouts_hint_returned_not_in_1c":   "Маркетплейс сторнировал продажу, но возврата в 1С нет: он не зарегистрирован, ещё в работе или завершился ошибкой. Откройте операцию в журнале или оформите возврат в 1С.",
		"payouts_hint_paid_unknown":         "Маркетплейс заплатил за заказ, которого нет в журнале ordersync. Найдите заказ: он мог быть создан вручную или до подключения ordersync.",
		"payouts_hint_in_1c_not_paid":       "Заказ есть в 1С и датирован периодом, но строк выплаты по нему за период нет. Обычно маркетплейс платит позже; если он не появится в следующем периоде — выясните у маркетплейса.",
		"payouts_hint_cancelled_but_paid":   "Заказ отменён, а маркетплейс оплатил продажу: товар, вероятно, отгружен. Восстановите заказ в 1С или выясните у маркетплейса.",
	} {
		ru[k] = v
	}
	for k, v := range map[string]string{
		"nav_payouts":            "Payouts",
		"payouts_title":          "Payout reconciliation",
		"payouts_unavailable":    "The payout reconciliation is not available in this configuration.",
		"payouts_note":           "Every payout line of the marketplace in the period (dates inclusive) is put beside ordersync's journal and 1C's orders.",
		"payouts_heading":        "%s payouts: %s — %s",
		"payouts_ran_at":         "Reconciled %s.",
		"payouts_xlsx":           "Download XLSX",
		"payouts_summary":        "Totals by category",
		"payouts_orders":         "Orders",
		"payouts_accrued":        "Accrued",
		"payouts_paid":           "Paid",
		"payouts_onec":           "Amount in 1C",
		"payouts_cabinet":        "Cabinet lines (no order)",
		"payouts_type":           "Type",
		"payouts_lines":          "Lines",
		"payouts_amount":         "Amount",
		"payouts_no_cabinet":     "No cabinet lines in the period.",
		"payouts_check":          "Totals check",
		"payouts_lines_sum":      "Every line of the period",
		"payouts_orders_sum":     "Orders' lines",
		"payouts_cabinet_sum":    "Cabinet lines",
		"payouts_stated":         "Marketplace's total",
		"payouts_none":           "No such orders.",
		"payouts_col_order":      "Order",
		"payouts_col_onec":       "1C order",
		"payouts_col_ordered":    "Ordered",
		"payouts_col_paid_on":    "Lines",
		"payouts_col_onec_total": "In 1C",
		"payouts_col_commission": "Commission",
		"payouts_col_logistics":  "Logistics",
		"payouts_col_penalty":    "Penalties",
		"payouts_col_other":      "Other",
		"payouts_col_diff":       "Accrued − 1C",
		"payouts_col_return":     "Return",
		"err_payouts":            "The payout reconciliation failed: %s",

		"payouts_hint_paid_as_sold":         "Accrued for the sale exactly what 1C holds. The marketplace's commission, logistics and other charges are shown for the postings; nothing to do.",
		"payouts_hint_paid_with_difference": "Accrued for the sale is not 1C's amount (or 1C holds no order or no amount, or the period holds only charges for the order). Compare the price and quantity in 1C with the marketplace's; post a marketplace discount as a discount.",
		"payouts_hint_returned_in_1c":       "The marketplace reversed the sale and the return is in 1C. Nothing to do.",
		"payouts_hint_returned_not_in_1c":   "The marketplace reversed the sale, but 1C has no return: none was registered, or it is pending or failed. Open its operation in the journal, or enter the return in 1C.",
		"payouts_hint_paid_unknown":         "The marketplace paid for an order ordersync's journal does not have. Find the order: it may have been made by hand, or before ordersync was connected.",
		"payouts_hint_in_1c_not_paid":       "1C holds the order, dated in the period, but the period has no payout line of it. Marketplaces usually pay later; if it is not in the next period either, ask the marketplace.",
		"payouts_hint_cancelled_but_paid":   "The order is cancelled, yet the marketplace paid its sale: the goods probably shipped. Restore the order in 1C, or ask the marketplace.",
	} {
		en[k] = v
	}
}
