// Package connectors is the home of the marketplace and CRM connectors, one
// subpackage each (kaspi, ozon, wildberries, bitrix24, webhook). A connector polls
// or receives orders, maps them to the canonical order of internal/order, and
// registers their operations in the journal; it never talks to 1C itself.
package connectors
