package config

import (
	"fmt"
	"net"
)

// Admin is the admin listener of `ordersync run`: /metrics, /healthz, /readyz and,
// when asked for, /debug/pprof/. It is for the operator's network only, apart from
// http.listen, which a reverse proxy exposes to the senders.
type Admin struct {
	// Listen is host:port; empty disables the listener.
	Listen string `koanf:"listen"`
	// PProf serves Go's profiles under /debug/pprof/.
	PProf bool `koanf:"pprof"`
}

func (a Admin) validate(h HTTP, p *problems) {
	if a.Listen == "" {
		return
	}
	if msg := checkListen(a.Listen); msg != "" {
		p.add("admin.listen", msg)
		return
	}
	if h.Listen != "" && checkListen(h.Listen) == "" && sameAddress(a.Listen, h.Listen) {
		p.add("admin.listen", fmt.Sprintf("must differ from http.listen (%s): the admin listener is not for the senders; "+
			"use another port, such as 127.0.0.1:9090, or empty to disable it", h.Listen))
	}
}

// sameAddress reports whether two valid listen addresses would bind the same port
// (port 0 picks a free one, never the same).
func sameAddress(a, b string) bool {
	ha, pa, _ := net.SplitHostPort(a)
	hb, pb, _ := net.SplitHostPort(b)
	if pa != pb || pa == "0" {
		return false
	}
	return ha == hb || ha == "" || hb == ""
}
