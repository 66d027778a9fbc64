package config

import (
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ordersync/ordersync/internal/bytesize"
)

// HTTP is the server that receives webhooks: POST /webhooks/<source>,
// /webhooks/ozon and /webhooks/bitrix24.
type HTTP struct {
	// Listen is host:port (an empty host: every interface; port 0: any free port,
	// for tests). Empty disables the server.
	Listen          string        `koanf:"listen"`
	ReadTimeout     time.Duration `koanf:"read_timeout"`     // of a whole request, body included
	WriteTimeout    time.Duration `koanf:"write_timeout"`    // from the end of the request to the end of the answer
	IdleTimeout     time.Duration `koanf:"idle_timeout"`     // of a kept-alive connection between requests
	ShutdownTimeout time.Duration `koanf:"shutdown_timeout"` // for requests in flight on stop
}

// Webhooks are the senders the HTTP server accepts and how it checks them.
type Webhooks struct {
	// MaxBody bounds a request body, in bytes (413 beyond); 1KiB to 64MiB.
	MaxBody int64 `koanf:"max_body"`
	// Tolerance is how far a Standard Webhooks timestamp may be from the clock,
	// either way.
	Tolerance time.Duration `koanf:"tolerance"`
	// Sources are the generic Standard Webhooks senders by name; each posts
	// canonical orders to /webhooks/<name>. Nil when none is configured. The names
	// ozon and bitrix24 are taken by their own endpoints.
	Sources  map[string]WebhookSource `koanf:"sources" name:"[a-z0-9_-]{1,32}"`
	Ozon     OzonWebhook              `koanf:"ozon"`
	Bitrix24 Bitrix24Webhook          `koanf:"bitrix24"`
}

// WebhookSource is a sender that signs with Standard Webhooks.
type WebhookSource struct {
	// Secrets verify the signatures (whsec_ and base64); a delivery signed with any
	// one of them is accepted, so that a secret can be rotated. At least one.
	Secrets []string `koanf:"secrets" secret:"true"`
	// OneC is the 1C mapping of the source's orders, as an account's.
	OneC OneCMapping `koanf:"onec"`
}

// OzonWebhook is Ozon's push (TYPE_PING, TYPE_NEW_POSTING, …). Ozon signs nothing:
// the sender is checked by its address. The postings it announces are fetched with
// the credentials of connectors.ozon, which need not be enabled for polling.
type OzonWebhook struct {
	Enabled bool `koanf:"enabled"`
	// AllowNetworks are the networks pushes may come from: CIDR prefixes, or
	// single addresses. At least one when enabled.
	AllowNetworks []string `koanf:"allow_networks"`
	// TrustedProxies are the networks of proxies in front of ordersync whose
	// X-Forwarded-For is believed. Empty: the connection's own address counts.
	TrustedProxies []string `koanf:"trusted_proxies"`
}

// Bitrix24Webhook is a Bitrix24 portal's outgoing webhook (ONCRMDEALADD,
// ONCRMDEALUPDATE). It carries only a deal id; the deal and its product rows are
// read through the portal's inbound REST webhook, RESTURL.
type Bitrix24Webhook struct {
	// Type is bitrix24 in a further portal's section (connectors.<name>); here it
	// may be left out.
	Type    string `koanf:"type"`
	Enabled bool   `koanf:"enabled"`
	// ApplicationToken is the token the portal sends as auth[application_token].
	ApplicationToken string `koanf:"application_token" secret:"true"`
	// RESTURL is the portal's inbound webhook, https://portal.bitrix24.kz/rest/1/<code>/;
	// a secret, since the code in it is the credential. Method names are appended.
	RESTURL string `koanf:"rest_url" secret:"true"`
	// CreateStages are the deal stages (STAGE_ID: WON, C1:WON, …) in which a deal
	// becomes an order.
	CreateStages []string `koanf:"create_stages"`
	Warehouse    string   `koanf:"warehouse"` // the 1C warehouse of these orders
	// SKUField is the product row field that holds the 1C SKU; empty leaves it to
	// the connector's default.
	SKUField      string        `koanf:"sku_field"`
	RatePerSecond int           `koanf:"rate_per_second"` // REST calls per second at most
	Timeout       time.Duration `koanf:"timeout"`         // of one REST call
	MaxResponse   int64         `koanf:"max_response"`    // bytes of one REST answer at most
	// OneC is the 1C mapping of the portal's orders, as an account's.
	OneC OneCMapping `koanf:"onec"`
}

