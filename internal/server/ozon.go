package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"strings"
	"time"

	"github.com/ordersync/ordersync/internal/inbox"
	"github.com/ordersync/ordersync/internal/journal"
	"github.com/ordersync/ordersync/internal/order"
)

// OzonConfig enables Ozon push notifications on POST /webhooks/ozon.
//
// Ozon signs nothing; a push is believed for the address it comes from. Ozon
// publishes the networks it sends from (Seller API documentation, "push_start").
type OzonConfig struct {
	// AllowNetworks are the addresses a push may come from (default Ozon's published
	// 195.34.21.0/24, 185.73.192.0/22, 91.223.93.0/24).
	AllowNetworks []netip.Prefix
	// TrustedProxies are the reverse proxies in front of ordersync. Only when the
	// connection comes from one is X-Forwarded-For read: the client is its
	// right-most address that is not a trusted proxy.
	TrustedProxies []netip.Prefix
	// Name and Version are the application's name and version in the answer to
	// TYPE_PING (defaults "ordersync" and "dev").
	Name, Version string
}

// DefaultOzonNetworks are the networks Ozon sends push notifications from.
var DefaultOzonNetworks = []netip.Prefix{
	netip.MustParsePrefix("195.34.21.0/24"),
	netip.MustParsePrefix("185.73.192.0/22"),
	netip.MustParsePrefix("91.223.93.0/24"),
}

// Ozon's message types this server acts on.
const (
	ozonPing      = "TYPE_PING"
	ozonNew       = "TYPE_NEW_POSTING"
	ozonCancelled = "TYPE_POSTING_CANCELLED"
)

// Ozon's error codes (Seller API, "service_response").
const (
	ozonErrUnknown    = "ERROR_UNKNOWN"
	ozonErrMissed     = "ERROR_PARAMETER_VALUE_MISSED"
	ozonErrDuplicated = "ERROR_REQUEST_DUPLICATED"
)

type ozonReceiver struct {
	allow, trusted []netip.Prefix
	name, version  string
}

func newOzonReceiver(c OzonConfig) (*ozonReceiver, error) {
	o := &ozonReceiver{
		allow:   masked(c.AllowNetworks),
		trusted: masked(c.TrustedProxies),
		name:    strings.TrimSpace(c.Name),
		version: strings.TrimSpace(c.Version),
	}
	for i, p := range append(append([]netip.Prefix(nil), c.AllowNetworks...), c.TrustedProxies...) {
		if !p.IsValid() {
			key := "allow_networks"
			if i >= len(c.AllowNetworks) {
				key, i = "trusted_proxies", i-len(c.AllowNetworks)
			}
			return nil, fmt.Errorf("server: webhooks.ozon.%s[%d] is not a network", key, i)
		}
	}
	if len(o.allow) == 0 {
		o.allow = DefaultOzonNetworks
	}
	if o.name == "" {
		o.name = "ordersync"
	}
	if o.version == "" {
		o.version = "dev"
	}
	return o, nil
}

func masked(ps []netip.Prefix) []netip.Prefix {
	out := make([]netip.Prefix, 0, len(ps))
	for _, p := range ps {
		if p.IsValid() {
			out = append(out, p.Masked())
		}
	}
	return out
}

