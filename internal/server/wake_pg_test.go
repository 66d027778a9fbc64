package server

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ordersync/ordersync/internal/journal"
)

// A Bitrix24 deal update that arrives while its create is in a 1C call (the row
// claimed) is answered 200 at once, and so is every delivery of the same burst —
// 4 updates, 36 new site orders — and the update takes effect when the call ends.
// (Before, the update's wake waited for the claim's row lock inside the receiving
// statement and held every delivery grouped with it: 34 of 36 new orders got 503.)
func TestDealUpdateDuringItsCreatesCallIsAnsweredAtOnce(t *testing.T) {
	t.Parallel()
	h := newPGHarness(t)
	ctx := context.Background()
	key := "bitrix24:deal:789:create"
	if st, body := h.post(bitrixRequest(bitrixForm("ONCRMDEALADD", "789", "1700000000", bxTokenText))); st != http.StatusOK {
		t.Fatalf("deal add: %d %s", st, body)
	}
	claim, err := h.db.Journal().ClaimKey(ctx, key, "engine") // the create's 1C call is under way
	if err != nil {
		t.Fatal(err)
	}
	defer claim.Release(ctx)

	const updates, orders = 4, 36
	statuses := make([]int, updates+orders)
	var wg sync.WaitGroup
	for i := range updates + orders {
		wg.Go(func() {
			if i < updates {
				statuses[i], _ = h.post(bitrixRequest(bitrixForm("ONCRMDEALUPDATE", "789", fmt.Sprint(1700000100+i), bxTokenText)))
				return
			}
			id := fmt.Sprintf("BURST-%02d", i)
			statuses[i], _ = h.post(signedRequest("site", "msg_"+id, testNow, orderJSON("site", id), siteSecret))
		})
	}
	wg.Wait()
	for i, st := range statuses {
		if st != http.StatusOK {
			t.Fatalf("delivery %d of the burst beside the claimed create: %d, want 200", i, st)
		}
	}
	ops, err := h.db.Journal().List(ctx, journal.Filter{Source: "site", Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, op := range ops {
		if strings.HasPrefix(op.Key, "site:order:BURST-") {
			n++
		}
	}
	if n != orders {
		t.Fatalf("%d new orders registered, want %d", n, orders)
	}
	// The call ends with a retry far off (the deal was not ready): the updates that
	// came meanwhile make it due now.
	if err := claim.Finish(ctx, journal.Finish{Status: journal.StatusPending, Error: "deal not in a create stage",
		NextAttemptAt: time.Now().Add(24 * time.Hour)}); err != nil {
		t.Fatal(err)
	}
	op, err := h.db.Journal().Get(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	if op.NextAttemptAt.After(time.Now().Add(time.Minute)) {
		t.Fatalf("after the call %s is due at %v: the deal updates were lost", key, op.NextAttemptAt)
	}
}