// Limits of webhooks.max_body.
const (
	minMaxBody = 1 << 10
	maxMaxBody = 64 << 20
)

// reservedSources are the names under /webhooks/ that senders with their own
// sections have.
var reservedSources = []string{"ozon", "bitrix24"}

// connectorSources are the sources the marketplace connectors register orders under.
var connectorSources = []string{"kaspi", "ozon", "wb", "wildberries"}

// derive normalises empty lists: an empty list is no list, however it was written
// ([], or an empty variable).
func (w *Webhooks) derive() {
	for name, s := range w.Sources {
		if len(s.Secrets) == 0 {
			s.Secrets = nil
		}
		w.Sources[name] = s
	}
	if len(w.Ozon.AllowNetworks) == 0 {
		w.Ozon.AllowNetworks = nil
	}
	if len(w.Ozon.TrustedProxies) == 0 {
		w.Ozon.TrustedProxies = nil
	}
	if len(w.Bitrix24.CreateStages) == 0 {
		w.Bitrix24.CreateStages = nil
	}
}

func (h HTTP) validate(p *problems) {
	if h.Listen != "" {
		if msg := checkListen(h.Listen); msg != "" {
			p.add("http.listen", msg)
		}
	}
	for _, d := range []struct {
		key string
		d   time.Duration
	}{
		{"http.read_timeout", h.ReadTimeout},
		{"http.write_timeout", h.WriteTimeout},
		{"http.idle_timeout", h.IdleTimeout},
		{"http.shutdown_timeout", h.ShutdownTimeout},
	} {
		if d.d <= 0 {
			p.add(d.key, fmt.Sprintf("must be greater than 0, got %s", formatDuration(d.d)))
		}
	}
}

// checkListen says what is wrong with a listen address, or returns "".
func checkListen(s string) string {
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		return fmt.Sprintf("must be host:port such as 127.0.0.1:8080 or :8080 (every interface), or empty to disable the server, got %q", s)
	}
	n, err := strconv.Atoi(port)
	if err != nil || strings.ContainsAny(port, "+-") || n > 65535 {
		return fmt.Sprintf("must have a port from 0 to 65535 (0: any free port), got %q", s)
	}
	if host != "" {
		if _, err := netip.ParseAddr(host); err != nil && !isHostname(host) {
			return fmt.Sprintf("must have an IP address or a host name before the port, got %q", s)
		}
	}
	return ""
}

// isHostname reports whether s is a DNS name: dot-separated labels of letters,
// digits and hyphens, none starting or ending with a hyphen.
func isHostname(s string) bool {
	if len(s) > 253 {
		return false
	}
	for label := range strings.SplitSeq(strings.TrimSuffix(s, "."), ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return false
		}
		for _, r := range label {
			if !('a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9' || r == '-') {
				return false
			}
		}
	}
	return true
}

func (w Webhooks) validate(p *problems) {
	if w.MaxBody < minMaxBody || w.MaxBody > maxMaxBody {
		p.add("webhooks.max_body", fmt.Sprintf("must be between %s and %s, got %s",
			bytesize.Text(minMaxBody), bytesize.Text(maxMaxBody), bytesize.Text(w.MaxBody)))
	}
	if w.Tolerance <= 0 {
		p.add("webhooks.tolerance", fmt.Sprintf("must be greater than 0, got %s", formatDuration(w.Tolerance)))
	}
	names := make([]string, 0, len(w.Sources))
	for name := range w.Sources {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		w.Sources[name].validate(name, "webhooks.sources."+name, p)
	}
	w.Ozon.validate("webhooks.ozon", p)
	w.Bitrix24.validate("webhooks.bitrix24", p)
}

// validate checks one source; key is its own, webhooks.sources.site.
func (s WebhookSource) validate(name, key string, p *problems) {
	if slices.Contains(reservedSources, name) {
		p.add(key, fmt.Sprintf("the name %q is taken: POST /webhooks/%s is the endpoint of webhooks.%s; configure that section, or choose another name", name, name, name))
	}
	if slices.Contains(connectorSources, name) {
		p.add(key, fmt.Sprintf("the name %q is a marketplace connector's source: its orders' keys (%s:order:…) would mix with the connector's; choose another name", name, name))
	}
	s.OneC.validate(key+".onec", p)
	if len(s.Secrets) == 0 {
		p.add(key+".secrets", "must list at least one secret (whsec_…) the sender signs with; or set "+key+".secrets_file")
	}
	for i, secret := range s.Secrets {
		// Never echo the value, not even in part.
		if msg := checkWebhookSecret(secret); msg != "" {
			p.add(fmt.Sprintf("%s.secrets[%d]", key, i), msg)
		}
	}
}

