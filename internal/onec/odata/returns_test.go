package odata

import (
	"context"
	"strings"
	"testing"

	"github.com/ordersync/ordersync/internal/onec"
)

// Returns are not carried over OData: both calls are a configuration failure that
// says what to do, and nothing is sent.
func TestReturnsAreNotCarriedOverOData(t *testing.T) {
	c := &Client{}
	_, ferr := c.FindReturns(context.Background(), "ozon:return:1")
	_, cerr := c.CreateReturn(context.Background(), onec.CreateReturn{ExternalID: "ozon:return:1"})
	for _, err := range []error{ferr, cerr} {
		if onec.ClassOf(err) != onec.Configuration || !strings.Contains(err.Error(), "not carried over the standard OData interface") ||
			!strings.Contains(err.Error(), "onec.interface") {
			t.Errorf("%v (%s), want a configuration error naming onec.interface", err, onec.ClassOf(err))
		}
	}
}
