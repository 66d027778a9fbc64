package store

import (
	"context"
	"errors"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ordersync/ordersync/internal/config"
	"github.com/ordersync/ordersync/internal/store/postgres"
	"github.com/ordersync/ordersync/internal/store/sqlite"
)

// With no database.url the embedded file is looked for, created only when Create
// allows it, and named to Found once it exists.
func TestOpenFindsOrCreatesTheEmbeddedFile(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	t.Chdir(t.TempDir())
	env := func(k string) string {
		if k == "STATE_DIRECTORY" {
			return dir
		}
		return ""
	}
	var found []sqlite.Place
	cfg := Config{Getenv: env, ServiceDir: filepath.Join(t.TempDir(), "service"), Found: func(p sqlite.Place) { found = append(found, p) }}

	db, err := Open(ctx, cfg)
	var nf *sqlite.NotFoundError
	if db != nil || !errors.As(err, &nf) {
		t.Fatalf("no file, no Create: got %v, %v; want a *sqlite.NotFoundError and no DB", db, err)
	}

	cfg.Create = true
	db, err = Open(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	want := filepath.Join(dir, sqlite.FileName)
	if s, ok := db.(*sqlite.DB); !ok || s.Path() != want {
		t.Fatalf("created %T %v, want the *sqlite.DB %s", db, db, want)
	}
	db.Close()
	if len(found) != 0 {
		t.Fatalf("a file created was told to Found: %v", found)
	}

	cfg.Create = false
	db, err = Open(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	db.Close()
	if len(found) != 1 || found[0].Path != want {
		t.Fatalf("found %v, want %s", found, want)
	}
}

func TestOpenConfiguredSQLiteFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "journal.db")
	db, err := Open(context.Background(), Config{Database: config.Database{URL: "sqlite://" + path}})
	if db != nil || !errors.Is(err, fs.ErrNotExist) || !strings.HasPrefix(err.Error(), "database.url: ") ||
		!strings.HasSuffix(err.Error(), "; `ordersync migrate` (or `ordersync run`) creates it") {
		t.Fatalf("a configured file that does not exist: got %v, %v", db, err)
	}
	db, err = Open(context.Background(), Config{Database: config.Database{URL: "sqlite://" + path}, Create: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if db.String() != path {
		t.Fatalf("opened %s, want %s", db, path)
	}
}

func TestOpenPostgresNamesTheSetting(t *testing.T) {
	db, err := Open(context.Background(), Config{Database: config.Database{URL: "postgres://u:secret@127.0.0.1:1/db?connect_timeout=1"}})
	var ce *postgres.ConnectError
	if db != nil || !errors.As(err, &ce) || !strings.HasPrefix(err.Error(), "database.url: ") || strings.Contains(err.Error(), "secret") {
		t.Fatalf("a server that does not answer: got %v, %v", db, err)
	}
}
