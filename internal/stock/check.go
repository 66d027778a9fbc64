package stock

import (
	"errors"
	"fmt"
)

// Check refuses a snapshot a store must not write for the operation key: another
// key, or no schedule, warehouse or slot.
func (s *Snapshot) Check(key string) error {
	switch {
	case s.Key != key:
		return fmt.Errorf("the snapshot's key %q is not the operation's", s.Key)
	case s.Schedule == "":
		return errors.New("the schedule is required")
	case s.Warehouse == "":
		return errors.New("the warehouse is required")
	case s.Slot.IsZero():
		return errors.New("the slot is required")
	}
	return nil
}

// Known reports whether o is one of the outcomes.
func (o Outcome) Known() bool {
	switch o {
	case Published, Refused, Mismatch, Skipped, Deferred:
		return true
	}
	return false
}

// CheckStates refuses item states a store must not write: one without its
// marketplace, warehouse or SKU, or with an unknown outcome.
func CheckStates(states []ItemState) error {
	for i, st := range states {
		switch {
		case st.Marketplace == "" || st.Warehouse == "" || st.SKU == "":
			return fmt.Errorf("state %d (%s %s %s): marketplace, warehouse and SKU are required", i, st.Marketplace, st.Warehouse, st.SKU)
		case !st.Outcome.Known():
			return fmt.Errorf("state %d (%s %s %s): unknown outcome %q", i, st.Marketplace, st.Warehouse, st.SKU, st.Outcome)
		}
	}
	return nil
}
