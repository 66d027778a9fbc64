package migrations

import (
	"strings"
	"testing"
	"testing/fstest"
)

func TestPostgresLoads(t *testing.T) {
	t.Parallel()
	ms, err := Load(Postgres)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := ms[0].Version, 1; got != want {
		t.Fatalf("first version: got %d, want %d", got, want)
	}
	if got, want := ms[0].Name, "journal"; got != want {
		t.Fatalf("first name: got %q, want %q", got, want)
	}
	if !strings.Contains(ms[0].SQL, "CREATE TABLE operations") {
		t.Fatalf("0001_journal.sql does not create operations:\n%s", ms[0].SQL)
	}
}

func TestParseFileName(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		file    string
		version int
		name    string
		bad     bool
	}{
		{file: "0001_journal.sql", version: 1, name: "journal"},
		{file: "0012_outbox_lanes.sql", version: 12, name: "outbox_lanes"},
		{file: "0000_zero.sql", bad: true},
		{file: "journal.sql", bad: true},
		{file: "0001-journal.sql", bad: true},
		{file: "0001_Journal.sql", bad: true},
		{file: "0001_.sql", bad: true},
	} {
		v, name, err := ParseFileName(tc.file)
		if tc.bad {
			if err == nil {
				t.Fatalf("%s: got version %d, want an error", tc.file, v)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v", tc.file, err)
		}
		if v != tc.version || name != tc.name {
			t.Fatalf("%s: got %d %q, want %d %q", tc.file, v, name, tc.version, tc.name)
		}
	}
}

func TestLoad(t *testing.T) {
	t.Parallel()
	file := func(s string) *fstest.MapFile { return &fstest.MapFile{Data: []byte(s)} }
	for _, tc := range []struct {
		name    string
		fs      fstest.MapFS
		want    []int
		wantErr string
	}{
		{
			name: "sorted",
			fs:   fstest.MapFS{"0002_b.sql": file("b"), "0001_a.sql": file("a"), "0003_c.sql": file("c"), "README.md": file("x")},
			want: []int{1, 2, 3},
		},
		{name: "gap", fs: fstest.MapFS{"0001_a.sql": file("a"), "0003_c.sql": file("c")}, wantErr: "version 2 is missing"},
		{name: "no first", fs: fstest.MapFS{"0002_b.sql": file("b")}, wantErr: "version 1 is missing"},
		{name: "duplicate", fs: fstest.MapFS{"0001_a.sql": file("a"), "0001_b.sql": file("b")}, wantErr: "version 1 is used twice"},
		{name: "duplicate other width", fs: fstest.MapFS{"0001_a.sql": file("a"), "1_a.sql": file("b")}, wantErr: "used twice"},
		{name: "bad name", fs: fstest.MapFS{"0001_a.sql": file("a"), "second.sql": file("b")}, wantErr: "not named NNNN_name.sql"},
		{name: "empty", fs: fstest.MapFS{}, wantErr: "no NNNN_name.sql files"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ms, err := Load(tc.fs)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("got error %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got []int
			for _, m := range ms {
				got = append(got, m.Version)
			}
			if len(got) != len(tc.want) {
				t.Fatalf("got versions %v, want %v", got, tc.want)
			}
			for i := range got {
				if got[i] != tc.want[i] {
					t.Fatalf("got versions %v, want %v", got, tc.want)
				}
			}
			if ms[0].SQL != "a" {
				t.Fatalf("first SQL: got %q, want %q", ms[0].SQL, "a")
			}
		})
	}
}
