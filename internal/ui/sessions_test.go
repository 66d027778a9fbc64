package ui

import (
	"context"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/ordersync/ordersync/internal/store/postgres"
	"github.com/ordersync/ordersync/internal/store/sqlite"
	"github.com/ordersync/ordersync/internal/testdb"
	"github.com/ordersync/ordersync/internal/ui/session"
)

// replicas are two servers' stores on one database, as two replicas of the service
// behind a load balancer have them.
type replicas struct {
	stores   [2]stores
	sessions [2]session.Store
	// rows are the ui_sessions rows, each column as text.
	rows func(t *testing.T) [][]string
}

// openReplicas opens one fresh database of the backend for two servers: SQLite
// through one handle (one process works an embedded file), PostgreSQL through two
// pools on one schema.
func openReplicas(t *testing.T, backend string) replicas {
	t.Helper()
	ctx := context.Background()
	var r replicas
	switch backend {
	case "sqlite":
		db, err := sqlite.Open(ctx, sqlite.Config{Path: filepath.Join(t.TempDir(), "journal.db")})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		if _, err := db.Migrate(ctx); err != nil {
			t.Fatal(err)
		}
		for i := range r.stores {
			r.stores[i], r.sessions[i] = stores{db.Journal(), db.Outbox(), db.Inbox()}, db.Sessions()
		}
		r.rows = func(t *testing.T) [][]string { return sqliteRows(t, db) }
	case "postgres":
		u := testdb.URL(t)
		for i := range r.stores {
			db, err := postgres.Open(ctx, postgres.Config{URL: u})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(db.Close)
			if _, err := db.Migrate(ctx); err != nil {
				t.Fatal(err)
			}
			r.stores[i], r.sessions[i] = stores{db.Journal(), db.Outbox(), db.Inbox()}, db.Sessions()
			r.rows = func(t *testing.T) [][]string { return postgresRows(t, db) }
		}
	default:
		t.Fatalf("unknown backend %s", backend)
	}
	return r
}

// site is the server of replica i, with users.
func (r replicas) site(t *testing.T, i int, users ...User) *site {
	t.Helper()
	return newSite(t, r.stores[i], func(c *Config) { c.Users = users; c.Sessions = r.sessions[i] })
}

// on is the same person (the same cookie jar) reaching another replica, as a load
// balancer sends one browser's requests to either.
func (b *browser) on(s *site) *browser { return &browser{t: b.t, site: s, c: b.c} }

// eachBackend runs fn on SQLite and on PostgreSQL, in parallel.
func eachBackend(t *testing.T, fn func(t *testing.T, backend string)) {
	t.Helper()
	for _, backend := range []string{"sqlite", "postgres"} {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			fn(t, backend)
		})
	}
}

func wantSignedIn(t *testing.T, b *browser, user string) answer {
	t.Helper()
	a := b.get("/ui/journal")
	if a.status != http.StatusOK || attr(byTag(a.doc, "body"), "data-user") != user {
		t.Fatalf("%s: GET /ui/journal: %d (to %q), user %q; want 200 for %s", b.site.url, a.status,
			a.header.Get("Location"), attr(byTag(a.doc, "body"), "data-user"), user)
	}
	return a
}

func wantSignedOut(t *testing.T, b *browser) {
	t.Helper()
	a := b.get("/ui/journal")
	if a.status != http.StatusSeeOther || a.header.Get("Location") != "/ui/signin?next="+url.QueryEscape("/ui/journal") {
		t.Fatalf("%s: GET /ui/journal: %d to %q; want a redirect to sign in", b.site.url, a.status, a.header.Get("Location"))
	}
}

