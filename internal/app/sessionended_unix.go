//go:build linux || darwin || freebsd || netbsd || openbsd

package app

import (
	"errors"
	"syscall"
)

// readable peeks at the socket without blocking, consuming anything or
// taking its read lock: true when a byte or the end of the stream is
// waiting, or the socket failed.
func readable(rc syscall.RawConn) bool {
	var (
		err error
		buf [1]byte
	)
	if cerr := rc.Control(func(fd uintptr) {
		_, _, err = syscall.Recvfrom(int(fd), buf[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
	}); cerr != nil {
		return true
	}
	// Nothing waiting is EAGAIN; a byte (n 1), the end of the stream (n 0)
	// and a failed socket all mean the session is over.
	return !errors.Is(err, syscall.EAGAIN) && !errors.Is(err, syscall.EWOULDBLOCK) && !errors.Is(err, syscall.EINTR)
}
