package order

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/shopspring/decimal"
)

// The rules every text, time and number from outside obeys before anything is
// stored: the same whatever the store (PostgreSQL refuses NUL and invalid UTF-8 in
// text and jsonb, SQLite takes them, so the check is made here, before either sees
// them) and within what 1C accepts.
//
//   - Text is valid UTF-8 (checked on the raw bytes, before a JSON decoder replaces a
//     bad sequence by U+FFFD) and holds no control character (Unicode Cc: NUL, the
//     other C0 codes, DEL, C1). Free text (comments, reasons) may hold tab, line feed
//     and carriage return; names, SKUs, phones, e-mails and warehouses are one line.
//   - An id (external_id, number, a marketplace's key id, a webhook-id) is printable
//     (unicode.IsPrint: no control, format or non-ASCII space characters) and has no
//     leading or trailing space; a key id also has no space, no ':' (the key's
//     separator) and no U+FFFD (the trace of a replaced byte).
//   - A time lies in [MinTime, MaxTime): 1C's Date holds years 1 to 3999, and the
//     margin of a day keeps every zone's local time inside 2000–3999 too; PostgreSQL
//     and RFC 3339's four-digit year hold all of it. Times are strict RFC 3339 (upper
//     case T and Z, two-digit fields, an offset within ±23:59).
//   - A decimal has at most MaxDecimalDigits significant digits (1C's Число holds 38)
//     and is written in at most MaxNumberText characters, so no arithmetic on it can
//     take unbounded time or memory.

// MinTime and MaxTime bound every time of an order: MinTime ≤ t < MaxTime.
var (
	MinTime = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)
	MaxTime = time.Date(3999, 12, 31, 0, 0, 0, 0, time.UTC)
)

// Limits of numbers.
const (
	MaxDecimalDigits = 38
	MaxNumberText    = 100
)

// CheckTime says what is wrong with t ("" when nothing): outside [MinTime, MaxTime).
func CheckTime(t time.Time) string {
	if t.Before(MinTime) || !t.Before(MaxTime) {
		return fmt.Sprintf("%s is outside the accepted range %s to %s", formatAnyTime(t),
			MinTime.Format(time.RFC3339), MaxTime.Add(-time.Second).Format(time.RFC3339))
	}
	return ""
}

// formatAnyTime writes a time even when its year has more than four digits.
func formatAnyTime(t time.Time) string {
	if y := t.UTC().Year(); y < 0 || y > 9999 {
		return fmt.Sprintf("year %d", y)
	}
	return t.UTC().Format(time.RFC3339Nano)
}

var (
	rfc3339Re   = regexp.MustCompile(`^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]{1,9})?(Z|[+-]([01][0-9]|2[0-3]):[0-5][0-9])$`)
	localTimeRe = regexp.MustCompile(`^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]{1,9})?$`)
)

// ParseTime reads a strict RFC 3339 time with a zone offset: 2026-09-16T10:00:00+05:00,
// 2026-09-16T05:00:00.5Z. Every field has its full width (T1:00:00 is refused), T and
// Z are upper case, the offset is within ±23:59. It does not check the range (CheckTime).
func ParseTime(s string) (time.Time, error) {
	if !rfc3339Re.MatchString(s) {
		return time.Time{}, fmt.Errorf("%s is not an RFC 3339 time with a zone offset (e.g. 2026-09-16T10:00:00+05:00)", quote(s))
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("%s is not an RFC 3339 time with a zone offset (e.g. 2026-09-16T10:00:00+05:00)", quote(s))
	}
	return t, nil
}

// ParseLocalTime reads a time without a zone, 2026-09-16T10:00:00 with an optional
// fraction, every field at its full width, in loc.
func ParseLocalTime(s string, loc *time.Location) (time.Time, error) {
	if !localTimeRe.MatchString(s) {
		return time.Time{}, fmt.Errorf("%s is not a date-time (YYYY-MM-DDTHH:MM:SS)", quote(s))
	}
	t, err := time.ParseInLocation("2006-01-02T15:04:05.999999999", s, loc)
	if err != nil {
		return time.Time{}, fmt.Errorf("%s is not a date-time (YYYY-MM-DDTHH:MM:SS)", quote(s))
	}
	return t, nil
}

// ParseTimeOrLocal reads a strict RFC 3339 time, or a zone-less one in loc (what
// marketplaces that document UTC sometimes send).
func ParseTimeOrLocal(s string, loc *time.Location) (time.Time, error) {
	if t, err := ParseTime(s); err == nil {
		return t, nil
	}
	if t, err := ParseLocalTime(s, loc); err == nil {
		return t, nil
	}
	return time.Time{}, fmt.Errorf("%s is not an RFC 3339 time", quote(s))
}

// quote is strconv.Quote of at most 64 characters of s: safe to store and log.
func quote(s string) string {
	if len(s) > 64 {
		s = s[:64]
		for len(s) > 0 && !utf8.ValidString(s) && !utf8.RuneStart(s[len(s)-1]) {
			s = s[:len(s)-1]
		}
		return strconv.Quote(s) + "…"
	}
	return strconv.Quote(s)
}

