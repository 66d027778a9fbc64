package procmem

import "testing"

func TestReleaseExecutablePagesShrinksTheResidentExecutable(t *testing.T) {
	r, err := ReleaseExecutablePages()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%+v", r)
	if r.Mappings == 0 {
		t.Fatal("found no read-only mapping of the executable in /proc/self/maps")
	}
	// The test binary's start-up touched far more of it than the few pages the call
	// and this check fault back in.
	if r.Before <= 0 || r.After >= r.Before/2 {
		t.Fatalf("RssFile %d bytes before and %d after: want it at most halved", r.Before, r.After)
	}
}

func TestExecutableMappingsAreTheExecutablesReadOnlyOnes(t *testing.T) {
	maps := []byte(`00400000-01423000 r-xp 00000000 fe:01 4242 /usr/bin/ordersync
01423000-02427000 r--p 01023000 fe:01 4242 /usr/bin/ordersync
02427000-0259e000 rw-p 02027000 fe:01 4242 /usr/bin/ordersync
0259e000-045ec000 rw-p 00000000 00:00 0
7f1743650000-7f1743730000 r--p 00000000 fe:01 77 /var/lib/ordersync/ordersync.db-shm
`)
	got := executableMappings(maps, 4242)
	want := []mapping{{0x400000, 0x1423000}, {0x1423000, 0x2427000}}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("mappings %#v, want %#v", got, want)
	}
}
