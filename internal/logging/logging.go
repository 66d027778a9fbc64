// Package logging builds the program's slog.Logger: JSON by default, text for a person
// at a terminal. Secrets are kept out by the callers, who never pass them as
// attributes; see also Redact for values that may embed one (database URLs).
package logging

import (
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"os"
	"strings"

	"github.com/mattn/go-isatty"
)

// New returns a logger writing to w at level ("debug", "info", "warn", "error") in
// format "json", "text", or "auto" (text when w is a terminal, JSON otherwise).
func New(w io.Writer, level, format string) (*slog.Logger, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(cmpOr(level, "info"))); err != nil {
		return nil, fmt.Errorf("log.level: %w", err)
	}
	opts := &slog.HandlerOptions{Level: lv}
	switch cmpOr(format, "auto") {
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "auto":
		if f, ok := w.(*os.File); ok && (isatty.IsTerminal(f.Fd()) || isatty.IsCygwinTerminal(f.Fd())) {
			return slog.New(slog.NewTextHandler(w, opts)), nil
		}
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	default:
		return nil, fmt.Errorf("log.format: must be json, text or auto, got %q", format)
	}
}

// Discard is a logger that writes nothing, for tests and quiet commands.
func Discard() *slog.Logger { return slog.New(slog.DiscardHandler) }

// Redact returns a URL with its password replaced by ***, for logs and messages.
// A string that does not parse as a URL is returned as "(unparsable URL)" rather
// than risk printing a secret.
func Redact(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(unparsable URL)"
	}
	if u.User != nil {
		if _, has := u.User.Password(); has {
			u.User = url.UserPassword(u.User.Username(), "***")
		}
	}
	q := u.Query()
	for k := range q {
		if strings.EqualFold(k, "password") {
			q.Set(k, "***")
			u.RawQuery = q.Encode()
		}
	}
	return strings.Replace(u.String(), "%2A%2A%2A", "***", -1)
}

func cmpOr(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// OneLine is err's message on one line: its lines trimmed and joined with "; ", so
// that a multi-line error (a 1C exception's text, a YAML problem list) stays one line
// on stderr and in systemd's status.
func OneLine(err error) string {
	lines := strings.Split(strings.TrimSpace(err.Error()), "\n")
	for i := range lines {
		lines[i] = strings.TrimSpace(lines[i])
	}
	return strings.Join(lines, "; ")
}