// validate checks the address lists whether or not the push is enabled, so that
// AllowedPrefixes and TrustedProxyPrefixes never fail on a loaded configuration.
func (o OzonWebhook) validate(key string, p *problems) {
	checkPrefixes(key+".allow_networks", o.AllowNetworks, p)
	checkPrefixes(key+".trusted_proxies", o.TrustedProxies, p)
	if o.Enabled && len(o.AllowNetworks) == 0 {
		p.add(key+".allow_networks", "must list at least one network when "+key+".enabled is true (Ozon's: 195.34.21.0/24, 185.73.192.0/22, 91.223.93.0/24)")
	}
}

// AllowedPrefixes returns AllowNetworks parsed: a single address as a /32 or /128.
// Compare a remote address with it after netip.Addr.Unmap. Call it on a
// configuration from Load, which validated the list; it panics on one that is
// not valid.
func (o OzonWebhook) AllowedPrefixes() []netip.Prefix {
	return mustPrefixes("webhooks.ozon.allow_networks", o.AllowNetworks)
}

// TrustedProxyPrefixes returns TrustedProxies parsed, as AllowedPrefixes does;
// nil when none is trusted.
func (o OzonWebhook) TrustedProxyPrefixes() []netip.Prefix {
	return mustPrefixes("webhooks.ozon.trusted_proxies", o.TrustedProxies)
}

func mustPrefixes(key string, list []string) []netip.Prefix {
	if len(list) == 0 {
		return nil
	}
	out := make([]netip.Prefix, len(list))
	for i, s := range list {
		pf, msg := parsePrefix(s)
		if msg != "" {
			panic(fmt.Sprintf("config: %s[%d] used without validation: %s", key, i, msg))
		}
		out[i] = pf
	}
	return out
}

// checkPrefixes checks a list of networks: each parses, none twice.
func checkPrefixes(key string, list []string, p *problems) {
	seen := make([]netip.Prefix, 0, len(list))
	for i, s := range list {
		pf, msg := parsePrefix(s)
		switch {
		case msg != "":
			p.add(fmt.Sprintf("%s[%d]", key, i), msg)
		case slices.Contains(seen, pf):
			p.add(fmt.Sprintf("%s[%d]", key, i), fmt.Sprintf("%s is listed twice", pf))
		}
		seen = append(seen, pf)
	}
}

// parsePrefix reads a network: a CIDR prefix (195.34.21.0/24, 2001:db8::/32) or a
// single address (a /32 or a /128). A prefix with bits set after its length
// (195.34.21.7/24) is refused rather than guessed: it is the network or a typo for
// one address. It returns what is wrong, or "".
func parsePrefix(s string) (netip.Prefix, string) {
	const want = "must be a network such as 195.34.21.0/24 or 2001:db8::/32, or one address"
	var pf netip.Prefix
	if strings.Contains(s, "/") {
		var err error
		if pf, err = netip.ParsePrefix(s); err != nil {
			return netip.Prefix{}, fmt.Sprintf("%s, got %q", want, s)
		}
		if m := pf.Masked(); m != pf {
			return netip.Prefix{}, fmt.Sprintf("%s has bits set after the first %d: write %s for the network, or %s for the one address",
				s, pf.Bits(), m, netip.PrefixFrom(pf.Addr(), pf.Addr().BitLen()))
		}
	} else {
		a, err := netip.ParseAddr(s)
		if err != nil || a.Zone() != "" {
			return netip.Prefix{}, fmt.Sprintf("%s, got %q", want, s)
		}
		pf = netip.PrefixFrom(a, a.BitLen())
	}
	if pf.Addr().Is4In6() {
		// Remote addresses are compared unmapped; this would never match.
		return netip.Prefix{}, fmt.Sprintf("%s is an IPv4 network written as IPv6: write it as IPv4", s)
	}
	return pf, ""
}

