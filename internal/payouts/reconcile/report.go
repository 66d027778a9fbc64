// Package reconcile reconciles a payout period: every order the marketplace paid
// (or charged, or reversed) in the period, and every order 1C holds of the period,
// is put beside the journal's create, cancel and return operations and 1C's order,
// and lands in one category; the lines of the cabinet as a whole are totalled by
// the marketplace's type; the totals are checked against the sum of every line and
// against the marketplace's own total of the period.
package reconcile

import (
	"fmt"
	"strings"
	"time"

	"github.com/shopspring/decimal"
)

// Category of a reconciled order.
type Category string

const (
	// PaidAsSold: accrued for the sale equals 1C's total.
	PaidAsSold Category = "paid_as_sold"
	// PaidWithDifference: accrued for the sale is not 1C's total (or 1C holds no
	// order or no total for it, or the period holds only charges for it).
	PaidWithDifference Category = "paid_with_difference"
	// ReturnedIn1C: a return line, and the journal's return is done in 1C.
	ReturnedIn1C Category = "returned_in_1c"
	// ReturnedNotIn1C: a return line, but no return in 1C: none registered, or it
	// is pending or failed.
	ReturnedNotIn1C Category = "returned_not_in_1c"
	// PaidUnknown: the marketplace paid an order the journal never registered.
	PaidUnknown Category = "paid_unknown"
	// In1CNotPaid: 1C holds a live order of the period and the period has no line
	// of it.
	In1CNotPaid Category = "in_1c_not_paid"
	// CancelledButPaid: cancelled (the journal's cancel done, or cancelled in 1C),
	// but the marketplace paid its sale.
	CancelledButPaid Category = "cancelled_but_paid"
)

// Categories in the order reports list them.
var Categories = []Category{PaidAsSold, PaidWithDifference, ReturnedIn1C, ReturnedNotIn1C, PaidUnknown,
	In1CNotPaid, CancelledButPaid}

// Fine reports whether an order of the category needs nothing done about it.
func (c Category) Fine() bool { return c == PaidAsSold || c == ReturnedIn1C }

// Return statuses of an item.
const (
	ReturnNone       = ""           // no return line in the period
	ReturnDone       = "done"       // the return is in 1C
	ReturnPending    = "pending"    // registered, not yet carried into 1C
	ReturnFailed     = "failed"     // registered, carrying it into 1C failed
	ReturnNotCreated = "no_return"  // a return line, no return operation at all
	ReturnDoneNoRef  = "done_noref" // done, but the result names no 1C document
)

// Item is one reconciled order.
type Item struct {
	Category Category `json:"category"`
	OrderID  string   `json:"order_id"`
	// Key is the journal key of the order's create ("" when the journal has none).
	Key    string `json:"key"`
	Status string `json:"status,omitempty"` // the create's status
	// OneCNumber and OneCRef are 1C's order ("" when 1C holds none).
	OneCNumber string `json:"onec_number"`
	OneCRef    string `json:"onec_ref"`
	// Ordered is when the order was placed (the journal's order, else 1C's date);
	// FirstPaid and LastPaid are the dates of its first and last line in the period.
	Ordered   *time.Time `json:"ordered,omitempty"`
	FirstPaid *time.Time `json:"first_paid,omitempty"`
	LastPaid  *time.Time `json:"last_paid,omitempty"`
	Currency  string     `json:"currency,omitempty"`
	// OneCTotal is 1C's total of the order, nil when 1C holds none or said none.
	OneCTotal *decimal.Decimal `json:"onec_total"`
	// The sums of the order's lines in the period, signed as the lines are.
	Accrued    decimal.Decimal `json:"accrued_for_sale"`
	Commission decimal.Decimal `json:"commission"`
	Logistics  decimal.Decimal `json:"logistics"`
	Penalty    decimal.Decimal `json:"penalty"`
	Other      decimal.Decimal `json:"other"`
	// Paid is the sum of the lines' amounts: what the order added to the payout.
	Paid decimal.Decimal `json:"paid"`
	// Difference is accrued for sale less 1C's total, nil when there is no 1C
	// total to compare with or the period holds no sale of the order.
	Difference *decimal.Decimal `json:"difference"`
	Lines      int              `json:"lines"`
	// Return is the return's status (Return* constants), ReturnRef its 1C
	// document.
	Return    string `json:"return_status,omitempty"`
	ReturnRef string `json:"return_ref,omitempty"`
	// Note is why the item is in its category, in English; NoteCode and NoteArgs
	// let a reader word it in its own language (Note with "ru").
	Note     string   `json:"note"`
	NoteCode NoteCode `json:"note_code"`
	NoteArgs NoteArgs `json:"note_args"`
}

