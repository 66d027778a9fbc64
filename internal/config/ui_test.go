package config

import (
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"
)

func TestUIPages(t *testing.T) {
	t.Parallel()
	cfg := mustLoadYAML(t, "onec:\n  timezone: Europe/Moscow\n")
	if cfg.UI.Listen != "" || cfg.UI.Lang != "ru" || cfg.UI.SessionTTL != 12*time.Hour || cfg.UI.Users != nil {
		t.Fatalf("defaults: %+v", cfg.UI)
	}
	if got := cfg.UILocation().String(); got != "Europe/Moscow" {
		t.Fatalf("ui.timezone empty: location %s, want onec.timezone's Europe/Moscow", got)
	}
	hash, err := bcrypt.GenerateFromPassword([]byte("pw"), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	users := "  users:\n    - name: anna\n      password_hash: '" + string(hash) + "'\n      role: operator\n"
	cfg = mustLoadYAML(t, "ui:\n  listen: 0.0.0.0:8443\n  lang: en\n  timezone: Asia/Almaty\n"+users)
	if cfg.UI.Lang != "en" || cfg.UILocation().String() != "Asia/Almaty" || len(cfg.UI.Users) != 1 ||
		cfg.UI.Users[0].Role != RoleOperator || !cfg.UI.CookieSecure() {
		t.Fatalf("from the file: %+v (secure cookie %v)", cfg.UI, cfg.UI.CookieSecure())
	}
	cfg = mustLoadYAML(t, "", "ORDERSYNC_UI__LISTEN=127.0.0.1:8443",
		`ORDERSYNC_UI__USERS=[{"name":"b","password_hash":"`+string(hash)+`","role":"viewer"}]`)
	if cfg.UI.Listen != "127.0.0.1:8443" || len(cfg.UI.Users) != 1 || cfg.UI.Users[0].Name != "b" || cfg.UI.CookieSecure() {
		t.Fatalf("from the environment: %+v", cfg.UI)
	}
	if cfg := mustLoadYAML(t, "ui:\n  onec_web_url: https://1c.local/trade\n"); cfg.UI.OneCWebURL != "https://1c.local/trade" {
		t.Fatalf("ui.onec_web_url: %q", cfg.UI.OneCWebURL)
	}
	// Loopback without users is allowed: only this machine reaches it.
	for _, ok := range []string{"ui:\n  listen: 127.0.0.1:8443\n", "ui:\n  listen: '[::1]:8443'\n", "ui:\n  listen: localhost:8443\n"} {
		if _, err := loadYAML(t, ok); err != nil {
			t.Errorf("%q: %v", ok, err)
		}
	}
	for _, tc := range []struct{ src, key, msg string }{
		{"ui:\n  listen: 0.0.0.0:8443\n", "ui.listen", "need users"},
		{"ui:\n  listen: :8443\n", "ui.listen", "need users"},
		{"ui:\n  listen: 10.0.0.5:8443\n", "ui.listen", "need users"},
		{"ui:\n  listen: 127.0.0.1:8080\n", "ui.listen", "must differ from http.listen"},
		{"ui:\n  listen: 127.0.0.1:9090\n", "ui.listen", "must differ from admin.listen"},
		{"ui:\n  listen: nonsense\n", "ui.listen", "must be host:port"},
		{"ui:\n  lang: kk\n", "ui.lang", "must be ru or en"},
		{"ui:\n  timezone: Mars/Olympus\n", "ui.timezone", "unknown time zone"},
		{"ui:\n  session_ttl: 0s\n", "ui.session_ttl", "greater than 0"},
		{"ui:\n  secure_cookie: maybe\n", "ui.secure_cookie", "auto, true or false"},
		{"ui:\n  onec_web_url: ftp://1c.local/trade\n", "ui.onec_web_url", "http(s) URL"},
		{"ui:\n  onec_web_url: 1c.local/trade\n", "ui.onec_web_url", "http(s) URL"},
		{"ui:\n  onec_web_url: 'http://1c.local/trade#e1cib'\n", "ui.onec_web_url", "without a query or #"},
		{"ui:\n  users:\n    - name: a\n      password_hash: plain\n      role: viewer\n", "ui.users[0].password_hash", "bcrypt"},
		{"ui:\n  users:\n    - name: a\n      password_hash: '" + string(hash) + "'\n      role: admin\n", "ui.users[0].role", "viewer or operator"},
		{"ui:\n  users:\n    - name: ''\n      password_hash: '" + string(hash) + "'\n      role: viewer\n", "ui.users[0].name", "must not be empty"},
		{"ui:\n" + users + "    - name: anna\n      password_hash: '" + string(hash) + "'\n      role: viewer\n", "ui.users[1].name", "listed twice"},
	} {
		_, err := loadYAML(t, tc.src)
		wantProblem(t, err, tc.key, tc.msg)
	}
}
