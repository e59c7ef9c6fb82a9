package redisstore

import (
	"context"
	"net"
	"syscall"
	"time"
)

// Dial dials addr over plain TCP, as go-redis's default dialer does, for
// redis.Options.Dialer, so that calls go through Redis again as soon as
// it answers after an outage.
//
// go-redis stops dialling after as many failed dials in a row as its
// PoolSize: from then on it fails every call at once with the last dial's
// error, and probes the server once a second, so that calls keep failing
// for up to a second after Redis is back. Dial reports a failed dial to
// the call instead of to the pool: it returns a connection that fails
// every read and write with the dial's error. The call fails at once
// with that error, as it would have, and the pool, which never saw a
// dial fail, dials again for the next call.
//
// A pool that keeps idle connections (MinIdleConns) dials them ahead of
// need, during an outage too: go-redis checks an idle connection before
// it uses one (on Unix), and the check of such a connection fails, so that
// it dials again rather than fail a call once Redis is back.
//
// For TLS, wrap your own dialer the same way: on a failed dial, return a
// net.Conn whose Read and Write return the error, and whose SyscallConn
// (syscall.Conn) returns it too.
func Dial(ctx context.Context, network, addr string) (net.Conn, error) {
	d := net.Dialer{KeepAliveConfig: net.KeepAliveConfig{Enable: true, Idle: 30 * time.Second, Interval: 5 * time.Second, Count: 3}}
	c, err := d.DialContext(ctx, network, addr)
	if err != nil {
		return failedConn{err}, nil
	}
	return c, nil
}

// failedConn is a connection whose dial failed with err.
type failedConn struct{ err error }

func (c failedConn) Read([]byte) (int, error)         { return 0, c.err }
func (c failedConn) Write([]byte) (int, error)        { return 0, c.err }
func (c failedConn) Close() error                     { return nil }
func (c failedConn) LocalAddr() net.Addr              { return failedAddr{} }
func (c failedConn) RemoteAddr() net.Addr             { return failedAddr{} }
func (c failedConn) SetDeadline(time.Time) error      { return nil }
func (c failedConn) SetReadDeadline(time.Time) error  { return nil }
func (c failedConn) SetWriteDeadline(time.Time) error { return nil }

// SyscallConn fails with the dial's error, so that go-redis's check of an
// idle connection finds this one broken.
func (c failedConn) SyscallConn() (syscall.RawConn, error) { return nil, c.err }

type failedAddr struct{}

func (failedAddr) Network() string { return "tcp" }
func (failedAddr) String() string  { return "failed dial" }
