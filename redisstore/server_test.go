package redisstore_test

// The Redis servers the tests talk to: the shared one (REDIS_ADDR, or the
// test binary's own: see TestMain), and private ones a test starts, stops
// and restarts on spare ports, for whatever a shared server must not see
// (SCRIPT FLUSH, restarts, outages, clusters).

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
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

// envAddr is the address REDIS_ADDR names, by default 127.0.0.1:6379.
func envAddr() string {
	if a := os.Getenv("REDIS_ADDR"); a != "" {
		return a
	}
	return "127.0.0.1:6379"
}

// shared is the shared test server TestMain found or started, or why
// there is none.
var shared struct {
	addr string
	err  error
}

// redisAddr is the shared test server's address.
func redisAddr() string { return shared.addr }

// ping reports whether a Redis answers at addr, within two seconds.
func ping(addr string) error {
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DialerRetries: 1})
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	return c.Ping(ctx).Err()
}

// sharedClient returns a client of the shared server, closed when t ends,
// or skips t (fails it under RATELIMIT_REQUIRE_REDIS=1) when there is
// none.
func sharedClient(t testing.TB) *redis.Client {
	t.Helper()
	if shared.err != nil {
		skipOrFail(t, "redisstore: %v", shared.err)
	}
	c := redis.NewClient(&redis.Options{Addr: redisAddr(), ContextTimeoutEnabled: true, PoolSize: 64})
	t.Cleanup(func() { c.Close() })
	return c
}

// testPrefix returns a key prefix unique to this run of t, and deletes
// every key under it when t ends, so tests share a server without
// touching each other's keys or leaving any behind.
func testPrefix(t testing.TB, c redis.UniversalClient) string {
	t.Helper()
	var b [6]byte
	rand.Read(b[:])
	// No braces (a hash tag) and no glob characters (SCAN's MATCH).
	name := strings.NewReplacer("/", ".", " ", "_", "{", "(", "}", ")", "[", "(", "]", ")", "*", "_", "?", "_", "\\", "_").Replace(t.Name())
	p := "rstest:" + name + ":" + hex.EncodeToString(b[:]) + ":"
	t.Cleanup(func() { deleteKeys(t, c, p) })
	return p
}

// scanKeys returns every key under prefix, on every master of a Cluster.
func scanKeys(t testing.TB, c redis.UniversalClient, prefix string) []string {
	t.Helper()
	ctx := context.Background()
	scan := func(ctx context.Context, n *redis.Client) ([]string, error) {
		var ks []string
		it := n.Scan(ctx, 0, prefix+"*", 1000).Iterator()
		for it.Next(ctx) {
			ks = append(ks, it.Val())
		}
		return ks, it.Err()
	}
	var all []string
	var err error
	switch c := c.(type) {
	case *redis.ClusterClient:
		ch := make(chan []string, 16)
		err = c.ForEachMaster(ctx, func(ctx context.Context, n *redis.Client) error {
			ks, err := scan(ctx, n)
			ch <- ks
			return err
		})
		close(ch)
		for ks := range ch {
			all = append(all, ks...)
		}
	case *redis.Client:
		all, err = scan(ctx, c)
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
func spareAddr() (string, error) {
	for range 50 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return "", err
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
		return "127.0.0.1:" + strconv.Itoa(port), nil
	}
	return "", errors.New("no spare port")
}

// server is a redis-server run by the tests, without persistence unless
// its extra arguments say otherwise.
type server struct {
	addr string
	dir  string
	args []string
	cmd  *exec.Cmd
}

// newServer returns a server on a spare loopback port that keeps its
// files in a new directory under parent, with extra arguments args. It
// does not start it.
func newServer(parent string, args ...string) (*server, error) {
	addr, err := spareAddr()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp(parent, "redis-")
	if err != nil {
		return nil, err
	}
	return &server{addr: addr, dir: dir, args: args}, nil
}

// startServer runs a redis-server on a spare loopback port with extra
// arguments args, stopped when t ends. It skips t (fails it under
// RATELIMIT_REQUIRE_REDIS=1) when redis-server is not installed.
func startServer(t testing.TB, args ...string) *server {
	t.Helper()
	if _, err := exec.LookPath("redis-server"); err != nil {
		skipOrFail(t, "redisstore: redis-server not installed: %v", err)
	}
	s, err := newServer(t.TempDir(), args...)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.stop)
	return s
}

func (s *server) port() string { return s.addr[strings.LastIndexByte(s.addr, ':')+1:] }

// start runs the server and waits until it answers PING. Arguments given
// later override earlier ones, so the server's own come last.
func (s *server) start() error {
	args := append([]string{"--port", s.port(), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
		"--dir", s.dir, "--logfile", ""}, s.args...)
	s.cmd = exec.Command("redis-server", args...)
	if err := s.cmd.Start(); err != nil {
		return fmt.Errorf("start redis-server: %v", err)
	}
	c := redis.NewClient(&redis.Options{Addr: s.addr, MaxRetries: -1, DialerRetries: 1})
	defer c.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		err := c.Ping(ctx).Err()
		cancel()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			s.stop()
			return fmt.Errorf("redis-server on %s did not answer: %v", s.addr, err)
		}
		// Waiting for another process to come up, not for the clock.
		time.Sleep(20 * time.Millisecond)
	}
}

// restart starts the server again after stop, as one whose files survive.
func (s *server) restart(t testing.TB) {
	t.Helper()
	if err := s.start(); err != nil {
		t.Fatal(err)
	}
}

// stop kills the server (SIGKILL: no shutdown save) and waits for it to
// exit. It is safe to call on a stopped server.
func (s *server) stop() {
	if s.cmd == nil {
		return
	}
	s.cmd.Process.Kill()
	s.cmd.Wait()
	s.cmd = nil
}
