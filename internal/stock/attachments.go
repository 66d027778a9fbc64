package stock

import (
	"fmt"

	"github.com/ordersync/ordersync/internal/journal"
)

// SnapshotToStore is the rule both stores follow for a verdict's attachments
// (journal.Finish.Attachments): the one attachment a store writes is a *Snapshot, at
// most one (an operation stores one snapshot, under its key); any other type is
// refused whatever the status, so that a kind whose results no store writes fails its
// first attempt rather than its last. Nil attachments are skipped. It returns the
// snapshot to write with the verdict: nil when there is none or the verdict is not
// done.
func SnapshotToStore(f journal.Finish) (*Snapshot, error) {
	var snap *Snapshot
	for i, a := range f.Attachments {
		switch a := a.(type) {
		case nil:
		case *Snapshot:
			if a == nil {
				continue
			}
			if snap != nil {
				return nil, fmt.Errorf("attachment %d: a second stock snapshot (an operation stores one)", i)
			}
			snap = a
		default:
			return nil, fmt.Errorf("attachment %d: this store does not write attachments of type %T", i, a)
		}
	}
	if f.Status != journal.StatusDone {
		return nil, nil
	}
	return snap, nil
}