// CheckLine says what is wrong with one line of a person's text (a name, a SKU, a
// phone, a warehouse): "" when nothing. Empty is fine.
func CheckLine(s string) string { return checkText(s, false) }

// CheckFreeText is CheckLine for free text (a comment, a reason): tab, line feed and
// carriage return are allowed, other control characters are not.
func CheckFreeText(s string) string { return checkText(s, true) }

func checkText(s string, multiline bool) string {
	if !utf8.ValidString(s) {
		return "is not valid UTF-8"
	}
	for _, r := range s {
		if unicode.IsControl(r) && !(multiline && (r == '\n' || r == '\t' || r == '\r')) {
			return fmt.Sprintf("contains the control character %U", r)
		}
	}
	return ""
}

// CheckID says what is wrong with an id such as external_id ("" when nothing):
// required, valid UTF-8, at most max characters, printable, no leading or trailing
// space.
func CheckID(s string, max int) string {
	if s == "" {
		return "is required"
	}
	if !utf8.ValidString(s) {
		return "is not valid UTF-8"
	}
	if n := utf8.RuneCountInString(s); n > max {
		return fmt.Sprintf("is %d characters long, at most %d allowed", n, max)
	}
	for _, r := range s {
		if !unicode.IsPrint(r) {
			return fmt.Sprintf("contains the non-printable character %U", r)
		}
	}
	if strings.TrimSpace(s) != s {
		return "has a leading or trailing space"
	}
	return ""
}

// CheckKeyID is CheckID (at most 64 characters) for an id that goes into a journal
// key as it is (a marketplace's order code, a posting number): also no space, no ':'
// and no U+FFFD, the mark of a byte a decoder replaced — two different bad ids must
// never become one key.
func CheckKeyID(s string) string {
	if msg := CheckID(s, 64); msg != "" {
		return msg
	}
	for _, r := range s {
		switch {
		case r == ':':
			return "contains ':', the separator of keys"
		case unicode.IsSpace(r):
			return "contains a space"
		case r == utf8.RuneError:
			return "contains U+FFFD (a byte that was not UTF-8)"
		}
	}
	return ""
}

// SafeText is s made safe to store and log whatever it holds: invalid UTF-8 and
// control characters other than tab and line feed are written as Go escapes (\x00,
// \xff). Valid text without them is returned as it is. It is for what is only read
// by people (a failure's reason), never for data.
func SafeText(s string) string {
	if CheckFreeText(s) == "" && !strings.ContainsRune(s, '\r') {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n <= 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case unicode.IsControl(r) && r != '\n' && r != '\t':
			q := strconv.QuoteRune(r)
			b.WriteString(q[1 : len(q)-1])
		default:
			b.WriteString(s[i : i+n])
		}
		i += n
	}
	return b.String()
}

// CheckDecimal says what is wrong with a number of an order ("" when nothing): more
// than MaxDecimalDigits significant digits. It never computes with the number, so a
// huge exponent costs nothing.
func CheckDecimal(d decimal.Decimal) string {
	coef := d.Coefficient()
	if coef.BitLen() > 1024 {
		return fmt.Sprintf("has more than %d digits", MaxDecimalDigits)
	}
	exp := int64(d.Exponent())
	digits := int64(0)
	if coef.Sign() != 0 {
		text := coef.String()
		text = strings.TrimPrefix(text, "-")
		// Trailing zeros of the coefficient are not digits of the value's fraction.
		for exp < 0 && strings.HasSuffix(text, "0") {
			text = text[:len(text)-1]
			exp++
		}
		digits = int64(len(text))
	}
	var total int64
	switch {
	case coef.Sign() == 0:
		return ""
	case exp >= 0:
		total = digits + exp
	default: // the integer part's digits and the fraction's: max(digits, -exp)
		total = max(digits, -exp)
	}
	if total > MaxDecimalDigits {
		return fmt.Sprintf("has more than %d digits", MaxDecimalDigits)
	}
	return ""
}

// ParseDecimal reads a decimal written as text ("1530.0000", "2", "1e3") exactly,
// refusing text longer than MaxNumberText and numbers CheckDecimal refuses.
func ParseDecimal(text string) (decimal.Decimal, error) {
	text = strings.TrimSpace(text)
	if len(text) > MaxNumberText {
		return decimal.Decimal{}, fmt.Errorf("is longer than %d characters", MaxNumberText)
	}
	if text == "" {
		return decimal.Decimal{}, fmt.Errorf("is not a number: empty")
	}
	d, err := decimal.NewFromString(text)
	if err != nil {
		return decimal.Decimal{}, fmt.Errorf("is not a number: %s", quote(text))
	}
	if msg := CheckDecimal(d); msg != "" {
		return decimal.Decimal{}, fmt.Errorf("%s", msg)
	}
	return d, nil
}
