package onecsim

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/ordersync/ordersync/internal/sim"
)

// The 1C faults beyond a plain status, as a sim.Fault's Kind. A plain status is a
// sim.Fault with Status alone, answered before 1C runs anything: 503, 502 and 504 as
// the web server in front of 1C answers them, 406 as a publication does when no
// session or licence is free; 422 (after the session is entered) with an
// {"error":…} body, nothing written.
const (
	// LockConflict500 answers 500 as the module answers a managed-lock conflict: the
	// contract's error object, code lock_conflict, its message 1C's text. The
	// transaction rolled back and nothing was written.
	LockConflict500 sim.Kind = "lock_conflict_500"
	// BusinessError500 answers 500 with a 1C exception raised by the module, as the
	// contract's {"error":{"code":"exception",…}} object; nothing
	// was written.
	BusinessError500 sim.Kind = "business_error_500"
	// DropAfterCreate lets the handler do its work (the order IS created), then
	// closes the TCP connection without an answer.
	DropAfterCreate sim.Kind = "drop_after_create"
	// Error500AfterCreate lets the handler do its work (the order or return IS
	// created and committed), then answers 500 with the contract's error object,
	// code exception: the module failed after the write.
	Error500AfterCreate sim.Kind = "error_500_after_create"
	// DropBeforeCreate closes the TCP connection without an answer before the
	// handler runs: nothing is created.
	DropBeforeCreate sim.Kind = "drop_before_create"
	// Stall waits Delay or until the client gives up, whichever comes first (Delay
	// 0: until the client gives up), then goes on as usual: a create stalled this way
	// still creates the order, but at once when the client goes away, not after
	// Delay. SlowCreate is a handler that takes its time whatever the client does.
	Stall sim.Kind = "stall"
	// HTMLLogin200 answers 200 with an HTML page, as a 1C publication does when it
	// does not accept the credentials.
	HTMLLogin200 sim.Kind = "html_login_200"
	// ExpireSessions forgets every session, so this and later requests carrying an
	// ibsession cookie get 400.
	ExpireSessions sim.Kind = "expire_sessions"
	// SlowCreate is a handler that takes Delay whatever the client does, as 1C does:
	// it does not notice that the client gave up. A create writes the order at once
	// and commits it after Delay, then answers (to nobody, if the client is gone).
	// Until it commits, finds do not see the order and, with Dedupe, another create
	// of the same external id waits for the managed lock. Another operation just
	// takes Delay. Close rolls back a create that has not committed. Delay must be
	// positive.
	SlowCreate sim.Kind = "slow_create"
	// Gateway504After is a reverse proxy that gives up on 1C: the client is answered
	// 504 with the proxy's HTML page after Delay, while the handler runs on in the
	// background and commits (a create creates the order, a cancel cancels) after
	// Hold, counted from when the request reached 1C (0: 2×Delay). Until then the
	// create is uncommitted as with SlowCreate. Close rolls it back.
	Gateway504After sim.Kind = "gateway_504_after"
	// HTML404 answers 404 with a web server's HTML page, as when the publication is
	// missing, before 1C runs anything. OneC.SetMissing does it until cleared.
	HTML404 sim.Kind = "html_404"
)

// faultNames are the names of the faults on the control endpoint, in the order the
// kinds were declared: a plain status is status_<code>, a kind its own name.
var faultNames = []string{
	"status_503", "status_502", "status_504", "status_406",
	string(LockConflict500), string(BusinessError500), "status_422",
	string(DropAfterCreate), string(DropBeforeCreate), string(Stall),
	string(HTMLLogin200), string(ExpireSessions), string(SlowCreate),
	string(Gateway504After), string(HTML404), string(Error500AfterCreate),
}

// plainStatuses are the statuses a fault without a kind may answer.
var plainStatuses = map[int]bool{
	http.StatusServiceUnavailable: true, http.StatusBadGateway: true, http.StatusGatewayTimeout: true,
	http.StatusNotAcceptable: true, http.StatusUnprocessableEntity: true,
}

// FaultNames lists every fault's name on the control endpoint, e.g.
// "drop_after_create".
func FaultNames() []string { return append([]string(nil), faultNames...) }

// FaultName is the name of f's kind, or status_<code> for a plain status.
func FaultName(f sim.Fault) string {
	if f.Kind != "" {
		return string(f.Kind)
	}
	return "status_" + strconv.Itoa(f.Status)
}