// CategoryTotal is one category's count and money.
type CategoryTotal struct {
	Category Category        `json:"category"`
	Orders   int             `json:"orders"`
	Accrued  decimal.Decimal `json:"accrued_for_sale"`
	Paid     decimal.Decimal `json:"paid"`
	OneC     decimal.Decimal `json:"onec_total"`
}

// CabinetTotal is the cabinet's lines of one marketplace type.
type CabinetTotal struct {
	Type   string          `json:"type"`
	Lines  int             `json:"lines"`
	Amount decimal.Decimal `json:"amount"`
}

// Stated verdicts: how the marketplace's own total compares.
const (
	StatedEqual   = "equal"
	StatedDiffers = "differs"
	StatedNone    = "none" // the marketplace stated no total for the period
)

// Totals is the check of the money.
type Totals struct {
	// Lines and LinesSum are every line of the period and the sum of their amounts.
	Lines    int             `json:"lines"`
	LinesSum decimal.Decimal `json:"lines_sum"`
	// Orders is the sum of Paid over every category; Cabinet the cabinet lines'.
	Orders  decimal.Decimal `json:"orders"`
	Cabinet decimal.Decimal `json:"cabinet"`
	// Balanced: Orders + Cabinet equals LinesSum exactly.
	Balanced bool `json:"balanced"`
	// Stated is the marketplace's own total of the period, when it stated one;
	// StatedDifference is LinesSum less it.
	Stated           *decimal.Decimal `json:"stated"`
	StatedDifference *decimal.Decimal `json:"stated_difference"`
	StatedVerdict    string           `json:"stated_verdict"`
}

// Report is the whole reconciliation: `ordersync reconcile payouts --format json`
// prints it.
type Report struct {
	Source string `json:"source"`
	From   string `json:"from"` // YYYY-MM-DD
	To     string `json:"to"`   // YYYY-MM-DD, inclusive
	// Zone is the zone the period's days and the dates are in (ui.timezone).
	Zone       string          `json:"zone"`
	Currency   string          `json:"currency"`
	Categories []CategoryTotal `json:"categories"`
	Cabinet    []CabinetTotal  `json:"cabinet"`
	Totals     Totals          `json:"totals"`
	Items      []Item          `json:"items"`
}

// Clean reports whether nothing needs doing: every order is paid as sold or
// returned in 1C, the money balances, and a stated total is equal.
func (r Report) Clean() bool {
	for _, it := range r.Items {
		if !it.Category.Fine() {
			return false
		}
	}
	return r.Totals.Balanced && r.Totals.StatedVerdict != StatedDiffers
}

// NotFine counts the items that need something done.
func (r Report) NotFine() int {
	n := 0
	for _, it := range r.Items {
		if !it.Category.Fine() {
			n++
		}
	}
	return n
}

// Total is the category's line of the summary.
func (r Report) Total(c Category) CategoryTotal {
	for _, t := range r.Categories {
		if t.Category == c {
			return t
		}
	}
	return CategoryTotal{Category: c}
}

// ItemsOf are the category's items, in the report's order.
func (r Report) ItemsOf(c Category) []Item {
	var out []Item
	for _, it := range r.Items {
		if it.Category == c {
			out = append(out, it)
		}
	}
	return out
}

// NoteCode names the reason an item is in its category.
type NoteCode string

