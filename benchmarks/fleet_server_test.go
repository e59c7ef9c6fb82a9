package benchmarks

// The private redis-server of the fleet tests: started on a spare
// loopback port, stopped, paused and restarted on the same port, never the
// shared server at REDIS_ADDR, which must not see FUNCTION FLUSH,
// SHUTDOWN or SIGSTOP.

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/slidelog/ratelimit/redisstore"
)

// requireRedis reports whether a missing redis-server fails the tests
// instead of skipping them; CI sets it so that it can never pass by
// skipping.
func requireRedis() bool { return os.Getenv("RATELIMIT_REQUIRE_REDIS") == "1" }

// fleetServer is a redis-server of the test's own.
type fleetServer struct {
	addr string
	dir  string
	args []string
	cmd  *exec.Cmd
}

// startFleetServer runs a redis-server on a spare loopback port, without
// persistence unless args say otherwise (later arguments win), stopped
// when t ends. Without redis-server it skips t, or fails it under
// RATELIMIT_REQUIRE_REDIS=1.
func startFleetServer(t testing.TB, args ...string) *fleetServer {
	t.Helper()
	quietOnce.Do(func() { redis.SetLogger(quietLogger{}) })
	if _, err := exec.LookPath("redis-server"); err != nil {
		msg := fmt.Sprintf("fleet: redis-server not installed: %v", err)
		if requireRedis() {
			t.Fatal(msg + " (RATELIMIT_REQUIRE_REDIS=1)")
		}
		t.Skip(msg + "; set RATELIMIT_REQUIRE_REDIS=1 to fail instead of skipping")
	}
	addr, err := spareLoopback()
	if err != nil {
		t.Fatal(err)
	}
	s := &fleetServer{addr: addr, dir: t.TempDir(), args: args}
	if err := s.start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.kill)
	return s
}

// quietLogger drops go-redis's log lines: the outages make it complain
// of refused dials by the hundred, and the tests count every failure
// themselves.
type quietLogger struct{}

func (quietLogger) Printf(context.Context, string, ...any) {}

var quietOnce sync.Once

// spareLoopback returns a loopback address no one listens on now.
func spareLoopback() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

func (s *fleetServer) port() string { return s.addr[strings.LastIndexByte(s.addr, ':')+1:] }

// start runs the server and waits until it answers PING.
func (s *fleetServer) start() error {
	args := append([]string{"--port", s.port(), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
		"--dir", s.dir, "--logfile", ""}, s.args...)
	s.cmd = exec.Command("redis-server", args...)
	if err := s.cmd.Start(); err != nil {
		return fmt.Errorf("start redis-server: %v", err)
	}
	if err := waitAnswer(s.addr, 10*time.Second); err != nil {
		s.kill()
		return err
	}
	return nil
}

// waitAnswer polls addr with PING every 5 ms until it answers, or within
// has passed. It returns at the first answer: FailLocal's recovery is
// timed from it.
func waitAnswer(addr string, within time.Duration) error {
	// redisstore.Dial: go-redis's own dialer stops dialling after
	// PoolSize refused dials and probes once a second, which would put
	// the answer up to a second late.
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DialerRetries: 1, Dialer: redisstore.Dial})
	defer c.Close()
	deadline := time.Now().Add(within)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		err := c.Ping(ctx).Err()
		cancel()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("redis-server on %s did not answer: %v", addr, err)
		}
		// Waiting for another process to come up, not for the clock.
		time.Sleep(5 * time.Millisecond)
	}
}

// shutdown stops the server with SHUTDOWN NOSAVE and waits for it to
// exit, so that start can run it again on the same port.
func (s *fleetServer) shutdown() error {
	c := redis.NewClient(&redis.Options{Addr: s.addr, MaxRetries: -1, DialerRetries: 1})
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	// SHUTDOWN answers nothing when it works: the connection closes.
	if err := c.ShutdownNoSave(ctx).Err(); err != nil && !isClosed(err) {
		return fmt.Errorf("SHUTDOWN NOSAVE: %v", err)
	}
	err := s.cmd.Wait()
	s.cmd = nil
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		return err
	}
	return nil
}

