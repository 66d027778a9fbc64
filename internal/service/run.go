package service

// Named is a service with the name StartError gives for it.
type Named struct {
	Name string
	Service
}

// Run is what `ordersync run` starts once the admin listener is up (it is added
// first, and stops last: /metrics and /readyz answer while the work in flight
// drains), and before the systemd supervision (added last, once READY=1 is sent:
// it stops first). A nil field is a part that is off.
type Run struct {
	Pages      Service // ui.listen
	StockRelay Service
	Relay      Service
	Engine     Service
	Scheduler  Service // the stock schedules
	Pollers    []Named
	Webhooks   Service // http.listen
	Ping       Service // 1C's start-up ping
}

// Add adds the parts to g in the order they start. They stop in the reverse one,
// which is the order that matters:
//
//   - 1C's start-up ping, which goes through the engine;
//   - the webhook server: no new webhooks;
//   - the pollers: no new polls (the last started first);
//   - the stock scheduler: no new snapshots;
//   - the engine: the calls in flight finish and record their verdicts;
//   - the relays, after the engine's last verdicts: the order events, then the
//     stock publishes;
//   - the journal pages.
func (r Run) Add(g *Group) {
	add := func(name string, s Service) {
		if s != nil {
			g.Add(name, s)
		}
	}
	add("ui.listen", r.Pages)
	add("stock relay", r.StockRelay)
	add("relay", r.Relay)
	add("engine", r.Engine)
	add("stock scheduler", r.Scheduler)
	for _, p := range r.Pollers {
		add(p.Name, p.Service)
	}
	add("http.listen", r.Webhooks)
	add("1C ping", r.Ping)
}
