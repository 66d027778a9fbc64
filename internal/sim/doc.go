// Package sim owns the simulators that ordersync is tested and demonstrated against:
// an in-memory 1C:Enterprise base publishing contract v1 (ARCHITECTURE.md §4.1), with
// faults injected on demand (OneC). Later, marketplace simulators join it.
//
// The simulators are written independently of the production clients: they declare
// their own wire types and parse numbers exactly on their own, so a mistake on one
// side cannot cancel out a mistake on the other.
package sim
