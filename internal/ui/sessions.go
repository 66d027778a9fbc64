package ui

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/ordersync/ordersync/internal/ui/session"
)

// sessions start, find and end the pages' sign-ins, kept in a session.Store (the
// database's, so that every replica knows them) by their token's hash. A session
// lasts ttl after its latest use; a use is written only once touchAfter has passed
// since the one recorded, so that a person paging through the journal does not
// write at every request.
type sessions struct {
	store      session.Store
	ttl        time.Duration
	touchAfter time.Duration
	now        func() time.Time
	log        *slog.Logger
}

// touchFraction: a use is recorded once this fraction of the TTL has passed since
// the recorded one, and at least every touchAtMost.
const (
	touchFraction = 20
	touchAtMost   = time.Minute
)

func newSessions(store session.Store, ttl time.Duration, now func() time.Time, log *slog.Logger) *sessions {
	return &sessions{store: store, ttl: ttl, touchAfter: min(ttl/touchFraction, touchAtMost), now: now, log: log}
}

func (ss *sessions) clock() time.Time { return ss.now().UTC().Truncate(time.Microsecond) }

// create starts a session of u and returns its token, which only the cookie
// holds. The sessions that expired meanwhile are deleted first (a failure to is
// logged: it does not stop the sign-in).
func (ss *sessions) create(ctx context.Context, u User) (string, session.Session, error) {
	now := ss.clock()
	if n, err := ss.store.DeleteExpired(ctx, now); err != nil {
		ss.log.WarnContext(ctx, "ui: expired sessions not deleted", "err", err)
	} else if n > 0 {
		ss.log.DebugContext(ctx, "ui: expired sessions deleted", "sessions", n)
	}
	token := randomToken()
	s := session.Session{Hash: session.HashToken(token), User: u.Name, Role: u.Role,
		Credential: session.FingerprintCredential(u.PasswordHash), CSRF: randomToken(),
		CreatedAt: now, LastSeen: now, ExpiresAt: now.Add(ss.ttl)}
	if err := ss.store.Create(ctx, s); err != nil {
		return "", session.Session{}, err
	}
	return token, s, nil
}

// get is the live session of token, for a user of users as that user is
// configured now: a session that expired, whose user is no longer in users, or
// whose user's role or password changed since the sign-in, is deleted and is not
// one (false). Its use is recorded when touchAfter has passed.
func (ss *sessions) get(ctx context.Context, token string, users map[string]User) (session.Session, bool, error) {
	if !validToken(token) {
		return session.Session{}, false, nil
	}
	h := session.HashToken(token)
	s, err := ss.store.Get(ctx, h)
	if errors.Is(err, session.ErrNotFound) {
		return session.Session{}, false, nil
	}
	if err != nil {
		return session.Session{}, false, err
	}
	now := ss.clock()
	ended := ""
	switch u, ok := users[s.User]; {
	case !now.Before(s.ExpiresAt) || !now.Before(s.LastSeen.Add(ss.ttl)):
		ended = "expired"
	case !ok:
		ended = "the user is no longer in ui.users"
	case u.Role != s.Role:
		ended = "the user's role changed"
	case session.FingerprintCredential(u.PasswordHash) != s.Credential:
		ended = "the user's password changed"
	}
	if ended != "" {
		if err := ss.store.Delete(context.WithoutCancel(ctx), h); err != nil {
			return session.Session{}, false, err
		}
		ss.log.InfoContext(ctx, "ui: session ended: "+ended, "name", s.User, "role", s.Role)
		return session.Session{}, false, nil
	}
	if now.Sub(s.LastSeen) >= ss.touchAfter {
		s.LastSeen, s.ExpiresAt = now, now.Add(ss.ttl)
		err := ss.store.Touch(ctx, h, s.LastSeen, s.ExpiresAt)
		if errors.Is(err, session.ErrNotFound) {
			return session.Session{}, false, nil // signed out meanwhile, on this replica or another
		}
		if err != nil {
			return session.Session{}, false, err
		}
	}
	return s, true, nil
}

// delete ends the session of token, on every replica.
func (ss *sessions) delete(ctx context.Context, token string) error {
	if !validToken(token) {
		return nil
	}
	return ss.store.Delete(context.WithoutCancel(ctx), session.HashToken(token))
}

// memorySessions is the session.Store of a Server given none (Config.Sessions):
// this process's memory, which a restart empties and no other replica sees.
type memorySessions struct {
	mu sync.Mutex
	m  map[session.Hash]session.Session
}

var _ session.Store = (*memorySessions)(nil)

func newMemorySessions() *memorySessions {
	return &memorySessions{m: map[session.Hash]session.Session{}}
}

func (ms *memorySessions) Create(_ context.Context, s session.Session) error {
	ms.mu.Lock()
	defer ms.mu.Unlock()
	if _, ok := ms.m[s.Hash]; ok {
		return fmt.Errorf("ui: a session with hash %x exists", s.Hash[:4])
	}
	ms.m[s.Hash] = s
	return nil
}

func (ms *memorySessions) Get(_ context.Context, h session.Hash) (session.Session, error) {
	ms.mu.Lock()
	defer ms.mu.Unlock()
	s, ok := ms.m[h]
	if !ok {
		return session.Session{}, session.ErrNotFound
	}
	return s, nil
}

func (ms *memorySessions) Touch(_ context.Context, h session.Hash, lastSeen, expires time.Time) error {
	ms.mu.Lock()
	defer ms.mu.Unlock()
	s, ok := ms.m[h]
	if !ok {
		return session.ErrNotFound
	}
	s.LastSeen, s.ExpiresAt = lastSeen, expires
	ms.m[h] = s
	return nil
}

func (ms *memorySessions) Delete(_ context.Context, h session.Hash) error {
	ms.mu.Lock()
	defer ms.mu.Unlock()
	delete(ms.m, h)
	return nil
}

func (ms *memorySessions) DeleteExpired(_ context.Context, now time.Time) (int, error) {
	ms.mu.Lock()
	defer ms.mu.Unlock()
	n := 0
	for h, s := range ms.m {
		if !s.ExpiresAt.After(now) {
			delete(ms.m, h)
			n++
		}
	}
	return n, nil
}
