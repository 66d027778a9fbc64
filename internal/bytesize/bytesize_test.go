package bytesize

import (
	"math"
	"testing"
)

func TestParse(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in   string
		want int64
	}{
		{"0", 0},
		{"1048576", 1 << 20},
		{"1048576B", 1 << 20},
		{"512KiB", 512 << 10},
		{"1MiB", 1 << 20},
		{"64MiB", 64 << 20},
		{"1GiB", 1 << 30},
		{"500kB", 500_000},
		{"500KB", 500_000},
		{"2MB", 2_000_000},
		{"1GB", 1_000_000_000},
		{"1mib", 1 << 20},
		{"2mb", 2_000_000},
		{"1 MiB", 1 << 20},
		{" 2MiB ", 2 << 20},
		{"9223372036854775807", math.MaxInt64},
	} {
		got, ok := Parse(tc.in)
		if !ok || got != tc.want {
			t.Errorf("Parse(%q) = %d, %v; want %d, true", tc.in, got, ok, tc.want)
		}
	}
	for _, in := range []string{
		"", "MiB", "1.5MiB", "-1", "-1MiB", "1 M", "1Mi", "1MiBs", "1 000", "1_000", "0x100",
		"1e6", "+5", "9223372036854775808", "8589934592GiB", "1MiB1",
	} {
		if got, ok := Parse(in); ok {
			t.Errorf("Parse(%q) = %d, true; want false", in, got)
		}
	}
}

func TestText(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in   int64
		want string
	}{
		{0, "0"},
		{1, "1"},
		{1500, "1500"},
		{1000, "1kB"},
		{1024, "1KiB"},
		{512 << 10, "512KiB"},
		{1 << 20, "1MiB"},
		{2_000_000, "2MB"},
		{1536 << 10, "1536KiB"},
		{64 << 20, "64MiB"},
		{3 << 30, "3GiB"},
		{1_000_000_000, "1GB"},
		// A multiple of both 1024 and 1000 takes the binary unit.
		{128_000, "125KiB"},
	} {
		got := Text(tc.in)
		if got != tc.want {
			t.Errorf("Text(%d) = %q, want %q", tc.in, got, tc.want)
		}
		if back, ok := Parse(got); !ok || back != tc.in {
			t.Errorf("Parse(Text(%d) = %q) = %d, %v", tc.in, got, back, ok)
		}
	}
}

func TestFormat(t *testing.T) {
	t.Parallel()
	for in, want := range map[int64]string{0: "0 bytes", 1500: "1500 bytes", 2_000_000: "2000000 bytes",
		1024: "1KiB", 16 << 20: "16MiB", 64 << 20: "64MiB", 3 << 30: "3GiB", 1536 << 10: "1536KiB"} {
		if got := Format(in); got != want {
			t.Errorf("Format(%d) = %q, want %q", in, got, want)
		}
	}
}
