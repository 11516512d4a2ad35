//go:build !(linux || darwin || freebsd || netbsd || openbsd)

package app

import "syscall"

// readable cannot peek on this platform: the pool's own ping of connections
// idle for over a second is the only check.
func readable(syscall.RawConn) bool { return false }
