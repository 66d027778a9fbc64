package storetest

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/ordersync/ordersync/internal/ui/session"
)

// session.Store: the journal pages' sessions, kept by their token's hash.

func runSessions(t *testing.T, h Harness) {
	t.Helper()
	for _, tc := range []struct {
		name string
		fn   func(t *testing.T, s session.Store)
	}{
		{"CreateGet", testSessionCreateGet},
		{"CreateTwiceRefused", testSessionCreateTwiceRefused},
		{"Touch", testSessionTouch},
		{"Delete", testSessionDelete},
		{"DeleteExpired", testSessionDeleteExpired},
		{"ConcurrentSignIns", testSessionConcurrentSignIns},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.fn(t, h.open(t, Options{}, "Sessions").Sessions)
		})
	}
}

// sessionAt is the session of token for user, started at (to the microsecond) and
// lasting ttl.
func sessionAt(token, user string, at time.Time, ttl time.Duration) session.Session {
	at = at.Truncate(time.Microsecond)
	return session.Session{Hash: session.HashToken(token), User: user, Role: "operator",
		Credential: session.FingerprintCredential("$2a$12$" + user), CSRF: "csrf-of-" + token,
		CreatedAt: at, LastSeen: at, ExpiresAt: at.Add(ttl)}
}

func createSession(t *testing.T, s session.Store, ss session.Session) {
	t.Helper()
	if err := s.Create(t.Context(), ss); err != nil {
		t.Fatalf("create the session of %s: %v", ss.User, err)
	}
}

func getSession(t *testing.T, s session.Store, h session.Hash) session.Session {
	t.Helper()
	ss, err := s.Get(t.Context(), h)
	if err != nil {
		t.Fatalf("get session %x: %v", h[:4], err)
	}
	return ss
}

func wantNoSession(t *testing.T, s session.Store, h session.Hash, why string) {
	t.Helper()
	if ss, err := s.Get(t.Context(), h); !errors.Is(err, session.ErrNotFound) {
		t.Fatalf("%s: got %+v, %v; want %v", why, ss, err, session.ErrNotFound)
	}
}

// sameSession compares sessions with their times as instants.
func sameSession(t *testing.T, what string, got, want session.Session) {
	t.Helper()
	if got.Hash != want.Hash || got.User != want.User || got.Role != want.Role || got.Credential != want.Credential ||
		got.CSRF != want.CSRF || !got.CreatedAt.Equal(want.CreatedAt) || !got.LastSeen.Equal(want.LastSeen) ||
		!got.ExpiresAt.Equal(want.ExpiresAt) {
		t.Fatalf("%s:\n got %+v\nwant %+v", what, got, want)
	}
	for _, tm := range []time.Time{got.CreatedAt, got.LastSeen, got.ExpiresAt} {
		if tm.Location() != time.UTC {
			t.Fatalf("%s: a time in %s, want UTC: %+v", what, tm.Location(), got)
		}
	}
}

func testSessionCreateGet(t *testing.T, s session.Store) {
	almaty := time.FixedZone("Asia/Almaty", 5*3600)
	want := sessionAt("token-anna", "anna", time.Now().In(almaty), 12*time.Hour)
	createSession(t, s, want)
	other := sessionAt("token-boris", "boris", time.Now(), time.Hour)
	other.Role = "viewer"
	createSession(t, s, other)

	sameSession(t, "anna's session", getSession(t, s, want.Hash), want)
	sameSession(t, "boris's session", getSession(t, s, other.Hash), other)
	wantNoSession(t, s, session.HashToken("token-nobody"), "an unknown hash")
	// The hash of the token is the key, not the token.
	var asToken session.Hash
	copy(asToken[:], "token-anna")
	wantNoSession(t, s, asToken, "the token's bytes as the hash")
}

func testSessionCreateTwiceRefused(t *testing.T, s session.Store) {
	first := sessionAt("token-1", "anna", time.Now(), time.Hour)
	createSession(t, s, first)
	second := sessionAt("token-1", "boris", time.Now().Add(time.Minute), 2*time.Hour)
	if err := s.Create(t.Context(), second); err == nil {
		t.Fatal("a second session under one hash: no error")
	}
	sameSession(t, "the first session after a refused second", getSession(t, s, first.Hash), first)
}

