package onecsim

import (
	"encoding/json"
	"fmt"
	"time"
)

// FaultKind is what an injected fault does to the request it hits.
type FaultKind int

const (
	// Status503 answers 503 Service Unavailable before 1C runs anything.
	Status503 FaultKind = iota + 1
	// Status502 answers 502 Bad Gateway before 1C runs anything.
	Status502
	// Status504 answers 504 Gateway Timeout before 1C runs anything.
	Status504
	// Status406 answers 406 as a publication does when no session or licence is free.
	Status406
	// LockConflict500 answers 500 as the module answers a managed-lock conflict: the
	// contract's error object, code lock_conflict, its message 1C's text. The
	// transaction rolled back and nothing was written.
	LockConflict500
	// BusinessError500 answers 500 with a 1C exception raised by the module, as the
	// contract's {"error":{"code":"exception",…}} object; nothing
	// was written.
	BusinessError500
	// Status422 answers 422 with an {"error":…} body; nothing was written.
	Status422
	// DropAfterCreate lets the handler do its work (the order IS created), then
	// closes the TCP connection without an answer.
	DropAfterCreate
	// DropBeforeCreate closes the TCP connection without an answer before the
	// handler runs: nothing is created.
	DropBeforeCreate
	// Stall waits Delay or until the client gives up, whichever comes first (Delay
	// 0: until the client gives up), then goes on as usual: a create stalled this way
	// still creates the order, but at once when the client goes away, not after
	// Delay. SlowCreate is a handler that takes its time whatever the client does.
	Stall
	// HTMLLogin200 answers 200 with an HTML page, as a 1C publication does when it
	// does not accept the credentials.
	HTMLLogin200
	// ExpireSessions forgets every session, so this and later requests carrying an
	// ibsession cookie get 400.
	ExpireSessions
	// SlowCreate is a handler that takes Delay whatever the client does, as 1C does:
	// it does not notice that the client gave up. A create writes the order at once
	// and commits it after Delay, then answers (to nobody, if the client is gone).
	// Until it commits, finds do not see the order and, with Dedupe, another create
	// of the same external id waits for the managed lock. Another operation just
	// takes Delay. Close rolls back a create that has not committed. Delay must be
	// positive.
	SlowCreate
	// Gateway504After is a reverse proxy that gives up on 1C: the client is answered
	// 504 with the proxy's HTML page after Delay, while the handler runs on in the
	// background and commits (a create creates the order, a cancel cancels) after
	// Hold, counted from when the request reached 1C. Until then the create is
	// uncommitted as with SlowCreate. Close rolls it back.
	Gateway504After
	// HTML404 answers 404 with a web server's HTML page, as when the publication is
	// missing, before 1C runs anything. OneC.SetMissing does it until cleared.
	HTML404
)

var faultKindNames = map[FaultKind]string{
	Status503:        "status_503",
	Status502:        "status_502",
	Status504:        "status_504",
	Status406:        "status_406",
	LockConflict500:  "lock_conflict_500",
	BusinessError500: "business_error_500",
	Status422:        "status_422",
	DropAfterCreate:  "drop_after_create",
	DropBeforeCreate: "drop_before_create",
	Stall:            "stall",
	HTMLLogin200:     "html_login_200",
	ExpireSessions:   "expire_sessions",
	SlowCreate:       "slow_create",
	Gateway504After:  "gateway_504_after",
	HTML404:          "html_404",
}

// FaultKinds lists every kind, in declaration order.
func FaultKinds() []FaultKind {
	ks := make([]FaultKind, 0, len(faultKindNames))
	for k := Status503; k <= HTML404; k++ {
		ks = append(ks, k)
	}
	return ks
}

func (k FaultKind) String() string {
	if n, ok := faultKindNames[k]; ok {
		return n
	}
	return fmt.Sprintf("fault_kind(%d)", int(k))
}

// MarshalText writes the kind's name, e.g. "drop_after_create".
func (k FaultKind) MarshalText() ([]byte, error) {
	n, ok := faultKindNames[k]
	if !ok {
		return nil, fmt.Errorf("sim: unknown fault kind %d", int(k))
	}
	return []byte(n), nil
}

