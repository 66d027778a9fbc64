package reconcile

import (
	"testing"

	"github.com/shopspring/decimal"
)

// TestNotesKeepTheirEnglish: a note is a code and arguments, and the CLI and the
// exports still read the English sentence made of them.
func TestNotesKeepTheirEnglish(t *testing.T) {
	t.Parallel()
	mp, oc := decimal.RequireFromString("10000"), decimal.RequireFromString("15019")
	diff := mp.Sub(oc)
	for _, tc := range []struct {
		code NoteCode
		args NoteArgs
		want string
	}{
		{NoteAmountDiffers, NoteArgs{Marketplace: &mp, OneC: &oc, Difference: &diff},
			"the marketplace's total 10000, 1C's 15019: a difference of -5019"},
		{NoteCancelledLive, NoteArgs{Cancel: &CancelNote{ByMarketplace: true, Reason: "по просьбе покупателя"}, Number: "ОС-1"},
			"cancelled at the marketplace (по просьбе покупателя), but ОС-1 is live in 1C (not cancelled, not marked for deletion)"},
		{NoteCancelledLive, NoteArgs{Cancel: &CancelNote{Status: "failed", Error: "boom"}, Number: "ОС-1"},
			"a cancel was registered (failed): boom, but ОС-1 is live in 1C (not cancelled, not marked for deletion)"},
		{NoteNeverRegistered, NoteArgs{Numbers: []string{"ОС-1", "ОС-2"}},
			"the marketplace lists the order; ordersync never registered it; 1C holds ОС-1, ОС-2, not created by ordersync"},
		{NoteGoneFrom1C, NoteArgs{Number: "ОС-1"}, "done as ОС-1, but 1C no longer holds an order with this external id"},
		{NoteDuplicate, NoteArgs{Count: 2, Numbers: []string{"ОС-1", "ОС-2"}}, "1C holds 2 orders for it: ОС-1, ОС-2"},
		{NoteNotDone, NoteArgs{}, "not yet carried out in 1C"},
		{NoteNotFromOrdersync, NoteArgs{Deleted: true}, "1C holds it, but ordersync did not create it: made by hand in 1C? (marked for deletion in 1C)"},
	} {
		if got := English(tc.code, tc.args); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.code, got, tc.want)
		}
	}
}