func testSessionTouch(t *testing.T, s session.Store) {
	start := time.Now().Truncate(time.Microsecond)
	ss := sessionAt("token-touch", "anna", start, time.Hour)
	createSession(t, s, ss)
	later := start.Add(40 * time.Minute)
	if err := s.Touch(t.Context(), ss.Hash, later, later.Add(time.Hour)); err != nil {
		t.Fatalf("touch: %v", err)
	}
	want := ss
	want.LastSeen, want.ExpiresAt = later, later.Add(time.Hour)
	sameSession(t, "after a touch", getSession(t, s, ss.Hash), want)

	// A session that is gone stays gone: a touch does not make it again.
	gone := session.HashToken("token-gone")
	if err := s.Touch(t.Context(), gone, later, later.Add(time.Hour)); !errors.Is(err, session.ErrNotFound) {
		t.Fatalf("touch of an unknown session: got %v, want %v", err, session.ErrNotFound)
	}
	wantNoSession(t, s, gone, "after touching an unknown session")
}

func testSessionDelete(t *testing.T, s session.Store) {
	anna := sessionAt("token-a", "anna", time.Now(), time.Hour)
	boris := sessionAt("token-b", "boris", time.Now(), time.Hour)
	createSession(t, s, anna)
	createSession(t, s, boris)
	if err := s.Delete(t.Context(), anna.Hash); err != nil {
		t.Fatalf("delete: %v", err)
	}
	wantNoSession(t, s, anna.Hash, "after delete")
	if err := s.Delete(t.Context(), anna.Hash); err != nil {
		t.Fatalf("delete twice: %v", err)
	}
	if err := s.Touch(t.Context(), anna.Hash, time.Now(), time.Now().Add(time.Hour)); !errors.Is(err, session.ErrNotFound) {
		t.Fatalf("touch after delete: got %v, want %v", err, session.ErrNotFound)
	}
	wantNoSession(t, s, anna.Hash, "after a touch of the deleted session")
	sameSession(t, "the other session", getSession(t, s, boris.Hash), boris)
}

func testSessionDeleteExpired(t *testing.T, s session.Store) {
	now := time.Now().Truncate(time.Microsecond)
	gone := sessionAt("token-gone", "anna", now.Add(-2*time.Hour), time.Hour)                  // expired an hour ago
	edge := sessionAt("token-edge", "boris", now.Add(-time.Hour), time.Hour)                   // expires at now
	alive := sessionAt("token-alive", "vera", now.Add(-time.Hour), time.Hour+time.Microsecond) // a microsecond after now
	slid := sessionAt("token-slid", "gleb", now.Add(-3*time.Hour), time.Hour)                  // expired, then touched
	for _, ss := range []session.Session{gone, edge, alive, slid} {
		createSession(t, s, ss)
	}
	if err := s.Touch(t.Context(), slid.Hash, now, now.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	n, err := s.DeleteExpired(t.Context(), now)
	if err != nil {
		t.Fatalf("delete expired: %v", err)
	}
	if n != 2 {
		t.Errorf("delete expired: removed %d, want 2", n)
	}
	wantNoSession(t, s, gone.Hash, "a session that expired")
	wantNoSession(t, s, edge.Hash, "a session that expires at the sweep")
	getSession(t, s, alive.Hash)
	getSession(t, s, slid.Hash)
	if n, err := s.DeleteExpired(t.Context(), now); err != nil || n != 0 {
		t.Fatalf("a second sweep: removed %d, %v; want 0", n, err)
	}
}

func testSessionConcurrentSignIns(t *testing.T, s session.Store) {
	const n = 20
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Go(func() {
			ss := sessionAt(fmt.Sprintf("token-%d", i), fmt.Sprintf("user-%d", i), time.Now(), time.Hour)
			if err := s.Create(t.Context(), ss); err != nil {
				errs <- err
				return
			}
			if _, err := s.Get(t.Context(), ss.Hash); err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	for i := range n {
		if ss := getSession(t, s, session.HashToken(fmt.Sprintf("token-%d", i))); ss.User != fmt.Sprintf("user-%d", i) {
			t.Errorf("session %d: user %q", i, ss.User)
		}
	}
}
