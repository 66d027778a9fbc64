// Package sim owns the simulators that ordersync is tested and demonstrated against:
// an in-memory 1C:Enterprise base publishing contract v1 (deploy/1c/openapi.yaml) with
// faults injected on demand (OneC); the Kaspi.kz, Ozon and Wildberries APIs with their
// documented shapes, pagination, 429 and 5xx on demand, and a record of the
// acknowledgements received (Kaspi, Ozon, Wildberries); and a webhook receiver that
// checks Standard Webhooks signatures (WebhookSink).
//
// The simulators are written independently of the production clients: they declare
// their own wire types and parse numbers exactly on their own, so a mistake on one
// side cannot cancel out a mistake on the other.
package sim
