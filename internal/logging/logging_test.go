package logging

import (
	"bytes"
	"strings"
	"testing"
)

func TestRedactHidesPasswords(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ in, want string }{
		{"postgres://ordersync:s3cret@db:5432/os", "postgres://ordersync:***@db:5432/os"},
		{"postgres://db:5432/os?password=s3cret&sslmode=disable", "postgres://db:5432/os?password=***&sslmode=disable"},
		{"postgres://ordersync@db/os", "postgres://ordersync@db/os"},
	} {
		got := Redact(tc.in)
		if got != tc.want {
			t.Errorf("Redact(%q) = %q, want %q", tc.in, got, tc.want)
		}
		if strings.Contains(got, "s3cret") {
			t.Errorf("Redact(%q) leaks the password: %q", tc.in, got)
		}
	}
}

func TestNewFormats(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	l, err := New(&buf, "info", "auto") // a buffer is not a terminal: JSON
	if err != nil {
		t.Fatal(err)
	}
	l.Info("hello", "key", "kaspi:order:1:create")
	if !strings.HasPrefix(buf.String(), "{") {
		t.Fatalf("auto format on a non-terminal = %q, want JSON", buf.String())
	}
	if _, err := New(&buf, "loud", "json"); err == nil || !strings.Contains(err.Error(), "log.level") {
		t.Fatalf("bad level error = %v, want one naming log.level", err)
	}
	if _, err := New(&buf, "info", "xml"); err == nil || !strings.Contains(err.Error(), "log.format") {
		t.Fatalf("bad format error = %v, want one naming log.format", err)
	}
}