// UnmarshalText reads a kind by its name.
func (k *FaultKind) UnmarshalText(b []byte) error {
	kind, err := ParseFaultKind(string(b))
	if err != nil {
		return err
	}
	*k = kind
	return nil
}

// ParseFaultKind finds a kind by its name.
func ParseFaultKind(name string) (FaultKind, error) {
	for k, n := range faultKindNames {
		if n == name {
			return k, nil
		}
	}
	return 0, fmt.Errorf("sim: unknown fault kind %q", name)
}

// Fault is queued with OneC.Inject and fires on the matching requests, in FIFO order.
type Fault struct {
	// Op is "ping", "find", "create", "cancel", "stock", or "" for any of them.
	Op   string
	Kind FaultKind
	// Times is how many matching requests the fault hits: 0 means 1, -1 forever.
	Times int
	// Delay is how long a Stall waits (0: until the client gives up), how long a
	// SlowCreate takes, and after how long a Gateway504After answers 504.
	Delay time.Duration
	// Hold is, for Gateway504After, when the handler commits, counted like Delay
	// from when the request reached 1C; 0 means 2×Delay. Other kinds ignore it.
	Hold time.Duration
	// ExternalID, when set, restricts the fault to finds, creates and cancels of
	// this external id.
	ExternalID string
}

type faultWire struct {
	Op         string    `json:"op,omitempty"`
	Kind       FaultKind `json:"kind"`
	Times      int       `json:"times,omitempty"`
	Delay      string    `json:"delay,omitempty"`
	Hold       string    `json:"hold,omitempty"`
	ExternalID string    `json:"external_id,omitempty"`
}

// MarshalJSON writes {"op","kind":"<name>","times","delay":"<Go duration>",
// "hold":"<Go duration>","external_id"}.
func (f Fault) MarshalJSON() ([]byte, error) {
	w := faultWire{Op: f.Op, Kind: f.Kind, Times: f.Times, ExternalID: f.ExternalID}
	if f.Delay != 0 {
		w.Delay = f.Delay.String()
	}
	if f.Hold != 0 {
		w.Hold = f.Hold.String()
	}
	return json.Marshal(w)
}

// UnmarshalJSON reads what MarshalJSON writes and checks it.
func (f *Fault) UnmarshalJSON(b []byte) error {
	var w faultWire
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	nf := Fault{Op: w.Op, Kind: w.Kind, Times: w.Times, ExternalID: w.ExternalID}
	if w.Delay != "" {
		d, err := time.ParseDuration(w.Delay)
		if err != nil {
			return fmt.Errorf("sim: fault delay: %w", err)
		}
		nf.Delay = d
	}
	if w.Hold != "" {
		d, err := time.ParseDuration(w.Hold)
		if err != nil {
			return fmt.Errorf("sim: fault hold: %w", err)
		}
		nf.Hold = d
	}
	if err := nf.validate(); err != nil {
		return err
	}
	*f = nf
	return nil
}

func (f Fault) validate() error {
	if _, ok := faultKindNames[f.Kind]; !ok {
		return fmt.Errorf("sim: fault kind %d is unknown", int(f.Kind))
	}
	switch f.Op {
	case "", opPing, opFind, opCreate, opCancel, opStock:
	default:
		return fmt.Errorf("sim: fault op %q is not one of ping, find, create, cancel, stock", f.Op)
	}
	if f.Times < -1 {
		return fmt.Errorf("sim: fault times %d: want -1 (forever), 0 (once) or more", f.Times)
	}
	if f.Delay < 0 {
		return fmt.Errorf("sim: fault delay %s is negative", f.Delay)
	}
	if f.Hold < 0 {
		return fmt.Errorf("sim: fault hold %s is negative", f.Hold)
	}
	if f.Kind == SlowCreate && f.Delay == 0 {
		return fmt.Errorf("sim: a slow_create fault needs a positive delay")
	}
	return nil
}

// hold is when a Gateway504After commits.
func (f Fault) hold() time.Duration {
	if f.Hold == 0 {
		return 2 * f.Delay
	}
	return f.Hold
}

func (f Fault) matches(op, externalID string) bool {
	if f.Op != "" && f.Op != op {
		return false
	}
	return f.ExternalID == "" || f.ExternalID == externalID
}
