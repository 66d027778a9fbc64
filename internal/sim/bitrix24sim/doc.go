// Package bitrix24sim is a simulated Bitrix24 portal: the REST methods ordersync
// reads deals with, behind an inbound webhook's user id and code, faults on demand
// (Bitrix24.Faults), and the outgoing webhook a portal sends about a deal.
package bitrix24sim
