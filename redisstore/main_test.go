package redisstore_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"testing"

	"github.com/redis/go-redis/v9"
)

// quiet drops go-redis's log lines: the failure tests make it complain
// about refused dials by the hundred, and every failure is checked by the
// tests themselves.
type quiet struct{}

func (quiet) Printf(context.Context, string, ...any) {}

func TestMain(m *testing.M) {
	redis.SetLogger(quiet{})
	os.Exit(runTests(m))
}

// runTests finds the shared server for the tests that use one: the Redis
// at REDIS_ADDR if one answers there, else a redis-server of the test
// binary's own on a spare loopback port, stopped when the tests end, so
// that the tests pass on a machine where Redis is installed but not
// running. Without either, sharedClient skips (or fails under
// RATELIMIT_REQUIRE_REDIS=1) the tests that need one.
func runTests(m *testing.M) int {
	addr := envAddr()
	err := ping(addr)
	if err == nil {
		shared.addr = addr
		return m.Run()
	}
	if _, lerr := exec.LookPath("redis-server"); lerr != nil {
		shared.err = fmt.Errorf("no Redis at %s (%v), and no redis-server to start one: %v", addr, err, lerr)
		return m.Run()
	}
	srv, serr := newServer(os.TempDir())
	if serr == nil {
		serr = srv.start()
	}
	if serr != nil {
		shared.err = fmt.Errorf("no Redis at %s (%v), and starting one failed: %v", addr, err, serr)
		return m.Run()
	}
	defer func() { srv.stop(); os.RemoveAll(srv.dir) }()
	fmt.Fprintf(os.Stderr, "redisstore: no Redis at %s; the tests use their own on %s\n", addr, srv.addr)
	shared.addr = srv.addr
	return m.Run()
}
