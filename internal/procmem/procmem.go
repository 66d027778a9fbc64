// Package procmem hands back to the kernel the executable's pages that only the
// start-up used.
//
// A Go service's binary is mapped, not loaded: each page of code or read-only data
// the process touches is faulted in, and the kernel maps its neighbours with it. The
// start-up (package initialisation, configuration, migrations, the first requests)
// touches most of the binary once, and those pages stay in the process's resident
// set for as long as it runs, clean and unused. ReleaseExecutablePages asks the
// kernel to reclaim them: what the service goes on running faults back in, the rest
// stops counting.
package procmem

// Released is what one ReleaseExecutablePages did: the executable's resident pages
// (RssFile in /proc/self/status, in bytes) before and after, and how many mappings
// it asked the kernel to reclaim.
type Released struct {
	Before, After int64
	Mappings      int
}
