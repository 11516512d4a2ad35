package app

import (
	"context"
	"syscall"

	"github.com/jackc/pgx/v5/pgconn"
)

// sessionEnded reports whether an idle connection of the pool is known
// dead: it is closed, or its socket holds bytes or the end of the stream.
// An idle connection has no answer due, so anything readable is the server
// speaking unprompted, in practice the FATAL it sends as it ends the
// session (pg_terminate_backend, idle_session_timeout, a shutdown) before
// closing. SyncConn first: pgx may still be reading the socket in the
// background or hold bytes read ahead; only then is the socket's own
// buffer the whole story (SyncConn pings in that rare case, and a failed
// ping is a dead connection). A socket that cannot be looked at, a TLS
// one included, is taken as alive.
func sessionEnded(ctx context.Context, c *pgconn.PgConn) bool {
	if c.IsClosed() {
		return true
	}
	if err := c.SyncConn(ctx); err != nil {
		return true
	}
	// Over TLS a waiting record need not be the server's farewell (a
	// session ticket, say): left to the pool's ping and to the callers.
	sc, ok := c.Conn().(syscall.Conn)
	if !ok {
		return false
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	return readable(rc)
}
