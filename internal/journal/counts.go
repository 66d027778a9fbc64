package journal

import "context"

// Count is how many operations of one kind and source are in one status: a row of
// Counter.Counts.
type Count struct {
	Kind       string
	Source     string
	Status     Status
	Operations int64
}

// Counter counts the journal's operations by kind, source and status, in one
// query. Both stores' journals implement it; /metrics exports it as
// ordersync_operations. It is not part of Store, which the engine and the commands
// need: only the admin listener asks for it.
type Counter interface {
	// Counts returns one row per kind, source and status that has operations,
	// ordered by kind, source and status.
	Counts(ctx context.Context) ([]Count, error)
}
