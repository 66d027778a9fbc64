-- The journal pages' sessions, shared by every replica: a sign-in on one holds on
-- the others, and a sign-out on any ends it everywhere. A row is found by the
-- SHA-256 of the session's token; the token itself, which the browser's cookie
-- holds, is never stored. credential is the SHA-256 of the ui.users password hash
-- signed in against, so a changed password ends the session. expires_at slides with
-- use; rows past it are deleted (on read and at each sign-in).
CREATE TABLE ui_sessions (
	token_hash   bytea PRIMARY KEY CHECK (length(token_hash) = 32),
	user_name    text NOT NULL,
	role         text NOT NULL,
	credential   bytea NOT NULL CHECK (length(credential) = 32),
	csrf         text NOT NULL,
	created_at   timestamptz NOT NULL,
	last_seen_at timestamptz NOT NULL,
	expires_at   timestamptz NOT NULL
);
CREATE INDEX ui_sessions_expires_at ON ui_sessions (expires_at);