func contains(ps []netip.Prefix, a netip.Addr) bool {
	for _, p := range ps {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// clientAddr is the address a request comes from: the connection's peer, unless
// that is a trusted proxy; then the right-most X-Forwarded-For address that is not
// one (every entry trusted: the left-most; none: the proxy itself). An entry that is
// not an address ends the walk with an error: what lies left of it cannot be told.
func clientAddr(r *http.Request, trusted []netip.Prefix) (netip.Addr, error) {
	peer, err := parseHostAddr(r.RemoteAddr)
	if err != nil {
		return netip.Addr{}, fmt.Errorf("remote address %q: %w", r.RemoteAddr, err)
	}
	if !contains(trusted, peer) {
		return peer, nil
	}
	var hops []string
	for _, v := range r.Header.Values("X-Forwarded-For") {
		for _, h := range strings.Split(v, ",") {
			if h = strings.TrimSpace(h); h != "" {
				hops = append(hops, h)
			}
		}
	}
	if len(hops) == 0 {
		return peer, nil
	}
	var last netip.Addr
	for i := len(hops) - 1; i >= 0; i-- {
		a, err := parseHostAddr(hops[i])
		if err != nil {
			return netip.Addr{}, fmt.Errorf("X-Forwarded-For entry %d: %w", i+1, err)
		}
		if !contains(trusted, a) {
			return a, nil
		}
		last = a
	}
	return last, nil
}

// parseHostAddr reads "1.2.3.4", "1.2.3.4:80", "::1", "[::1]:80"; IPv4-mapped IPv6
// becomes IPv4 and a zone is dropped.
func parseHostAddr(s string) (netip.Addr, error) {
	if ap, err := netip.ParseAddrPort(s); err == nil {
		return ap.Addr().Unmap().WithZone(""), nil
	}
	a, err := netip.ParseAddr(strings.TrimSuffix(strings.TrimPrefix(s, "["), "]"))
	if err != nil {
		return netip.Addr{}, errors.New("not an IP address")
	}
	return a.Unmap().WithZone(""), nil
}

// ozonError is Ozon's error body: {"error":{"code","message","details"}}.
type ozonError struct {
	Error ozonErrorBody `json:"error"`
}

type ozonErrorBody struct {
	Code    string  `json:"code"`
	Message string  `json:"message"`
	Details *string `json:"details"`
}

func ozonErrorAnswer(status int, code, message, details string) inbox.Answer {
	b := ozonErrorBody{Code: code, Message: message}
	if details != "" {
		b.Details = &details
	}
	return jsonAnswer(status, ozonError{Error: b})
}

// ozonResult is Ozon's success body.
var ozonResult = jsonAnswer(http.StatusOK, struct {
	Result bool `json:"result"`
}{true})

// Duplicates get the saved answer, 200 {"result":true}: the event is safely stored,
// and Ozon counts every non-200 against the receiver (fewer than half 200s suspends
// its notifications). ERROR_REQUEST_DUPLICATED answers what is not settled: the same
// id with another body, or one still being registered (Ozon retries it).
var ozonReplies = replies{
	conflict:   ozonErrorAnswer(http.StatusConflict, ozonErrDuplicated, "this notification was already received with another body", ""),
	inProgress: ozonErrorAnswer(http.StatusConflict, ozonErrDuplicated, "this notification is being registered by another delivery; retry", ""),
	failure:    ozonErrorAnswer(http.StatusInternalServerError, ozonErrUnknown, "inbox unavailable; retry", ""),
}

func ozonReject(res result, status int, code, reason string) result {
	res.outcome, res.reason = outRejected, code
	res.answer = ozonErrorAnswer(status, ozonErrUnknown, reason, "")
	return res
}

// ozonMessage is what this server reads of a push; other fields are ignored.
type ozonMessage struct {
	MessageType      string `json:"message_type"`
	PostingNumber    string `json:"posting_number"`
	InProcessAt      string `json:"in_process_at"`      // TYPE_NEW_POSTING; may be empty on late payment
	ChangedStateDate string `json:"changed_state_date"` // TYPE_POSTING_CANCELLED
	Reason           *struct {
		Message string `json:"message"`
	} `json:"reason"` // TYPE_POSTING_CANCELLED
}

// handleOzon is POST /webhooks/ozon.
func (s *Server) handleOzon(w http.ResponseWriter, r *http.Request) result {
	res := result{source: SourceOzon}
	note(r, SourceOzon, "")
	addr, err := clientAddr(r, s.ozon.trusted)
	if err != nil {
		res.detail = err.Error()
		return ozonReject(res, http.StatusForbidden, "address_not_allowed", "cannot tell the client address")
	}
	if !contains(s.ozon.allow, addr) {
		res.detail = addr.String()
		return ozonReject(res, http.StatusForbidden, "address_not_allowed", "address not allowed")
	}
	if mt := mediaType(r); mt != "application/json" {
		return ozonReject(res, http.StatusUnsupportedMediaType, "unsupported_media_type", "Content-Type must be application/json")
	}
	body, err := s.readBody(w, r)
	if err != nil {
		return bodyError(res, err, ozonReject, s.cfg.MaxBody)
	}
	var m ozonMessage
	if err := json.Unmarshal(body, &m); err != nil {
		return ozonReject(res, http.StatusBadRequest, "malformed_json", "body is not a JSON notification")
	}
	// The raw bytes, before what was decoded is used: invalid UTF-8 (which the
	// decoder replaced, so two bad posting numbers would be one), a key twice or in
	// another letter case than the field's.
	if err := order.CheckJSON(body, order.JSONOptions{Into: ozonMessage{}}); err != nil {
		return ozonBadField(res, err)
	}
	m.MessageType = strings.TrimSpace(m.MessageType)
	res.detail = m.MessageType

	missed := func(field string) result {
		res.outcome, res.reason = outRejected, "missing_field"
		res.detail = m.MessageType + " " + field
		res.answer = ozonErrorAnswer(http.StatusBadRequest, ozonErrMissed, field+" is required", field)
		return res
	}
	var reg inbox.Registration
	switch m.MessageType {
	case "":
		return missed("message_type")
	case ozonPing:
		res.outcome = outPing
		res.answer = jsonAnswer(http.StatusOK, struct {
			Version string `json:"version"`
			Name    string `json:"name"`
			Time    string `json:"time"`
		}{s.ozon.version, s.ozon.name, s.now().UTC().Format(time.RFC3339)})
		return res
	case ozonNew, ozonCancelled:
	default:
		// Other types (state changes, dates, items, stock, chats) register nothing,
		// so they are not stored either: the inbox keeps what ordersync acts on, not
		// the buyers' chat messages and stock churn.
		res.outcome, res.reason = outIgnored, "message_type"
		res.answer = ozonResult
		return res
	}

	n := strings.TrimSpace(m.PostingNumber)
	if n == "" {
		return missed("posting_number")
	}
	if msg := checkID(n); msg != "" {
		res.outcome, res.reason = outRejected, "bad_field"
		res.detail = m.MessageType + " posting_number"
		res.answer = ozonErrorAnswer(http.StatusBadRequest, ozonErrUnknown, "posting_number "+msg, "posting_number")
		return res
	}
	whenField, when := "in_process_at", m.InProcessAt
	if m.MessageType == ozonCancelled {
		whenField, when = "changed_state_date", m.ChangedStateDate
	}
	// The time is part of the event id: a strict RFC 3339 time within range, or
	// empty (Ozon sends no in_process_at for a payment still pending).
	if when = strings.TrimSpace(when); when != "" {
		t, err := order.ParseTime(when)
		msg := ""
		if err != nil {
			msg = err.Error()
		} else {
			msg = order.CheckTime(t)
		}
		if msg != "" {
			return ozonBadField(res, &order.ValidationError{Problems: []order.FieldError{{Field: whenField, Message: msg}}})
		}
	}
	if m.Reason != nil {
		if msg := order.CheckFreeText(m.Reason.Message); msg != "" {
			return ozonBadField(res, &order.ValidationError{Problems: []order.FieldError{{Field: "reason.message", Message: msg}}})
		}
	}
	note(r, SourceOzon, m.MessageType+":"+n+":"+when)
	createKey := order.Key(SourceOzon, "posting", n, "create")
	if m.MessageType == ozonNew {
		// The poller may have registered the whole posting under this key already;
		// then that one stands.
		reg = inbox.Registration{IfAbsent: true, Op: journal.NewOperation{
			Key: createKey, Kind: order.KindCreate, Source: SourceOzon, ExternalID: n,
			Payload: order.FetchPayload(SourceOzon, n),
		}}
	} else {
		c := order.Cancel{Source: SourceOzon, ExternalID: n, CreateKey: createKey}
		if m.Reason != nil {
			c.Reason = strings.TrimSpace(m.Reason.Message)
		}
		payload, _ := json.Marshal(c)
		// A cancel is one fact per posting: the poller words its reason from the
		// API, the push from its own field; whichever came first stands.
		reg = inbox.Registration{IfAbsent: true, Op: journal.NewOperation{
			Key: order.CancelKeyOf(createKey), Kind: order.KindCancel, Source: SourceOzon, ExternalID: n,
			Payload: payload,
		}}
	}
	ev := inbox.Event{
		Source:      SourceOzon,
		ID:          m.MessageType + ":" + n + ":" + when,
		Body:        body,
		ContentType: "application/json",
		ReceivedAt:  s.now(),
	}
	// A push Ozon sends again (it does, until it hears 200 in time) is answered
	// from a read of the stored event, with no transaction.
	if dup, ok := s.redelivered(r, ev, ozonReplies); ok {
		return dup
	}
	res = s.receive(r, ev, []inbox.Registration{reg}, ozonResult, ozonReplies)
	res.detail = reg.Op.Key
	return res
}

// checkID says what is wrong with an id that goes into a key ("" when nothing):
// order.CheckKeyID, at most 64 printable characters without spaces, colons or U+FFFD.
func checkID(s string) string { return order.CheckKeyID(s) }

// ozonBadField is the 400 answer to a push with a bad field, named in details.
func ozonBadField(res result, err error) result {
	field, msg := "(document)", err.Error()
	var ve *order.ValidationError
	if errors.As(err, &ve) && len(ve.Problems) > 0 {
		field, msg = ve.Problems[0].Field, ve.Problems[0].Message
	}
	res.outcome, res.reason = outRejected, "bad_field"
	res.detail = res.detail + " " + field
	res.answer = ozonErrorAnswer(http.StatusBadRequest, ozonErrUnknown, field+": "+msg, field)
	return res
}