// A sign-in on one replica holds on the other, and a sign-out on either ends it on
// both.
func TestSessionsAreSharedByReplicas(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, backend string) {
		r := openReplicas(t, backend)
		anna := testUser(t, "anna", RoleOperator)
		one, two := r.site(t, 0, anna), r.site(t, 1, anna)

		b := one.browser()
		b.mustSignIn("anna")
		wantSignedIn(t, b, "anna")
		a := wantSignedIn(t, b.on(two), "anna")

		// One row, for anna, under the token's hash; the token nowhere.
		token := sessionToken(t, b)
		rows := r.rows(t)
		if len(rows) != 1 {
			t.Fatalf("ui_sessions after one sign-in: sessions of %q, want anna's", rowUsers(rows))
		}
		h := session.HashToken(token)
		if row := rows[0]; !strings.Contains(row[0], hex.EncodeToString(h[:])) || row[1] != "anna" || row[2] != RoleOperator {
			t.Fatalf("ui_sessions row %q: want anna, operator, under the token's SHA-256", row)
		}
		for _, col := range rows[0] {
			if strings.Contains(col, token) {
				t.Fatalf("ui_sessions holds the session's token in clear: %q", rows[0])
			}
		}

		// The second replica takes the session's csrf token, and signs out.
		csrf := formValue(t, a.doc, "signout", "csrf")
		if a := b.on(two).post("/ui/signout", url.Values{"csrf": {csrf}}); a.status != http.StatusSeeOther {
			t.Fatalf("sign-out on the second replica: %d\n%s", a.status, a.body)
		}
		wantSignedOut(t, b.on(two))
		wantSignedOut(t, b)
		if got := rowUsers(r.rows(t)); len(got) != 0 {
			t.Fatalf("ui_sessions after the sign-out: sessions of %q, want none", got)
		}
	})
}

const sessionColumns = `token_hash, user_name, role, credential, csrf, created_at, last_seen_at, expires_at`