func (b Bitrix24Webhook) validate(key string, p *problems) {
	if !b.Enabled {
		return
	}
	requireSecret(key, "application_token", b.ApplicationToken, p)
	if msg := checkRESTURL(b.RESTURL); msg != "" {
		p.add(key+".rest_url", msg)
	}
	checkNames(key+".create_stages", "deal stage", "WON", b.CreateStages, p)
	if strings.TrimSpace(b.Warehouse) == "" {
		p.add(key+".warehouse", "is required when "+key+".enabled is true: the 1C warehouse of these orders")
	}
	if hasControl(b.SKUField) {
		p.add(key+".sku_field", "must not contain line breaks or other control characters")
	}
	if b.RatePerSecond <= 0 {
		p.add(key+".rate_per_second", fmt.Sprintf("must be greater than 0, got %d", b.RatePerSecond))
	}
	if b.Timeout <= 0 {
		p.add(key+".timeout", fmt.Sprintf("must be greater than 0, got %s", formatDuration(b.Timeout)))
	}
	checkMaxResponse(key+".max_response", b.MaxResponse, defaultConnectorMaxResponse, "", p)
}

// checkRESTURL says what is wrong with a Bitrix24 inbound webhook URL, never
// showing it (the code in its path is the credential), or returns "".
func checkRESTURL(s string) string {
	const want = "must be the portal's inbound webhook, an absolute https:// URL such as https://portal.bitrix24.kz/rest/1/<code>/"
	if s == "" {
		return "is required when webhooks.bitrix24.enabled is true: the portal's inbound webhook, https://portal.bitrix24.kz/rest/1/<code>/ (or set webhooks.bitrix24.rest_url_file)"
	}
	u, err := url.Parse(s)
	switch {
	case err != nil || u.Host == "":
		return want
	case u.User != nil:
		return "must not contain a user name or password"
	case u.Scheme != "https" && !(u.Scheme == "http" && isLoopback(u.Hostname())):
		return want + " (http:// only for a loopback host, such as a simulator)"
	case u.RawQuery != "" || u.Fragment != "" || u.ForceQuery:
		return "must not have a query or fragment"
	case !strings.HasSuffix(u.Path, "/"):
		return "must end with / (the URL as Bitrix24 shows it, without a method such as crm.deal.get)"
	}
	return ""
}

func isLoopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	a, err := netip.ParseAddr(host)
	return err == nil && a.IsLoopback()
}

// checkWebhookNeeds reports what the webhook senders need from other sections: the
// HTTP server, and the Ozon credentials that fetch announced postings.
func (c *Config) checkWebhookNeeds(p *problems) {
	w := c.Webhooks
	var receivers []string
	for name := range w.Sources {
		receivers = append(receivers, "webhooks.sources."+name)
	}
	slices.Sort(receivers)
	if w.Ozon.Enabled {
		receivers = append(receivers, "webhooks.ozon")
	}
	if w.Bitrix24.Enabled {
		receivers = append(receivers, "webhooks.bitrix24")
	}
	if c.HTTP.Listen == "" && len(receivers) > 0 {
		p.add("http.listen", "is empty, which disables the HTTP server, but "+strings.Join(receivers, ", ")+
			" must receive webhooks; set http.listen, such as 127.0.0.1:8080, or remove them")
	}

	// An enabled connector checks its own credentials and client settings.
	if !w.Ozon.Enabled || c.Connectors.Ozon.Enabled {
		return
	}
	const key = "connectors.ozon"
	o := c.Connectors.Ozon
	if _, unread := c.Unread(key + ".api_key"); o.ClientID == "" || (o.APIKey == "" && !unread) {
		p.add("webhooks.ozon.enabled", "needs "+key+".client_id and "+key+".api_key to fetch the postings Ozon announces")
	}
	if hasControl(o.ClientID) {
		p.add(key+".client_id", "must not contain line breaks or other control characters")
	}
	if hasControl(o.APIKey) {
		p.add(key+".api_key", "must not contain line breaks or other control characters (a file with more than one line?)")
	}
	checkBaseURL(key+".base_url", o.BaseURL, "webhooks.ozon.enabled", p)
	if o.Timeout <= 0 {
		p.add(key+".timeout", fmt.Sprintf("must be greater than 0 (webhooks.ozon fetches postings with it), got %s", formatDuration(o.Timeout)))
	}
	if o.RatePerSecond <= 0 {
		p.add(key+".rate_per_second", fmt.Sprintf("must be greater than 0 (webhooks.ozon fetches postings with it), got %d", o.RatePerSecond))
	}
	checkMaxResponse(key+".max_response", o.MaxResponse, defaultConnectorMaxResponse, " (webhooks.ozon fetches postings with it)", p)
}
