package ui

import (
	"fmt"
	"strings"
	"time"

	"github.com/shopspring/decimal"
)

// currencySigns are the signs amounts are written with; another currency is
// written by its ISO code.
var currencySigns = map[string]string{"KZT": "₸", "RUB": "₽", "USD": "$", "EUR": "€", "UZS": "сўм", "KGS": "сом", "BYN": "Br"}

// formatAmount is an exact amount with its currency, as an accountant reads it:
// −5 019,00 ₸ (ru; a true minus sign, no-break spaces), −5,019.00 ₸ (en).
func formatAmount(d decimal.Decimal, currency, lang string) string {
	s := formatMoney(d, lang)
	if rest, ok := strings.CutPrefix(s, "-"); ok {
		s = "\u2212" + rest
	}
	if currency == "" {
		return s
	}
	sign, ok := currencySigns[strings.ToUpper(currency)]
	if !ok {
		sign = strings.ToUpper(currency)
	}
	return s + "\u00a0" + sign
}

// formatWhen is a time to the minute in loc: 02.12.2026 02:50 (ru), 2026-12-02
// 02:50 (en); the footer names the zone.
func formatWhen(t time.Time, loc *time.Location, lang string) string {
	if t.IsZero() {
		return ""
	}
	if lang == "ru" {
		return t.In(loc).Format("02.01.2006 15:04")
	}
	return t.In(loc).Format("2006-01-02 15:04")
}

// formatDay is a date in loc: 02.12.2026 (ru), 2026-12-02 (en).
func formatDay(t time.Time, loc *time.Location, lang string) string {
	if lang == "ru" {
		return t.In(loc).Format("02.01.2006")
	}
	return t.In(loc).Format(time.DateOnly)
}

// formatShortWhen is a time within a run of attempts: 01.12 10:00 (ru), 12-01
// 10:00 (en).
func formatShortWhen(t time.Time, loc *time.Location, lang string) string {
	if lang == "ru" {
		return t.In(loc).Format("02.01 15:04")
	}
	return t.In(loc).Format("01-02 15:04")
}

// formatQuantity is an exact quantity as the language writes it: 1,5 (ru), 1.5
// (en); whole numbers without a fraction.
func formatQuantity(d decimal.Decimal, lang string) string {
	s := d.String()
	if lang == "ru" {
		s = strings.Replace(s, ".", ",", 1)
	}
	return strings.Replace(s, "-", "\u2212", 1)
}

// formatDuration is how long an attempt took, as the language writes it: 28 мс,
// 1,5 с, 2 мин 5 с (ru); 28ms, 1.5s, 2m5s (en).
func formatDuration(d time.Duration, lang string) string {
	if lang != "ru" {
		return d.Round(time.Millisecond).String()
	}
	switch {
	case d < time.Second:
		return fmt.Sprintf("%d\u00a0мс", d.Round(time.Millisecond).Milliseconds())
	case d < time.Minute:
		tenths := d.Round(100*time.Millisecond).Milliseconds() / 100
		if tenths%10 == 0 {
			return fmt.Sprintf("%d\u00a0с", tenths/10)
		}
		return fmt.Sprintf("%d,%d\u00a0с", tenths/10, tenths%10)
	}
	d = d.Round(time.Second)
	return fmt.Sprintf("%d\u00a0мин %d\u00a0с", int(d.Minutes()), int(d.Seconds())%60)
}
