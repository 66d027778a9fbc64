// Package migrations holds the numbered SQL migrations of each store, embedded in the
// binary, and the parser that orders them. A file is named NNNN_name.sql: 0001_journal.sql
// is version 1, name "journal". Versions start at 1 and leave no gaps; the store packages
// apply them (internal/store/postgres.DB.Migrate) and refuse to run on a schema that is
// behind.
package migrations

import (
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

//go:embed postgres/*.sql
var postgresFiles embed.FS

//go:embed sqlite/*.sql
var sqliteFiles embed.FS

// Postgres holds the PostgreSQL migrations at its root (0001_journal.sql, …).
var Postgres fs.FS = mustSub(postgresFiles, "postgres")

// SQLite holds the embedded SQLite store's migrations at its root. Its versions are
// its own: they need not match PostgreSQL's.
var SQLite fs.FS = mustSub(sqliteFiles, "sqlite")

func mustSub(fsys fs.FS, dir string) fs.FS {
	sub, err := fs.Sub(fsys, dir)
	if err != nil {
		panic("migrations: " + err.Error()) // dir is a literal embedded above
	}
	return sub
}

// Migration is one numbered SQL file.
type Migration struct {
	Version int    // 1 for 0001_journal.sql
	Name    string // "journal"
	File    string // "0001_journal.sql"
	SQL     string
}

var fileRe = regexp.MustCompile(`^([0-9]+)_([a-z0-9_]+)\.sql$`)

// ParseFileName splits a migration file name into its version and name:
// "0001_journal.sql" → 1, "journal".
func ParseFileName(file string) (version int, name string, err error) {
	m := fileRe.FindStringSubmatch(file)
	if m == nil {
		return 0, "", fmt.Errorf("migrations: %q is not named NNNN_name.sql (digits, underscore, lower-case name)", file)
	}
	v, err := strconv.Atoi(m[1])
	if err != nil || v < 1 {
		return 0, "", fmt.Errorf("migrations: %q: version must be a number from 1", file)
	}
	return v, m[2], nil
}

// Load reads the *.sql files at the root of fsys and returns them sorted by version.
// It refuses a badly named .sql file, two files with one version, a gap in the
// numbering (versions must run 1, 2, 3, …) and an empty set. Other files are ignored.
func Load(fsys fs.FS) ([]Migration, error) {
	entries, err := fs.ReadDir(fsys, ".")
	if err != nil {
		return nil, fmt.Errorf("migrations: %w", err)
	}
	var ms []Migration
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".sql") {
			continue
		}
		v, name, err := ParseFileName(e.Name())
		if err != nil {
			return nil, err
		}
		b, err := fs.ReadFile(fsys, e.Name())
		if err != nil {
			return nil, fmt.Errorf("migrations: %w", err)
		}
		ms = append(ms, Migration{Version: v, Name: name, File: e.Name(), SQL: string(b)})
	}
	if len(ms) == 0 {
		return nil, errors.New("migrations: no NNNN_name.sql files found")
	}
	sort.Slice(ms, func(i, j int) bool {
		if ms[i].Version != ms[j].Version {
			return ms[i].Version < ms[j].Version
		}
		return ms[i].File < ms[j].File
	})
	for i, m := range ms {
		if i > 0 && m.Version == ms[i-1].Version {
			return nil, fmt.Errorf("migrations: version %d is used twice: %s and %s", m.Version, ms[i-1].File, m.File)
		}
		if want := i + 1; m.Version != want {
			after := "the start"
			if i > 0 {
				after = ms[i-1].File
			}
			return nil, fmt.Errorf("migrations: version %d is missing (after %s comes %s)", want, after, m.File)
		}
	}
	return ms, nil
}
