package ui

import (
	"context"
	"strings"

	"github.com/ordersync/ordersync/internal/onec"
)

// OneCFinder is what the pages ask of 1C: the orders of one external id
// (onec.Client has it).
type OneCFinder interface {
	FindOrders(ctx context.Context, externalID string) ([]onec.Order, error)
}

// The documents orders become in 1C, as its navigation links name them.
const (
	DocumentOrder      = "Документ.ЗаказКлиента"    // УТ 11, КА 2, ERP 2 (the HTTP service's module, OData ut11)
	DocumentBuyerOrder = "Документ.ЗаказПокупателя" // УНФ (OData unf)
)

// navigationRef is the ref of a 1C navigation link (e1cib/data/…?ref=) for the
// object whose GUID is guid: 1C writes the GUID's 32 hex digits with its groups
// reordered, the last two first, then the third, the second and the first
// (aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee becomes ddddeeeeeeeeeeeeccccbbbbaaaaaaaa).
// ok is false for a string that is not a GUID.
func navigationRef(guid string) (string, bool) {
	g := strings.Split(strings.ToLower(strings.TrimSpace(guid)), "-")
	if len(g) != 5 || len(g[0]) != 8 || len(g[1]) != 4 || len(g[2]) != 4 || len(g[3]) != 4 || len(g[4]) != 12 {
		return "", false
	}
	for _, p := range g {
		for _, r := range p {
			if !('0' <= r && r <= '9' || 'a' <= r && r <= 'f') {
				return "", false
			}
		}
	}
	return g[3] + g[4] + g[2] + g[1] + g[0], true
}

// oneCLink is the address that opens the document of ref in 1C's web client, ""
// when ui.onec_web_url is not set or ref is not a GUID.
func (s *Server) oneCLink(ref string) string {
	if s.cfg.OneCWebURL == "" {
		return ""
	}
	nav, ok := navigationRef(ref)
	if !ok {
		return ""
	}
	return strings.TrimRight(s.cfg.OneCWebURL, "/") + "/#e1cib/data/" + s.cfg.OneCDocument + "?ref=" + nav
}
