package server

import (
	"cmp"
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/ordersync/ordersync/internal/inbox"
	"github.com/ordersync/ordersync/internal/journal"
	"github.com/ordersync/ordersync/internal/order"
)

// Bitrix24Config enables a Bitrix24 portal's outgoing webhook on POST
// /webhooks/<Source>.
type Bitrix24Config struct {
	// Source is the portal's source, its deals' keys and its endpoint's name:
	// default SourceBitrix24 (webhooks.bitrix24); a further portal's account name.
	Source string
	// ApplicationToken is the outgoing webhook's token (auth[application_token] of
	// every call), shown by the portal when the webhook is made. Required.
	ApplicationToken string
}

// Form fields of a Bitrix24 event call (application/x-www-form-urlencoded).
const (
	bxEvent   = "event"
	bxDealID  = "data[FIELDS][ID]"
	bxTS      = "ts"
	bxToken   = "auth[application_token]"
	bxAdd     = "ONCRMDEALADD"
	bxUpdate  = "ONCRMDEALUPDATE"
	bxFormCT  = "application/x-www-form-urlencoded"
	bxEntity  = "deal"
	maxDealID = 20
)

// bxSecretFields are the form fields kept out of the stored body: the token that
// authenticates the portal, and the OAuth tokens an application's event carries.
// Redeliveries then compare alike even when an access token was refreshed.
var bxSecretFields = map[string]bool{
	bxToken:               true,
	"auth[access_token]":  true,
	"auth[refresh_token]": true,
}

var digitsRe = regexp.MustCompile(`^[0-9]+$`)

type bitrixReceiver struct {
	source   string
	tokenSum [sha256.Size]byte
}

func newBitrixReceiver(c Bitrix24Config) (*bitrixReceiver, error) {
	source := cmp.Or(c.Source, SourceBitrix24)
	tok := strings.TrimSpace(c.ApplicationToken)
	if tok == "" {
		key := "webhooks.bitrix24"
		if source != SourceBitrix24 {
			key = "connectors." + source
		}
		return nil, fmt.Errorf("server: %s.application_token is required", key)
	}
	return &bitrixReceiver{source: source, tokenSum: sha256.Sum256([]byte(tok))}, nil
}

// tokenOK compares in constant time, hashing first so that not even the length
// of the configured token shows.
func (b *bitrixReceiver) tokenOK(got string) bool {
	sum := sha256.Sum256([]byte(got))
	return subtle.ConstantTimeCompare(sum[:], b.tokenSum[:]) == 1
}

// bitrixAnswer is the JSON answer of POST /webhooks/bitrix24 (Bitrix24 reads only
// the status code).
type bitrixAnswer struct {
	Status string `json:"status"`
	Key    string `json:"key,omitempty"`
	Reason string `json:"reason,omitempty"`
	Field  string `json:"field,omitempty"`
}

var bitrixReplies = replies{
	conflict:   jsonAnswer(http.StatusConflict, bitrixAnswer{Status: "conflict", Reason: "event already received with another body"}),
	inProgress: jsonAnswer(http.StatusConflict, bitrixAnswer{Status: "in_progress", Reason: "event is being registered by another delivery; retry"}),
	failure:    jsonAnswer(http.StatusServiceUnavailable, bitrixAnswer{Status: "error", Reason: "inbox unavailable; retry"}),
}

func bitrixReject(res result, status int, code, reason string) result {
	res.outcome, res.reason = outRejected, code
	res.answer = jsonAnswer(status, bitrixAnswer{Status: "rejected", Reason: reason})
	return res
}

// handleBitrix24 is POST /webhooks/<portal>: a deal was added or changed. The call
// names only the deal; the engine fetches it (crm.deal.get) and creates the order
// when the deal is in a configured stage.
func (s *Server) handleBitrix24(b *bitrixReceiver) func(w http.ResponseWriter, r *http.Request) result {
	return func(w http.ResponseWriter, r *http.Request) result { return s.bitrix24(b, w, r) }
}