const (
	NoteAsSold         NoteCode = "as_sold"         // Accrued equals OneC; Withheld by the marketplace
	NoteAccruedDiffers NoteCode = "accrued_differs" // Accrued against OneC: Difference
	NoteNotIn1C        NoteCode = "not_in_1c"       // the create is Status (Error): 1C holds no order
	NoteNo1CTotal      NoteCode = "no_1c_total"     // 1C did not report the order's total
	NoteServicesOnly   NoteCode = "services_only"   // only charges in the period: Withheld
	NoteReturnedIn1C   NoteCode = "returned_in_1c"  // Number: the return's 1C document
	NoteReturnMissing  NoteCode = "return_missing"  // no return operation registered
	NoteReturnPending  NoteCode = "return_pending"  // Error: its last error, if any
	NoteReturnFailed   NoteCode = "return_failed"   // Error
	NoteReturnNoRef    NoteCode = "return_no_ref"   // done, its result names no 1C document
	NotePaidUnknown    NoteCode = "paid_unknown"    // Number: what 1C holds, if anything
	NoteNotPaid        NoteCode = "not_paid"        // Date: the period's last day
	NotePaidAfter      NoteCode = "paid_after"      // Date: the first line's date, after the period
	NoteCancelledPaid  NoteCode = "cancelled_paid"  // By: journal or 1c; Accrued
)

// NoteArgs are a note's arguments; each code uses some.
type NoteArgs struct {
	Number     string           `json:"number,omitempty"`
	Status     string           `json:"status,omitempty"`
	Error      string           `json:"error,omitempty"`
	Date       string           `json:"date,omitempty"` // YYYY-MM-DD
	By         string           `json:"by,omitempty"`   // journal, 1c
	Accrued    *decimal.Decimal `json:"accrued,omitempty"`
	OneC       *decimal.Decimal `json:"onec,omitempty"`
	Difference *decimal.Decimal `json:"difference,omitempty"`
	Withheld   *decimal.Decimal `json:"withheld,omitempty"`
}

// Money writes an amount for a note.
type Money func(decimal.Decimal) string

// PlainMoney is an amount with two decimals at least, as the CLI and the files
// write it.
func PlainMoney(d decimal.Decimal) string { return d.StringFixed(max(2, -d.Exponent())) }

// English is the note of code with args, as the CLI and the files write it.
func English(code NoteCode, a NoteArgs) string { return Note("en", code, a, PlainMoney) }

