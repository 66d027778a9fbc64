package ui

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/ordersync/ordersync/internal/journal"
)

// explanation is an error an accountant reads: the catalogue's sentence for its
// class and kind, 1C's own message when 1C sent one, and the text as the journal
// holds it (Raw), shown beside it for whoever must quote it to 1C's programmer.
type explanation struct {
	Text    string // in the pages' language
	OneC    string // 1C's own message (its words, not translated), "" when none
	Field   string // the field 1C named, "" when none
	Raw     string
	Class   string // the class it was explained by
	Unknown bool   // no sentence fits: Text is only the class's word, or nothing
}

// oneCError matches the text an *onec.Error writes: "1c create: permanent (HTTP
// 422): message [field f] [code c]: cause".
var oneCError = regexp.MustCompile(`1c (ping|find|create|cancel|stock|list|settle|read|post|write): ` +
	`(transient|unknown outcome|permanent|authentication|configuration)(?: \(HTTP (\d{3})\))?(?:: (.*))?`)

var (
	gaveUpUnknown  = regexp.MustCompile(`^gave up after (\d+) attempts whose outcome was unknown`)
	gaveUpDuration = regexp.MustCompile(`^gave up after (\S+) of failures since the first attempt`)
	fieldTag       = regexp.MustCompile(` \[field (.+?)\](?:$| \[code |: )`)
)

// classWords are the onec.Class words the journal's texts carry, by journal class.
var classWords = map[string]string{
	"transient": journal.ClassTransient, "unknown outcome": journal.ClassUnknown, "permanent": journal.ClassPermanent,
	"authentication": journal.ClassAuth, "configuration": journal.ClassConfiguration,
}

// explain words an error text of the journal (an attempt's, an operation's last
// error), class being the journal's class when it recorded one.
func (s *Server) explain(raw, class string) explanation {
	e := explanation{Raw: raw, Class: class}
	if strings.TrimSpace(raw) == "" {
		return explanation{}
	}
	var prefix []string
	switch {
	case gaveUpUnknown.MatchString(raw):
		n, _ := strconv.Atoi(gaveUpUnknown.FindStringSubmatch(raw)[1])
		prefix = append(prefix, s.cat.tf("explain_gave_up_unknown", n))
		e.Class = journal.ClassUnknown
	case gaveUpDuration.MatchString(raw):
		prefix = append(prefix, s.cat.tf("explain_gave_up_after", gaveUpDuration.FindStringSubmatch(raw)[1]))
	}
	op, status := "", 0
	if m := oneCError.FindStringSubmatch(raw); m != nil {
		op = m[1]
		if e.Class == "" {
			e.Class = classWords[m[2]]
		}
		status, _ = strconv.Atoi(m[3])
		msg := m[4]
		if f := fieldTag.FindStringSubmatch(msg); f != nil {
			e.Field = f[1]
		}
		// 1C's message is what comes before its tags and before ordersync's own
		// additions (": the order may exist…", " (1C holds no order…").
		if i := strings.Index(msg, " ["); i >= 0 {
			msg = msg[:i]
		}
		if status != 0 && e.Class != journal.ClassUnknown {
			e.OneC = strings.TrimSpace(msg)
		}
	}
	var text string
	switch {
	case strings.Contains(raw, "before it was created in 1C"):
		text = s.cat.t("explain_cancelled_before_create")
	case strings.HasPrefix(raw, "payload:"):
		text = s.cat.t("explain_payload")
	case strings.HasPrefix(raw, "not created yet:"):
		text = s.cat.t("explain_not_ready")
	case strings.Contains(raw, "may still be at work in 1C") && op == "":
		text = s.cat.t("explain_settling")
	case strings.Contains(raw, "is being created right now"):
		text = s.cat.t("explain_create_running")
	case strings.Contains(raw, "no item of ") || strings.Contains(raw, "several items of "):
		text = s.cat.t("explain_unmatched_sku")
	case strings.Contains(raw, "otherwise than it was written"):
		text = s.cat.t("explain_mismatch")
	case strings.Contains(raw, "an order with another external id"):
		text = s.cat.t("explain_external_id_conflict")
	case e.Class != "":
		text = s.classSentence(e.Class, op, status)
	default:
		e.Unknown = true
	}
	e.Text = strings.Join(append(prefix, text), " ")
	return e
}

// classSentence is the catalogue's sentence for a class, by what was asked of 1C.
func (s *Server) classSentence(class, op string, status int) string {
	f, ok := s.cat["explain_"+class]
	if !ok {
		return s.cat.label("class", class)
	}
	what := "explain_op_" + op
	if _, ok := s.cat[what]; !ok {
		what = "explain_op_other"
	}
	text := f
	if strings.Contains(f, "%s") {
		text = fmt.Sprintf(f, s.cat.t(what))
	}
	if status != 0 {
		text += " " + s.cat.tf("explain_http", status)
	}
	return text
}

var inboxDetail = regexp.MustCompile(`^inbox (\S+) ("(?:[^"\\]|\\.)*")$`)

// eventDetail words the detail of a timeline event: the webhook delivery that
// registered it, or why it was registered failed or revised (an error's text).
func (s *Server) eventDetail(detail string) explanation {
	if m := inboxDetail.FindStringSubmatch(detail); m != nil {
		id, err := strconv.Unquote(m[2])
		if err == nil {
			return explanation{Text: s.cat.tf("event_detail_inbox", m[1], id)}
		}
	}
	return s.explain(detail, "")
}
