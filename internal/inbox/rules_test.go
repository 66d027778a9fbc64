package inbox

import (
	"encoding/json"
	"testing"

	"github.com/ordersync/ordersync/internal/journal"
)

func TestCheckReceive(t *testing.T) {
	ev := Event{Source: "site", ID: "msg_1"}
	ok := Answer{Status: 200}
	reg := func(key string) Registration {
		return Registration{Op: journal.NewOperation{Key: key, Kind: "order.create", Payload: json.RawMessage(`{}`)}}
	}
	for _, c := range []struct {
		name   string
		ev     Event
		regs   []Registration
		answer Answer
		want   string
	}{
		{"valid", ev, []Registration{reg("a"), reg("b")}, ok, ""},
		{"no source", Event{ID: "x"}, nil, ok, "the source is required"},
		{"no id", Event{Source: "site"}, nil, ok, "the event id is required"},
		{"answer 99", ev, nil, Answer{Status: 99}, "answer status 99 is not an HTTP status"},
		{"answer 600", ev, nil, Answer{Status: 600}, "answer status 600 is not an HTTP status"},
		{"invalid registration", ev, []Registration{reg("a"), {Op: journal.NewOperation{Key: "b"}}}, ok, `registration 2 ("b"): kind is required`},
		{"twice", ev, []Registration{reg("a"), reg("a")}, ok, `registration 2: key "a" appears twice`},
	} {
		err := CheckReceive(c.ev, c.regs, c.answer)
		got := ""
		if err != nil {
			got = err.Error()
		}
		if got != c.want {
			t.Errorf("%s: CheckReceive = %q, want %q", c.name, got, c.want)
		}
	}
}

func TestFilterCheck(t *testing.T) {
	if err := (Filter{}).Check(); err != nil {
		t.Error(err)
	}
	if err := (Filter{Status: string(Processed)}).Check(); err != nil {
		t.Error(err)
	}
	if err := (Filter{Status: "odd"}).Check(); err == nil || err.Error() != `unknown status "odd" (stored events are processed)` {
		t.Errorf("Check of an unknown status = %v", err)
	}
}