// Note is the note of code with args in lang (ru or en), amounts written by money.
func Note(lang string, code NoteCode, a NoteArgs, money Money) string {
	m := func(d *decimal.Decimal) string {
		if d == nil {
			return ""
		}
		return money(*d)
	}
	ru := lang == "ru"
	pick := func(en, r string) string {
		if ru {
			return r
		}
		return en
	}
	date := a.Date
	if ru {
		if t, err := time.Parse(time.DateOnly, a.Date); err == nil {
			date = t.Format("02.01.2006")
		}
	}
	withErr := func(s string) string {
		if a.Error != "" {
			return s + ": " + a.Error
		}
		return s
	}
	switch code {
	case NoteAsSold:
		return fmt.Sprintf(pick("accrued for the sale %s, as in 1C; the marketplace withheld %s",
			"начислено за продажу %s, как в 1С; маркетплейс удержал %s"), m(a.Accrued), m(a.Withheld))
	case NoteAccruedDiffers:
		return fmt.Sprintf(pick("accrued for the sale %s, 1C's total %s: a difference of %s; check the order's amount in 1C against the marketplace's",
			"начислено за продажу %s, сумма в 1С %s: расхождение %s; сверьте сумму заказа в 1С с маркетплейсом"),
			m(a.Accrued), m(a.OneC), m(a.Difference))
	case NoteNotIn1C:
		st := a.Status
		if ru {
			st = map[string]string{"pending": "ещё не выполнено", "failed": "завершилось ошибкой", "done": "выполнено"}[a.Status]
		}
		if a.Status == "done" {
			return pick("paid, but 1C no longer holds the order ordersync created; find what became of it in 1C",
				"оплачен, но заказа, созданного ordersync, в 1С больше нет; выясните, что с ним стало в 1С")
		}
		return withErr(fmt.Sprintf(pick("paid, but the order is not in 1C: its creation %s",
			"оплачен, но заказа нет в 1С: его создание %s"), st))
	case NoteNo1CTotal:
		return pick("1C did not report the order's total: compare the accrued amount by hand",
			"1С не сообщила сумму заказа: сверьте начисление вручную")
	case NoteServicesOnly:
		return fmt.Sprintf(pick("only charges for the order in this period (%s); its sale is paid in another period",
			"в этом периоде по заказу только удержания (%s); продажа оплачена в другом периоде"), m(a.Withheld))
	case NoteReturnedIn1C:
		return fmt.Sprintf(pick("returned; the return is in 1C (%s)", "возвращён; возврат есть в 1С (%s)"), a.Number)
	case NoteReturnMissing:
		return pick("the marketplace reversed the sale, but no return was registered: register the return in 1C",
			"маркетплейс сторнировал продажу, но возврат не зарегистрирован: оформите возврат в 1С")
	case NoteReturnPending:
		return withErr(pick("the marketplace reversed the sale; the return is not yet in 1C",
			"маркетплейс сторнировал продажу; возврат ещё не проведён в 1С"))
	case NoteReturnFailed:
		return withErr(pick("the marketplace reversed the sale; carrying the return into 1C failed",
			"маркетплейс сторнировал продажу; провести возврат в 1С не удалось"))
	case NoteReturnNoRef:
		return pick("the return is done, but names no 1C document: check it in 1C",
			"возврат выполнен, но документ 1С не указан: проверьте его в 1С")
	case NotePaidUnknown:
		if a.Number != "" {
			return fmt.Sprintf(pick("paid, but ordersync never registered the order; 1C holds %s, made by hand?",
				"оплачен, но ordersync этот заказ не регистрировал; в 1С есть %s — создан вручную?"), a.Number)
		}
		return pick("paid, but ordersync never registered the order and 1C holds none: find the order",
			"оплачен, но ordersync этот заказ не регистрировал и в 1С его нет: найдите заказ")
	case NoteNotPaid:
		return fmt.Sprintf(pick("in 1C, but the marketplace has paid nothing for it by %s",
			"есть в 1С, но маркетплейс ничего по нему не выплатил до %s"), date)
	case NotePaidAfter:
		return fmt.Sprintf(pick("in 1C; paid on %s, after the period: it is in that period's reconciliation",
			"есть в 1С; оплачен %s, после периода: он в сверке того периода"), date)
	case NoteCancelledPaid:
		by := pick("cancelled in 1C", "отменён в 1С")
		if a.By == "journal" {
			by = pick("cancelled (the journal's cancel is done)", "отменён (отмена в журнале выполнена)")
		}
		return fmt.Sprintf(pick("%s, but the marketplace paid its sale (%s): the goods may have shipped",
			"%s, но маркетплейс оплатил продажу (%s): товар мог быть отгружен"), by, m(a.Accrued))
	}
	return ""
}

// names are the categories' names, by language.
var names = map[string]map[Category]string{
	"en": {PaidAsSold: "Paid as sold", PaidWithDifference: "Paid with a difference", ReturnedIn1C: "Returned, in 1C",
		ReturnedNotIn1C: "Returned, not in 1C", PaidUnknown: "Paid, unknown to ordersync", In1CNotPaid: "In 1C, not paid",
		CancelledButPaid: "Cancelled, but paid"},
	"ru": {PaidAsSold: "Оплачен как продан", PaidWithDifference: "Оплачен с расхождением", ReturnedIn1C: "Возврат есть в 1С",
		ReturnedNotIn1C: "Возврата нет в 1С", PaidUnknown: "Оплачен, неизвестен ordersync", In1CNotPaid: "В 1С, не оплачен",
		CancelledButPaid: "Отменён, но оплачен"},
}

// Name is the category's name in lang (ru or en).
func (c Category) Name(lang string) string {
	if n, ok := names[lang][c]; ok {
		return n
	}
	return names["en"][c]
}

// ReturnWord is the return status in lang.
func ReturnWord(lang, status string) string {
	w := map[string][2]string{ReturnDone: {"in 1C", "в 1С"}, ReturnPending: {"pending", "в работе"},
		ReturnFailed: {"failed", "ошибка"}, ReturnNotCreated: {"not registered", "не зарегистрирован"},
		ReturnDoneNoRef: {"done, no 1C document", "выполнен, без документа 1С"}}[status]
	if lang == "ru" {
		return w[1]
	}
	return w[0]
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }
