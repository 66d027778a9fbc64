package server

import (
	"errors"
	"net/http"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/ordersync/ordersync/internal/inbox"
	"github.com/ordersync/ordersync/internal/journal"
	"github.com/ordersync/ordersync/internal/order"
	"github.com/ordersync/ordersync/internal/stdwebhook"
)

// maxEventID bounds a webhook-id: it is a primary key column.
const maxEventID = 256

// genericAnswer is the JSON answer of POST /webhooks/{source}.
type genericAnswer struct {
	Status string   `json:"status"`           // processed, conflict, in_progress, rejected, error
	Key    string   `json:"key,omitempty"`    // the operation registered
	Reason string   `json:"reason,omitempty"` // why not
	Fields []string `json:"fields,omitempty"` // the order's (or cancel's) offending fields
}

var genericReplies = replies{
	conflict:   jsonAnswer(http.StatusConflict, genericAnswer{Status: "conflict", Reason: "webhook-id already received with another body"}),
	inProgress: jsonAnswer(http.StatusConflict, genericAnswer{Status: "in_progress", Reason: "webhook-id is being registered by another delivery; retry"}),
	failure:    jsonAnswer(http.StatusServiceUnavailable, genericAnswer{Status: "error", Reason: "inbox unavailable; retry"}),
}

// genericReject is a 4xx answer with a short reason.
func genericReject(res result, status int, code, reason string) result {
	res.outcome, res.reason = outRejected, code
	res.answer = jsonAnswer(status, genericAnswer{Status: "rejected", Reason: reason})
	return res
}

// handleGeneric is POST /webhooks/{source}: a canonical order, or a cancel delivery
// (generic_cancel.go), signed the Standard Webhooks way with one of the source's
// secrets.
func (s *Server) handleGeneric(w http.ResponseWriter, r *http.Request) result {
	name := r.PathValue("source")
	verifier, ok := s.sources[name]
	if !ok {
		return genericReject(result{source: sourceUnknown}, http.StatusNotFound, "unknown_source", "no such webhook source")
	}
	res := result{source: name}
	note(r, name, "")
	if mt := mediaType(r); mt != "application/json" {
		return genericReject(res, http.StatusUnsupportedMediaType, "unsupported_media_type", "Content-Type must be application/json")
	}
	body, err := s.readBody(w, r)
	if err != nil {
		return bodyError(res, err, genericReject, s.cfg.MaxBody)
	}

	// Verify on the bytes as received, before anything looks inside them.
	id, err := verifier.Verify(r.Header, body)
	if errors.Is(err, stdwebhook.ErrID) {
		// Signed, but its id cannot be stored (invalid UTF-8, a control character):
		// refused for good, not 503 for ever.
		res.eventID = strconv.Quote(safePrefix(r.Header.Get(stdwebhook.HeaderID), 64))
		return genericInvalid(res, "bad_event_id", "invalid webhook-id", &order.ValidationError{Problems: []order.FieldError{{
			Field: stdwebhook.HeaderID, Message: strings.TrimPrefix(err.Error(), stdwebhook.ErrID.Error()+": "+stdwebhook.HeaderID+" "),
		}}})
	}
	if err != nil {
		code, reason := verifyReason(err)
		return genericReject(res, http.StatusUnauthorized, code, reason)
	}
	res.eventID = id
	if len(id) > maxEventID {
		res.eventID = safePrefix(id, 64) + "…"
		return genericInvalid(res, "bad_event_id", "invalid webhook-id", &order.ValidationError{Problems: []order.FieldError{{
			Field: stdwebhook.HeaderID, Message: "is longer than 256 bytes",
		}}})
	}
	note(r, name, id)
	// A redelivery of the bytes stored under the id gets the saved answer, read
	// before the body is parsed: they were parsed when the event was stored.
	if dup, ok := s.redelivered(r, inbox.Event{Source: name, ID: id, Body: body}, genericReplies); ok {
		return dup
	}

	// An order, or a cancel of one ("cancelled": true): either registers one
	// operation through the inbox, so a redelivery is a duplicate by webhook-id.
	var op journal.NewOperation
	if isCancelDelivery(body) {
		c, err := parseCancel(body, name)
		if err != nil {
			return genericInvalid(res, "invalid_cancel", "invalid cancel", err)
		}
		op = journal.CancelOrder(c)
	} else {
		o, err := parseOrder(body, name)
		if err != nil {
			return genericInvalid(res, "invalid_order", "invalid order", err)
		}
		op = journal.CreateOrder(o)
	}

	ev := inbox.Event{Source: name, ID: id, Body: body, ContentType: "application/json", ReceivedAt: s.now()}
	answer := jsonAnswer(http.StatusOK, genericAnswer{Status: "processed", Key: op.Key})
	res = s.receive(r, ev, []inbox.Registration{{Op: op}}, answer, genericReplies)
	res.detail = op.Key
	return res
}

// genericInvalid is the 400 answer to a body that is not a valid order (or cancel),
// naming the offending fields.
func genericInvalid(res result, code, what string, err error) result {
	res.outcome, res.reason = outRejected, code
	ans := genericAnswer{Status: "rejected", Reason: err.Error()}
	var ve *order.ValidationError
	if errors.As(err, &ve) {
		problems := make([]string, len(ve.Problems))
		for i, p := range ve.Problems {
			ans.Fields = append(ans.Fields, p.Field)
			problems[i] = p.Error()
		}
		ans.Reason = what + ": " + strings.Join(problems, "; ")
	}
	res.detail = strings.Join(ans.Fields, ",")
	res.answer = jsonAnswer(http.StatusBadRequest, ans)
	return res
}

// parseOrder parses the canonical order of a generic sender: an empty source is
// the path's; another one is refused, naming the field.
func parseOrder(body []byte, source string) (order.Order, error) {
	o, err := order.Parse(body)
	if err != nil {
		// Validation (not decoding) reports a missing source this way; decoding
		// errors never do. Take the path's source and validate again.
		var ve *order.ValidationError
		if o.Source != "" || !errors.As(err, &ve) || !hasProblem(ve, "source", "is required") {
			return o, err
		}
		o.Source = source
		if err := o.Validate(); err != nil {
			return o, err
		}
		return o, nil
	}
	if o.Source != source {
		return o, &order.ValidationError{Problems: []order.FieldError{{
			Field: "source", Message: "must be empty or " + source + " (the path's source)",
		}}}
	}
	return o, nil
}

// safePrefix is at most n bytes of s, cut at a character boundary.
func safePrefix(s string, n int) string {
	if len(s) <= n {
		return s
	}
	s = s[:n]
	for len(s) > 0 && !utf8.RuneStart(s[len(s)-1]) {
		s = s[:len(s)-1]
	}
	if len(s) > 0 {
		if r, size := utf8.DecodeLastRuneInString(s); r == utf8.RuneError && size <= 1 {
			s = s[:len(s)-1]
		}
	}
	return s
}

func hasProblem(ve *order.ValidationError, field, message string) bool {
	for _, p := range ve.Problems {
		if p.Field == field && p.Message == message {
			return true
		}
	}
	return false
}

// verifyReason turns a stdwebhook error into a counter code and a short reason;
// neither holds a secret.
func verifyReason(err error) (code, reason string) {
	switch {
	case errors.Is(err, stdwebhook.ErrMissingHeaders):
		_, which, _ := strings.Cut(err.Error(), stdwebhook.ErrMissingHeaders.Error()+": ")
		return "missing_headers", "missing " + which
	case errors.Is(err, stdwebhook.ErrTimestamp):
		if strings.Contains(err.Error(), "not unix seconds") {
			return "bad_timestamp", stdwebhook.HeaderTimestamp + " is not unix seconds"
		}
		return "bad_timestamp", "timestamp outside tolerance"
	default:
		return "bad_signature", "no signature matches"
	}
}

// bodyError answers a body that could not be read: 413 when too large.
func bodyError(res result, err error, reject func(result, int, string, string) result, max int64) result {
	if errors.Is(err, errTooLarge) {
		return reject(res, http.StatusRequestEntityTooLarge, "body_too_large", "body larger than "+formatBytes(max))
	}
	res.err = err
	return reject(res, http.StatusBadRequest, "unreadable_body", "body could not be read")
}
