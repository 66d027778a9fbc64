// Package onecsim is an in-memory 1C:Enterprise base publishing contract v1
// (deploy/1c/openapi.yaml): sessions, managed locks, latency, outages and the faults
// of a real publication on demand (OneC.Faults, with the kinds declared here), and
// control endpoints under /_sim/ for the sim command (Remote is their client).
package onecsim