func isClosed(err error) bool {
	s := err.Error()
	return strings.Contains(s, "EOF") || strings.Contains(s, "connection reset") || strings.Contains(s, "closed")
}

// pause and resume stop and continue the server's process (SIGSTOP,
// SIGCONT): it keeps its connections and its data, and answers nothing
// meanwhile.
func (s *fleetServer) pause() error  { return s.cmd.Process.Signal(syscall.SIGSTOP) }
func (s *fleetServer) resume() error { return s.cmd.Process.Signal(syscall.SIGCONT) }

// kill stops the server at once, if it runs.
func (s *fleetServer) kill() {
	if s.cmd == nil {
		return
	}
	s.cmd.Process.Signal(syscall.SIGCONT)
	s.cmd.Process.Kill()
	s.cmd.Wait()
	s.cmd = nil
}

// client returns a plain client of the server for the harness's own
// commands, closed when t ends.
func (s *fleetServer) client(t testing.TB) *redis.Client {
	c := redis.NewClient(&redis.Options{Addr: s.addr, MaxRetries: -1, DialerRetries: 1, ContextTimeoutEnabled: true})
	t.Cleanup(func() { c.Close() })
	return c
}

// resetStats runs CONFIG RESETSTAT, so that INFO commandstats counts from
// now.
func resetStats(t testing.TB, c *redis.Client) {
	t.Helper()
	if err := c.ConfigResetStat(context.Background()).Err(); err != nil {
		t.Fatalf("CONFIG RESETSTAT: %v", err)
	}
}

// serverCPU reads INFO cpu: the seconds of CPU the server process has
// used, user and system. Unlike a command's usec_per_call, which is wall
// time, it does not grow while the server waits for a CPU that a busy
// client holds.
func serverCPU(t testing.TB, c *redis.Client) float64 {
	t.Helper()
	info, err := c.Info(context.Background(), "cpu").Result()
	if err != nil {
		t.Fatalf("INFO cpu: %v", err)
	}
	var sum float64
	for line := range strings.Lines(info) {
		k, v, _ := strings.Cut(strings.TrimSpace(line), ":")
		if k == "used_cpu_user" || k == "used_cpu_sys" {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatalf("INFO cpu: %s: %v", line, err)
			}
			sum += f
		}
	}
	return sum
}

// cmdStat is one command's line of INFO commandstats.
type cmdStat struct {
	calls        int64
	usecPerCall  float64
	failedCalls  int64
	rejectedCall int64
}

// commandStats reads INFO commandstats: cmdstat_<name> for each command
// called since the last CONFIG RESETSTAT.
func commandStats(t testing.TB, c *redis.Client) map[string]cmdStat {
	t.Helper()
	info, err := c.Info(context.Background(), "commandstats").Result()
	if err != nil {
		t.Fatalf("INFO commandstats: %v", err)
	}
	out := map[string]cmdStat{}
	for line := range strings.Lines(info) {
		name, fields, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok || !strings.HasPrefix(name, "cmdstat_") {
			continue
		}
		var st cmdStat
		for f := range strings.SplitSeq(fields, ",") {
			k, v, _ := strings.Cut(f, "=")
			switch k {
			case "calls":
				st.calls, _ = strconv.ParseInt(v, 10, 64)
			case "usec_per_call":
				st.usecPerCall, _ = strconv.ParseFloat(v, 64)
			case "failed_calls":
				st.failedCalls, _ = strconv.ParseInt(v, 10, 64)
			case "rejected_calls":
				st.rejectedCall, _ = strconv.ParseInt(v, 10, 64)
			}
		}
		out[strings.TrimPrefix(name, "cmdstat_")] = st
	}
	return out
}

// redisVersion is the server's redis_version.
func redisVersion(c *redis.Client) string {
	info, err := c.Info(context.Background(), "server").Result()
	if err != nil {
		return "unknown"
	}
	for line := range strings.Lines(info) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "redis_version:"); ok {
			return v
		}
	}
	return "unknown"
}
