package ui

import (
	"testing"
	"time"
)

func TestFormatDuration(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		d    time.Duration
		lang string
		want string
	}{
		{28*time.Millisecond + 400*time.Microsecond, "ru", "28\u00a0мс"},
		{1500 * time.Millisecond, "ru", "1,5\u00a0с"},
		{2 * time.Second, "ru", "2\u00a0с"},
		{59960 * time.Millisecond, "ru", "60\u00a0с"},
		{125 * time.Second, "ru", "2\u00a0мин 5\u00a0с"},
		{28 * time.Millisecond, "en", "28ms"},
	} {
		if got := formatDuration(tc.d, tc.lang); got != tc.want {
			t.Errorf("formatDuration(%s, %s) = %q, want %q", tc.d, tc.lang, got, tc.want)
		}
	}
}
