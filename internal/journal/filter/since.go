package filter

import (
	"fmt"
	"time"
)

// ParseSince reads --since: it accepts a duration back from now, a date (in loc), or an RFC 3339 time.
func ParseSince(s string, now time.Time, loc *time.Location) (time.Time, error) {
	if d, err := time.ParseDuration(s); err == nil {
		return now.Add(-d), nil
	}
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return t, nil
	}
	if t, err := time.ParseInLocation("2006-01-02", s, loc); err == nil {
		return t, nil
	}
	return time.Time{}, fmt.Errorf("--since: %q is neither a duration (24h), a date (2026-09-16) nor an RFC 3339 time", s)
}
