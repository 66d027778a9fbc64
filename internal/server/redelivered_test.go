package server

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/ordersync/ordersync/internal/inbox"
)

// stalledLooker is an inbox whose redelivery lookup does not answer: the database
// is away. Its Receive is the fake's.
type stalledLooker struct{ *fakeInbox }

func (stalledLooker) Redelivered(ctx context.Context, _ inbox.Event) (inbox.Receipt, bool, error) {
	<-ctx.Done()
	return inbox.Receipt{}, false, ctx.Err()
}

// A lookup that the store has not answered within the receive timeout is answered
// as a Receive that ran out would be — unavailable, retry — rather than
// handed to Receive for as long again: the sender is answered within one receive
// timeout, not two.
func TestLookupThatTimesOutIsNotTriedAgainAsAReceive(t *testing.T) {
	t.Parallel()
	var st stalledLooker
	h := newHarness(t, func(c *Config) {
		st = stalledLooker{c.Inbox.(*fakeInbox)}
		c.Inbox = st
		c.ReceiveTimeout = 50 * time.Millisecond
	})
	w := h.do(signedRequest("site", "msg_stalled", testNow, orderJSON("site", "S-1"), siteSecret))
	wantStatus(t, w, http.StatusServiceUnavailable)
	if got := w.Header().Get("Retry-After"); got == "" {
		t.Errorf("no Retry-After on the unavailable answer")
	}
	st.mu.Lock()
	receives := st.receives
	st.mu.Unlock()
	if receives != 0 {
		t.Fatalf("Receive was called %d times after the lookup ran out, want none", receives)
	}
	if got := h.stat("site", "error", "inbox_error"); got != 1 {
		t.Fatalf("deliveries counted as error/inbox_error: %d, want 1", got)
	}
}
