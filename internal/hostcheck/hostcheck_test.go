package hostcheck

import (
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
)

func TestAllowed(t *testing.T) {
	lo := &net.TCPAddr{IP: net.ParseIP("127.0.0.1"), Port: 8443}
	lan := &net.TCPAddr{IP: net.ParseIP("10.0.0.5"), Port: 8443}
	for _, tc := range []struct {
		host  string
		local net.Addr
		names []string
		want  bool
	}{
		{"127.0.0.1:8443", lo, nil, true},
		{"localhost:8443", lo, nil, true},
		{"[::1]:8443", lo, nil, true},
		{"rebind.attacker.example", lo, nil, false},
		{"rebind.attacker.example:8443", lo, nil, false},
		{"10.0.0.5:8443", lo, nil, false},
		{"journal.shop.kz", lo, []string{"journal.shop.kz"}, true},
		{"JOURNAL.shop.kz.", lo, []string{"journal.shop.kz"}, true},
		{"10.0.0.5:8443", lan, nil, true},
		{"journal.shop.kz", lan, nil, true}, // no names: a proxy's name cannot be known
		{"rebind.attacker.example", lan, []string{"journal.shop.kz"}, false},
		{"localhost", lan, []string{"journal.shop.kz"}, false},
	} {
		if got := Allowed(tc.host, tc.local, tc.names); got != tc.want {
			t.Errorf("Allowed(%q, %v, %v) = %v, want %v", tc.host, tc.local, tc.names, got, tc.want)
		}
	}
}

// A foreign Host on a loopback listener gets 403, its own is served.
func TestGuard(t *testing.T) {
	srv := httptest.NewServer(Guard(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("ok")) }), nil, "test", nil))
	defer srv.Close()
	for host, want := range map[string]int{"": 200, "rebind.attacker.example": 403} {
		req, _ := http.NewRequest(http.MethodGet, srv.URL, nil)
		if host != "" {
			req.Host = host
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("Host %q: %d, want %d", host, resp.StatusCode, want)
		}
	}
}
