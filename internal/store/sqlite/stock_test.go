package sqlite

import (
	"testing"

	"github.com/ordersync/ordersync/internal/journal"
	"github.com/ordersync/ordersync/internal/stock"
	"github.com/ordersync/ordersync/internal/store/storetest"
)

func TestStock(t *testing.T) {
	t.Parallel()
	storetest.Stock(t, func(t *testing.T) (journal.Store, stock.Store) {
		db := journalTestDB(t, Config{})
		return db.Journal(), db.Stock()
	})
}
