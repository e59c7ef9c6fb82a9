package redisstore_test

// The Redis servers the tests talk to: the shared one at REDIS_ADDR, and
// private ones a test starts, stops and restarts on spare ports.

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// requireRedis reports whether a missing Redis fails the tests instead of
// skipping them; CI sets it so that it can never pass by skipping.
func requireRedis() bool { return os.Getenv("RATELIMIT_REQUIRE_REDIS") == "1" }

// skipOrFail skips t, or fails it when Redis is required.
func skipOrFail(t testing.TB, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...)
	if requireRedis() {
		t.Fatal(msg + " (RATELIMIT_REQUIRE_REDIS=1)")
	}
	t.Skip(msg + "; set RATELIMIT_REQUIRE_REDIS=1 to fail instead of skipping")
}

// redisAddr is the shared test server's address.
func redisAddr() string {
	if a := os.Getenv("REDIS_ADDR"); a != "" {
		return a
	}
	return "127.0.0.1:6379"
}

// sharedClient returns a client of the server at REDIS_ADDR, closed when t
// ends, or skips t (fails it under RATELIMIT_REQUIRE_REDIS=1) when none
// answers.
func sharedClient(t testing.TB) *redis.Client {
	t.Helper()
	if err := probeShared(); err != nil {
		skipOrFail(t, "redisstore: no Redis at %s (set REDIS_ADDR): %v", redisAddr(), err)
	}
	c := redis.NewClient(&redis.Options{Addr: redisAddr(), ContextTimeoutEnabled: true, PoolSize: 64})
	t.Cleanup(func() { c.Close() })
	return c
}

// probeShared pings the shared server once, so that without one every
// test skips at once instead of waiting for its own ping to time out.
var probeShared = sync.OnceValue(func() error {
	c := redis.NewClient(&redis.Options{Addr: redisAddr()})
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	return c.Ping(ctx).Err()
})

// testPrefix returns a key prefix unique to this run of t, and deletes
// every key under it when t ends, so tests share a server without
// touching each other's keys or leaving any behind.
func testPrefix(t testing.TB, c redis.UniversalClient) string {
	t.Helper()
	var b [6]byte
	rand.Read(b[:])
	name := strings.NewReplacer("/", ".", " ", "_", "{", "(", "}", ")").Replace(t.Name())
	p := "rstest:" + name + ":" + hex.EncodeToString(b[:]) + ":"
	t.Cleanup(func() { deleteKeys(t, c, p) })
	return p
}

// scanKeys returns every key under prefix, on every master of a Cluster.
func scanKeys(t testing.TB, c redis.UniversalClient, prefix string) []string {
	t.Helper()
	ctx := context.Background()
	var all []string
	scan := func(ctx context.Context, n *redis.Client) error {
		it := n.Scan(ctx, 0, prefix+"*", 1000).Iterator()
		for it.Next(ctx) {
			all = append(all, it.Val())
		}
		return it.Err()
	}
	var err error
	switch c := c.(type) {
	case *redis.ClusterClient:
		var ch = make(chan []string, 16)
		err = c.ForEachMaster(ctx, func(ctx context.Context, n *redis.Client) error {
			var ks []string
			it := n.Scan(ctx, 0, prefix+"*", 1000).Iterator()
			for it.Next(ctx) {
				ks = append(ks, it.Val())
			}
			ch <- ks
			return it.Err()
		})
		close(ch)
		for ks := range ch {
			all = append(all, ks...)
		}
	case *redis.Client:
		err = scan(ctx, c)
	default:
		t.Fatalf("scanKeys: unsupported client %T", c)
	}
	if err != nil {
		t.Fatalf("SCAN %s*: %v", prefix, err)
	}
	return all
}

func deleteKeys(t testing.TB, c redis.UniversalClient, prefix string) {
	t.Helper()
	ctx := context.Background()
	keys := scanKeys(t, c, prefix)
	for len(keys) > 0 {
		n := min(len(keys), 500)
		pipe := c.Pipeline()
		for _, k := range keys[:n] {
			pipe.Unlink(ctx, k) // one key a command: Cluster slots differ
		}
		pipe.Exec(ctx)
		keys = keys[n:]
	}
}

// spareAddr returns a loopback address no one listens on now, whose port
// plus 10000 (a Cluster node's bus port) is free too.
func spareAddr(t testing.TB) string {
	t.Helper()
	for range 50 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		port := l.Addr().(*net.TCPAddr).Port
		l.Close()
		if port+10000 > 65535 {
			continue
		}
		bus, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port+10000))
		if err != nil {
			continue
		}
		bus.Close()
		return "127.0.0.1:" + strconv.Itoa(port)
	}
	t.Fatal("no spare port")
	return ""
}

// server is a redis-server a test runs for itself.
type server struct {
	t    testing.TB
	addr string
	dir  string
	args []string
	cmd  *exec.Cmd
}

// startServer runs a redis-server on a spare loopback port with extra
// arguments args, stopped when t ends. It skips t (fails it under
// RATELIMIT_REQUIRE_REDIS=1) when redis-server is not installed.
func startServer(t testing.TB, args ...string) *server {
	t.Helper()
	if _, err := exec.LookPath("redis-server"); err != nil {
		skipOrFail(t, "redisstore: redis-server not installed: %v", err)
	}
	s := &server{t: t, addr: spareAddr(t), dir: t.TempDir(), args: args}
	s.start()
	t.Cleanup(s.stop)
	return s
}

func (s *server) port() string { return s.addr[strings.LastIndexByte(s.addr, ':')+1:] }

// start runs the server and waits until it answers PING.
func (s *server) start() {
	s.t.Helper()
	args := append([]string{"--port", s.port(), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
		"--dir", s.dir, "--logfile", ""}, s.args...)
	s.cmd = exec.Command("redis-server", args...)
	if err := s.cmd.Start(); err != nil {
		s.t.Fatalf("start redis-server: %v", err)
	}
	c := redis.NewClient(&redis.Options{Addr: s.addr, MaxRetries: -1})
	defer c.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		err := c.Ping(ctx).Err()
		cancel()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("redis-server on %s did not answer: %v", s.addr, err)
		}
		// Waiting for another process to come up, not for the clock.
		time.Sleep(20 * time.Millisecond)
	}
}

// stop kills the server and waits for it to exit. It is safe to call on a
// stopped server.
func (s *server) stop() {
	if s.cmd == nil {
		return
	}
	s.cmd.Process.Kill()
	s.cmd.Wait()
	s.cmd = nil
}
