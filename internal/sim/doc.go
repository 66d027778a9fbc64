// Package sim holds what the simulators ordersync is tested and demonstrated
// against have in common: one fault type (Fault, queued in each simulator's Faults),
// the HTTP server their Start runs (Server), and a TCP proxy that injects network
// faults between two real programs (TCPProxy).
//
// The simulators are one package each: onecsim, an in-memory 1C:Enterprise base
// publishing contract v1 (deploy/1c/openapi.yaml); odatasim, a base publishing
// 1C's standard OData interface (УТ 11 or УНФ) with its silent failures; kaspisim, ozonsim and wbsim, the
// Kaspi.kz, Ozon and Wildberries APIs with their documented shapes, pagination and
// limits, and a record of the acknowledgements received; bitrix24sim, a Bitrix24
// portal's REST API; webhooksim, a webhook receiver that checks Standard Webhooks
// signatures.
//
// The simulators are written independently of the production clients: they declare
// their own wire types and parse numbers exactly on their own, so a mistake on one
// side cannot cancel out a mistake on the other.
package sim