func (s *Server) bitrix24(b *bitrixReceiver, w http.ResponseWriter, r *http.Request) result {
	source := b.source
	res := result{source: source}
	note(r, source, "")
	if mt := mediaType(r); mt != bxFormCT {
		return bitrixReject(res, http.StatusUnsupportedMediaType, "unsupported_media_type", "Content-Type must be "+bxFormCT)
	}
	body, err := s.readBody(w, r)
	if err != nil {
		return bodyError(res, err, bitrixReject, s.cfg.MaxBody)
	}
	form, err := url.ParseQuery(string(body))
	if err != nil {
		return bitrixReject(res, http.StatusBadRequest, "malformed_form", "body is not a URL-encoded form")
	}
	if len(form[bxToken]) != 1 || !b.tokenOK(form.Get(bxToken)) {
		reason := "wrong " + bxToken
		if form.Get(bxToken) == "" {
			reason = "missing " + bxToken
		}
		return bitrixReject(res, http.StatusUnauthorized, "bad_token", reason)
	}

	// Every field, before any is used: text (valid UTF-8 once unescaped, no control
	// character but tab and line breaks), and the fields read here once each.
	if field, msg := checkForm(form); field != "" {
		res.outcome, res.reason, res.detail = outRejected, "bad_field", field
		res.answer = jsonAnswer(http.StatusBadRequest, bitrixAnswer{Status: "rejected", Reason: field + " " + msg, Field: field})
		return res
	}
	event := strings.ToUpper(strings.TrimSpace(form.Get(bxEvent)))
	res.detail = event
	if event != bxAdd && event != bxUpdate {
		res.outcome, res.reason = outIgnored, "event"
		res.answer = jsonAnswer(http.StatusOK, bitrixAnswer{Status: "ignored"})
		return res
	}
	missing := func(field, why string) result {
		res.outcome, res.reason, res.detail = outRejected, "missing_field", event+" "+field
		res.answer = jsonAnswer(http.StatusBadRequest, bitrixAnswer{Status: "rejected", Reason: field + " " + why, Field: field})
		return res
	}
	id := strings.TrimSpace(form.Get(bxDealID))
	switch {
	case id == "":
		return missing(bxDealID, "is required")
	case len(id) > maxDealID || !digitsRe.MatchString(id):
		return missing(bxDealID, "must be a deal number")
	}
	ts := strings.TrimSpace(form.Get(bxTS))
	switch {
	case ts == "":
		return missing(bxTS, "is required")
	case len(ts) > maxDealID || !digitsRe.MatchString(ts):
		return missing(bxTS, "must be unix seconds")
	}

	op := journal.NewOperation{
		Key:        order.Key(source, bxEntity, id, "create"),
		Kind:       order.KindCreate,
		Source:     source,
		ExternalID: id,
		Payload:    order.FetchPayload(source, id),
	}
	note(r, source, event+":"+id+":"+ts)
	ev := inbox.Event{
		Source:      source,
		ID:          event + ":" + id + ":" + ts,
		Body:        withoutFields(body, bxSecretFields),
		ContentType: bxFormCT,
		ReceivedAt:  s.now(),
	}
	// IfAbsent: the deal's create is registered once, with a fetch payload. Wake:
	// a change of the deal makes its pending create look at the deal again (its
	// stage may now be one that creates the order).
	reg := inbox.Registration{Op: op, IfAbsent: true, Wake: true}
	answer := jsonAnswer(http.StatusOK, bitrixAnswer{Status: "processed", Key: op.Key})
	// A redelivery of a stored event is answered from a read of it; as with Receive,
	// a stored event wakes nothing again.
	if dup, ok := s.redelivered(r, ev, bitrixReplies); ok {
		return dup
	}
	res = s.receive(r, ev, []inbox.Registration{reg}, answer, bitrixReplies)
	res.detail = op.Key
	return res
}

// checkForm says which field of a form is bad and why ("" when none is): a key or
// value that is not text once unescaped (order.CheckFreeText), or one of the fields
// this receiver reads given twice (which one would count?).
func checkForm(form url.Values) (field, msg string) {
	keys := make([]string, 0, len(form))
	for k := range form {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if m := order.CheckFreeText(k); m != "" {
			return strconv.Quote(k), "(a field name) " + m
		}
		for _, v := range form[k] {
			if m := order.CheckFreeText(v); m != "" {
				return k, m
			}
		}
		switch k {
		case bxEvent, bxDealID, bxTS:
			if len(form[k]) > 1 {
				return k, "is given more than once"
			}
		}
	}
	return "", ""
}

// withoutFields is a form body with the named fields left out; every other pair
// stays exactly as received, in its order.
func withoutFields(body []byte, drop map[string]bool) []byte {
	pairs := strings.Split(string(body), "&")
	kept := pairs[:0]
	for _, p := range pairs {
		k, _, _ := strings.Cut(p, "=")
		if key, err := url.QueryUnescape(k); err == nil && drop[key] {
			continue
		}
		kept = append(kept, p)
	}
	return []byte(strings.Join(kept, "&"))
}