func sqliteRows(t *testing.T, db *sqlite.DB) [][]string {
	t.Helper()
	rows, err := db.SQL().QueryContext(t.Context(), `SELECT `+sessionColumns+` FROM ui_sessions`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out [][]string
	for rows.Next() {
		vals := make([]any, 8)
		ptrs := make([]any, len(vals))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			t.Fatal(err)
		}
		out = append(out, asText(vals))
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func postgresRows(t *testing.T, db *postgres.DB) [][]string {
	t.Helper()
	rows, err := db.Pool().Query(t.Context(), `SELECT `+sessionColumns+` FROM ui_sessions`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out [][]string
	for rows.Next() {
		vals, err := rows.Values()
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, asText(vals))
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// asText is each column as text; bytes also as hex and base64, the forms a token
// could be written in.
func asText(vals []any) []string {
	out := make([]string, len(vals))
	for i, v := range vals {
		if b, ok := v.([]byte); ok {
			out[i] = string(b) + " " + hex.EncodeToString(b) + " " + base64.RawURLEncoding.EncodeToString(b)
			continue
		}
		out[i] = fmt.Sprint(v)
	}
	return out
}

// rowUsers are the rows' users, sorted.
func rowUsers(rows [][]string) []string {
	var users []string
	for _, row := range rows {
		users = append(users, row[1])
	}
	slices.Sort(users)
	return users
}

// sessionToken is the session cookie the browser holds for s.
func sessionToken(t *testing.T, b *browser) string {
	t.Helper()
	u, _ := url.Parse(b.site.url + "/ui/journal")
	for _, c := range b.c.Jar.Cookies(u) {
		if c.Name == sessionCookie {
			return c.Value
		}
	}
	t.Fatal("the browser holds no session cookie")
	return ""
}

// A session stands for the ui.users entry it signed in as: a replica (or a restart)
// whose configuration no longer has that entry, gives it another role or another
// password, ends it, on every replica.
func TestSessionEndsWhenItsUserChanges(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		users func(anna User) []User
	}{
		{"removed", func(User) []User { return []User{testUser(t, "boris", RoleOperator)} }},
		{"role", func(anna User) []User { anna.Role = RoleViewer; return []User{anna} }},
		{"password", func(anna User) []User {
			h, err := bcrypt.GenerateFromPassword([]byte("another password"), bcrypt.MinCost)
			if err != nil {
				t.Fatal(err)
			}
			anna.PasswordHash = string(h)
			return []User{anna}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			eachBackend(t, func(t *testing.T, backend string) {
				r := openReplicas(t, backend)
				anna := testUser(t, "anna", RoleOperator)
				one, two := r.site(t, 0, anna), r.site(t, 1, tc.users(anna)...)
				b := one.browser()
				b.mustSignIn("anna")
				wantSignedIn(t, b, "anna")
				wantSignedOut(t, b.on(two))
				if got := rowUsers(r.rows(t)); len(got) != 0 {
					t.Fatalf("ui_sessions after the user changed: sessions of %q, want none", got)
				}
				wantSignedOut(t, b)
			})
		})
	}
}

// testClock is a clock the test moves and the servers read.
type testClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *testClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *testClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// A use moves the expiry ahead, on the database, not at every request; expired
// sessions are deleted when read and at a sign-in.
func TestSessionSlidesAndIsSwept(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, backend string) {
		r := openReplicas(t, backend)
		clock := &testClock{now: time.Date(2026, 11, 3, 9, 0, 0, 0, time.UTC)}
		users := []User{testUser(t, "anna", RoleViewer), testUser(t, "boris", RoleViewer), testUser(t, "vera", RoleViewer)}
		var sites [2]*site
		for i := range sites {
			sites[i] = newSite(t, r.stores[i], func(c *Config) {
				c.Users, c.Sessions, c.SessionTTL, c.Now = users, r.sessions[i], time.Hour, clock.Now
			})
		}
		stored := func(b *browser) session.Session {
			t.Helper()
			s, err := r.sessions[0].Get(t.Context(), session.HashToken(sessionToken(t, b)))
			if err != nil {
				t.Fatalf("the session of the browser: %v", err)
			}
			return s
		}

		anna := sites[0].browser()
		anna.mustSignIn("anna")
		signedIn := clock.Now()
		clock.Advance(time.Second)
		wantSignedIn(t, anna.on(sites[1]), "anna")
		if s := stored(anna); !s.LastSeen.Equal(signedIn) || !s.ExpiresAt.Equal(signedIn.Add(time.Hour)) {
			t.Fatalf("a use a second after the sign-in was written: last seen %s, expires %s", s.LastSeen, s.ExpiresAt)
		}
		clock.Advance(40 * time.Minute)
		wantSignedIn(t, anna, "anna")
		if s := stored(anna); !s.LastSeen.Equal(clock.Now()) || !s.ExpiresAt.Equal(clock.Now().Add(time.Hour)) {
			t.Fatalf("a use 40 minutes on: last seen %s, expires %s; want %s and an hour later", s.LastSeen, s.ExpiresAt, clock.Now())
		}
		clock.Advance(59 * time.Minute) // 100 minutes since the sign-in
		wantSignedIn(t, anna.on(sites[1]), "anna")

		boris := sites[1].browser()
		boris.mustSignIn("boris")
		clock.Advance(time.Hour)
		wantSignedOut(t, anna) // an hour without use: deleted as it is read
		if got := rowUsers(r.rows(t)); !slices.Equal(got, []string{"boris"}) {
			t.Fatalf("ui_sessions after anna's expired session was read: sessions of %q, want boris's only", got)
		}
		vera := sites[0].browser()
		vera.mustSignIn("vera") // sweeps boris's, expired and never read again
		if got := rowUsers(r.rows(t)); !slices.Equal(got, []string{"vera"}) {
			t.Fatalf("ui_sessions after a sign-in: sessions of %q, want vera's only", got)
		}
		wantSignedOut(t, boris)
		wantSignedIn(t, vera.on(sites[1]), "vera")
	})
}