// ParseFault is the fault a name stands for: a sim.Fault with only Status or Kind
// set.
func ParseFault(name string) (sim.Fault, error) {
	for _, n := range faultNames {
		if n != name {
			continue
		}
		if code, ok := strings.CutPrefix(n, "status_"); ok {
			st, _ := strconv.Atoi(code)
			return sim.Fault{Status: st}, nil
		}
		return sim.Fault{Kind: sim.Kind(n)}, nil
	}
	return sim.Fault{}, fmt.Errorf("sim: unknown fault kind %q", name)
}

// checkFault refuses what a 1C fault cannot be: OneC.Faults panics on it, the
// control endpoint answers 400.
func checkFault(f sim.Fault) error {
	switch {
	case f.Kind == "" && !plainStatuses[f.Status]:
		return fmt.Errorf("sim: fault status %d: 1C's plain statuses are 406, 422, 502, 503, 504", f.Status)
	case f.Kind != "" && f.Status != 0:
		return fmt.Errorf("sim: fault kind %s has its own status", f.Kind)
	case f.Kind != "" && !knownKind(f.Kind):
		return fmt.Errorf("sim: fault kind %q is unknown", f.Kind)
	}
	switch f.Op {
	case "", opPing, opFind, opCreate, opCancel, opStock, opFindReturns, opCreateReturn:
	default:
		return fmt.Errorf("sim: fault op %q is not one of ping, find, create, cancel, stock, find_returns, create_return", f.Op)
	}
	if f.RetryAfter != 0 || f.Body != "" {
		return fmt.Errorf("sim: a 1C fault has no RetryAfter or Body: 1C answers its own")
	}
	if f.Kind == SlowCreate && f.Delay == 0 {
		return fmt.Errorf("sim: a slow_create fault needs a positive delay")
	}
	return nil
}

func knownKind(k sim.Kind) bool {
	for _, n := range faultNames {
		if n == string(k) {
			return true
		}
	}
	return false
}

// holdOf is when a Gateway504After commits.
func holdOf(f sim.Fault) time.Duration {
	if f.Hold == 0 {
		return 2 * f.Delay
	}
	return f.Hold
}

// ControlFault is a fault as the control endpoint (POST /_sim/faults) and Remote
// carry it: the fault and how many matching requests it hits, Times (0: 1,
// sim.Forever: every one).
type ControlFault struct {
	Fault sim.Fault
	Times int
}

type faultWire struct {
	Op         string `json:"op,omitempty"`
	Kind       string `json:"kind"`
	Times      int    `json:"times,omitempty"`
	Delay      string `json:"delay,omitempty"`
	Hold       string `json:"hold,omitempty"`
	ExternalID string `json:"external_id,omitempty"`
}

// count is the n of Faults.Add: Times, 0 counting as 1.
func (c ControlFault) count() int {
	if c.Times == 0 {
		return 1
	}
	return c.Times
}

// MarshalJSON writes {"op","kind":"<name>","times","delay":"<Go duration>",
// "hold":"<Go duration>","external_id"}.
func (c ControlFault) MarshalJSON() ([]byte, error) {
	f := c.Fault
	w := faultWire{Op: f.Op, Kind: FaultName(f), Times: c.Times, ExternalID: f.ExternalID}
	if f.Delay != 0 {
		w.Delay = f.Delay.String()
	}
	if f.Hold != 0 {
		w.Hold = f.Hold.String()
	}
	return json.Marshal(w)
}

// UnmarshalJSON reads what MarshalJSON writes and checks it.
func (c *ControlFault) UnmarshalJSON(b []byte) error {
	var w faultWire
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	f, err := ParseFault(w.Kind)
	if err != nil {
		return err
	}
	f.Op, f.ExternalID = w.Op, w.ExternalID
	if w.Delay != "" {
		if f.Delay, err = time.ParseDuration(w.Delay); err != nil {
			return fmt.Errorf("sim: fault delay: %w", err)
		}
	}
	if w.Hold != "" {
		if f.Hold, err = time.ParseDuration(w.Hold); err != nil {
			return fmt.Errorf("sim: fault hold: %w", err)
		}
	}
	nc := ControlFault{Fault: f, Times: w.Times}
	if err := sim.NewFaults(checkFault).Check(nc.count(), f); err != nil {
		return err
	}
	*c = nc
	return nil
}
