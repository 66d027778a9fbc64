package main

import (
	"log/slog"
	"math"
	"os"
	"runtime/debug"
	"strconv"

	"github.com/ordersync/ordersync/internal/procmem"
)

// defaultGCPercent is the garbage collector's target for `run` when the process's
// environment sets no GOGC: the live heap of the service is small, so collecting
// at half its size again rather than at its size again keeps the resident memory
// down for little CPU (docs/operations.md, "Memory").
const defaultGCPercent = 50

// gcPercentFor is the GOGC `run` applies: none (ok false) when the operator set
// GOGC, which the Go runtime has already honoured; defaultGCPercent otherwise (an
// empty GOGC is the runtime's unset).
func gcPercentFor(lookup func(string) (string, bool)) (percent int, ok bool) {
	if v, set := lookup("GOGC"); set && v != "" {
		return 0, false
	}
	return defaultGCPercent, true
}

// applyMemoryDefaults sets run's GOGC default unless the operator chose one, and
// returns what the process runs with, for the start-up log line. GOMEMLIMIT is the
// Go runtime's own (no limit unless set).
func applyMemoryDefaults() (gogc, memLimit string) {
	gogc = os.Getenv("GOGC")
	if p, ok := gcPercentFor(os.LookupEnv); ok {
		debug.SetGCPercent(p)
		gogc = strconv.Itoa(p) + " (default)"
	}
	memLimit = "none"
	if l := debug.SetMemoryLimit(-1); l != math.MaxInt64 {
		memLimit = strconv.FormatInt(l, 10)
	}
	return gogc, memLimit
}

// releaseStartUpPages gives the kernel back the executable's pages that only the
// start-up used, once every service runs (procmem): the resident memory of an idle
// service is then what it keeps using. A kernel that cannot is noted at debug level.
func releaseStartUpPages(log *slog.Logger) {
	r, err := procmem.ReleaseExecutablePages()
	if err != nil {
		log.Debug("kept the start-up's executable pages resident", "error", err)
		return
	}
	log.Info("released the start-up's executable pages", "resident_before_bytes", r.Before, "resident_after_bytes", r.After)
}
