package kaspisim

import "fmt"

// StatusReturnAcceptedByMerchant is the status of a return the merchant accepted
// before the goods are back.
const StatusReturnAcceptedByMerchant = "RETURN_ACCEPTED_BY_MERCHANT"

// RequestReturn moves an order into Kaspi's return flow: the buyer asked Kaspi
// Delivery to take it back (KASPI_DELIVERY_RETURN_REQUESTED, state KASPI_DELIVERY).
func (s *Kaspi) RequestReturn(code string) error {
	return s.move(code, StateKaspiDelivery, StatusReturnRequested)
}

// AcceptReturn is the merchant accepting the return (RETURN_ACCEPTED_BY_MERCHANT);
// the goods are not back yet.
func (s *Kaspi) AcceptReturn(code string) error {
	return s.move(code, StateKaspiDelivery, StatusReturnAcceptedByMerchant)
}

// Returned is the goods back with the merchant: status RETURNED, and the order in
// the archive with the other finished ones.
func (s *Kaspi) Returned(code string) error {
	return s.move(code, StateArchive, StatusReturned)
}

func (s *Kaspi) move(code, state, status string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	o, ok := s.orders[code]
	if !ok {
		return fmt.Errorf("sim: kaspi: no order %s", code)
	}
	o.State, o.Status = state, status
	return nil
}
