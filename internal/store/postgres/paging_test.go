package postgres

import (
	"testing"

	"github.com/ordersync/ordersync/internal/store/storetest"
)

func TestPaging(t *testing.T) {
	t.Parallel()
	storetest.Paging(t, func(t *testing.T) storetest.PagingStores {
		db := newDB(t, Config{})
		return storetest.PagingStores{Journal: db.Journal(), Inbox: db.Inbox(), Outbox: db.Outbox(), Enqueue: enqueueIn(db)}
	})
}
