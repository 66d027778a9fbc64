package journal

import (
	"encoding/json"
	"errors"
	"testing"
)

func TestNewOperationValidate(t *testing.T) {
	ok := NewOperation{Key: "site:order:1:create", Kind: "order.create", Payload: json.RawMessage(`{}`)}
	for _, c := range []struct {
		name string
		op   func(*NewOperation)
		want string
	}{
		{"valid", func(*NewOperation) {}, ""},
		{"no key", func(o *NewOperation) { o.Key = "" }, "key is required"},
		{"no kind", func(o *NewOperation) { o.Kind = "" }, "kind is required"},
		{"no payload", func(o *NewOperation) { o.Payload = nil }, "payload is required"},
		{"not JSON", func(o *NewOperation) { o.Payload = json.RawMessage(`{`) }, "payload is not valid JSON"},
	} {
		op := ok
		c.op(&op)
		if got := errText(op.Validate()); got != c.want {
			t.Errorf("%s: Validate = %q, want %q", c.name, got, c.want)
		}
	}
	if got := errText(ok.ValidateFailed("")); got != "the reason is required" {
		t.Errorf("ValidateFailed without a reason = %q", got)
	}
	if got := errText(NewOperation{}.ValidateFailed("")); got != "key is required" {
		t.Errorf("ValidateFailed of an invalid operation = %q, want the operation's error first", got)
	}
	if err := ok.ValidateFailed("unmapped SKU"); err != nil {
		t.Errorf("ValidateFailed = %v", err)
	}
}

func TestFinishOutcomeAndCheck(t *testing.T) {
	for s, want := range map[Status]Outcome{StatusDone: OutcomeDone, StatusPending: OutcomeRetry, StatusFailed: OutcomeFailed, "odd": ""} {
		if got := (Finish{Status: s}).Outcome(); got != want {
			t.Errorf("Outcome of %q = %q, want %q", s, got, want)
		}
	}
	for _, c := range []struct {
		f    Finish
		want string
	}{
		{Finish{Status: StatusDone, Exchanges: json.RawMessage(`[]`), Payload: json.RawMessage(`{}`)}, ""},
		{Finish{Status: "odd"}, `unknown status "odd" (want done, pending or failed)`},
		{Finish{Status: StatusPending, Exchanges: json.RawMessage(`[`)}, "exchanges are not valid JSON"},
		{Finish{Status: StatusFailed, Payload: json.RawMessage(`{`)}, "payload is not valid JSON"},
	} {
		if got := errText(c.f.Check()); got != c.want {
			t.Errorf("Check(%+v) = %q, want %q", c.f, got, c.want)
		}
	}
	r := &Result{Ref: "r"}
	if f := (Finish{Status: StatusDone, Error: "e", Result: r}); f.LastError() != "" || f.StoredResult() != r {
		t.Errorf("done: last error %q, result %v", f.LastError(), f.StoredResult())
	}
	if f := (Finish{Status: StatusPending, Error: "e", Result: r}); f.LastError() != "e" || f.StoredResult() != nil {
		t.Errorf("pending: last error %q, result %v", f.LastError(), f.StoredResult())
	}
}

func TestFailGuards(t *testing.T) {
	if got := errText(CheckReason("")); got != "the reason is required" {
		t.Errorf("CheckReason = %q", got)
	}
	if err := CheckFail(Operation{Key: "k", Status: StatusPending}); err != nil {
		t.Errorf("CheckFail of a pending operation = %v", err)
	}
	for _, s := range []Status{StatusDone, StatusFailed} {
		err := CheckFail(Operation{Key: "k", Status: s})
		var npe *NotPendingError
		if !errors.Is(err, ErrNotPending) || !errors.As(err, &npe) || npe.Operation.Status != s {
			t.Errorf("CheckFail of a %s operation = %v, want a *NotPendingError", s, err)
		}
	}
	if got := errText(CheckKey("")); got != "key is required" {
		t.Errorf("CheckKey = %q", got)
	}
}

func TestFilterCheck(t *testing.T) {
	for _, s := range []Status{"", StatusPending, StatusDone, StatusFailed} {
		if err := (Filter{Status: s}).Check(); err != nil {
			t.Errorf("Check of status %q = %v", s, err)
		}
	}
	if got := errText(Filter{Status: "odd"}.Check()); got != `unknown status "odd" (want pending, done or failed)` {
		t.Errorf("Check of an unknown status = %q", got)
	}
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
