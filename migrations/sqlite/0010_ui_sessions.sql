-- The journal pages' sessions: the same table as PostgreSQL's 0012_ui_sessions.sql
-- (times in microseconds). The token itself is never stored, only its SHA-256.
CREATE TABLE ui_sessions (
	token_hash   BLOB PRIMARY KEY CHECK (length(token_hash) = 32),
	user_name    TEXT NOT NULL,
	role         TEXT NOT NULL,
	credential   BLOB NOT NULL CHECK (length(credential) = 32),
	csrf         TEXT NOT NULL,
	created_at   INTEGER NOT NULL,
	last_seen_at INTEGER NOT NULL,
	expires_at   INTEGER NOT NULL
) WITHOUT ROWID;
CREATE INDEX ui_sessions_expires_at ON ui_sessions (expires_at);
