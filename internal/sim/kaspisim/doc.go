// Package kaspisim is a simulated Kaspi Shop API (orders: JSON:API listings, the
// entries of an order, the change of status to ACCEPTED_BY_MERCHANT) with its
// documented pagination, filters and errors, faults on demand (Kaspi.Faults), and a
// puller of a merchant's XML price list as Kaspi fetches it (FeedPuller).
package kaspisim
