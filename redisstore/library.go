package redisstore

import (
	"context"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// The store's Lua is a Redis function library (library.lua): loaded once
// per server with FUNCTION LOAD, and called with FCALL, so that nothing is
// defined again per call. A server that does not have it (a fresh one, a
// restart without persistence, FUNCTION FLUSH) answers "Function not
// found"; the store then loads it on every master and calls again.
//
// The library and its functions are named for a digest of the library's
// code, so that a store always calls the code it was built with: during a
// deploy, servers of two versions each load and call their own, and a
// server never runs stale code of the same name.
//
// KEYS[i] is the state of policy i of the set, in the set's order; for
// reset, refund and release one more key holds the instant of the
// client's latest Reset under the set. ARGV is described at the top of
// library.lua; every function replies with a flat array of integers, its
// durations in µs.

//go:embed library.lua
var librarySource string

// library is the source the store loads: library.lua with its constants
// and its names, which end in the digest.
var library, version = func() (string, string) {
	src := strings.NewReplacer(
		"local TOL = 150000", "local TOL = "+strconv.FormatInt((stepTolerance+maxLease).Microseconds(), 10),
		"local LEASE = 50000", "local LEASE = "+strconv.FormatInt(maxLease.Microseconds(), 10),
	).Replace(librarySource)
	sum := sha256.Sum256([]byte(src))
	v := hex.EncodeToString(sum[:6])
	return strings.ReplaceAll(src, "_v2", "_"+v), v
}()

// The library's functions.
var (
	fnTake    = "ratelimit_take_" + version
	fnPeek    = "ratelimit_peek_" + version
	fnRefund  = "ratelimit_refund_" + version
	fnRelease = "ratelimit_release_" + version
	fnReset   = "ratelimit_reset_" + version
)

// stepTolerance is how far ahead of the server's clock a logged instant
// may lie and still be taken for the clock of another server (a failover
// pair's differ by a few milliseconds); with a lease's end, which is
// logged ahead by up to maxLease, it bounds what the library takes for
// its own. An instant further ahead is taken for a clock that stepped
// back.
const stepTolerance = 100 * time.Millisecond

// fcall calls fn with keys and args within the store's timeout (FCALL_RO
// when ro), loading the library first if the server lacks it. With an
// injected clock, args end with the clock and the expiry slack.
func (s *Store) fcall(ctx context.Context, fn string, ro bool, keys []string, args []any) ([]int64, error) {
	if s.clock != nil {
		// The injected clock does not move with Redis's: keep keys an
		// hour longer than they matter, so that none expires while a
		// test's time stands still.
		args = append(args, strconv.FormatInt(s.clock().UnixMicro(), 10), "3600000")
	}
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	if s.bounded {
		return s.fcallOnce(ctx, fn, ro, keys, args)
	}
	type reply struct {
		v   []int64
		err error
	}
	// Buffered so that a call answered after the deadline does not block
	// its goroutine forever.
	done := make(chan reply, 1)
	go func() {
		v, err := s.fcallOnce(ctx, fn, ro, keys, args)
		done <- reply{v, err}
	}()
	select {
	case r := <-done:
		return r.v, r.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (s *Store) fcallOnce(ctx context.Context, fn string, ro bool, keys []string, args []any) ([]int64, error) {
	call := s.client.FCall
	if ro {
		call = s.client.FCallRO
	}
	// A server may lose the library again between the load and the call
	// (a FUNCTION FLUSH, a restart): load it again until a call finds it,
	// within the call's deadline, which fcall always sets.
	for {
		gen := s.loads.gen.Load()
		v, err := call(ctx, fn, keys, args...).Int64Slice()
		if err == nil || !redis.HasErrorPrefix(err, "Function not found") || ctx.Err() != nil {
			return v, err
		}
		if err := s.loads.load(ctx, gen, s.loadAll); err != nil {
			return nil, err
		}
	}
}

// loader makes the calls of one store that find the library missing load
// it once between them: a load blocks the server for about a millisecond,
// and a herd of callers each loading it after a restart would hold it for
// as many.
type loader struct {
	mu      sync.Mutex
	loading chan struct{} // closed when the load in flight ends; nil if none
	gen     atomic.Uint64 // loads completed
}

// load runs loadAll unless a load completed since the failed call that
// read gen was sent, or waits for the one in flight; either way the
// caller then calls again.
func (l *loader) load(ctx context.Context, gen uint64, loadAll func(context.Context) error) error {
	l.mu.Lock()
	if l.gen.Load() != gen {
		l.mu.Unlock()
		return nil
	}
	if c := l.loading; c != nil {
		l.mu.Unlock()
		select {
		case <-c:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	c := make(chan struct{})
	l.loading = c
	l.mu.Unlock()
	err := loadAll(ctx)
	l.mu.Lock()
	if err == nil {
		l.gen.Add(1)
	}
	l.loading = nil
	l.mu.Unlock()
	close(c)
	return err
}

// loadAll loads the library on the server, or on every master of a
// cluster, replacing a library of the same version (the same code).
func (s *Store) loadAll(ctx context.Context) error {
	each := func(ctx context.Context, m *redis.Client) error {
		return m.FunctionLoadReplace(ctx, library).Err()
	}
	switch c := s.client.(type) {
	case *redis.ClusterClient:
		var mu sync.Mutex
		var opt *redis.Options
		done := map[string]bool{}
		err := c.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error {
			mu.Lock()
			opt, done[m.Options().Addr] = m.Options(), true
			mu.Unlock()
			return each(ctx, m)
		})
		if err != nil || opt == nil {
			return err
		}
		loadSlotless(ctx, c, opt, done)
		return nil
	case *redis.Ring:
		return c.ForEachShard(ctx, each)
	}
	return s.client.FunctionLoadReplace(ctx, library).Err()
}

// loadSlotless loads the library on the masters of c that serve no slot
// yet, which ForEachMaster does not reach: a master that has just joined
// answers, by ASK, for the keys of a slot migrating to it before it owns
// any. done lists the masters loaded already, opt the options of one of
// them. A failure is left to the call that needs the node.
func loadSlotless(ctx context.Context, c *redis.ClusterClient, opt *redis.Options, done map[string]bool) {
	nodes, err := c.ClusterNodes(ctx).Result()
	if err != nil {
		return
	}
	for line := range strings.SplitSeq(nodes, "\n") {
		f := strings.Fields(line)
		if len(f) < 3 || !strings.Contains(f[2], "master") || strings.Contains(f[2], "fail") ||
			strings.Contains(f[2], "handshake") || strings.Contains(f[2], "noaddr") {
			continue
		}
		addr, _, _ := strings.Cut(f[1], "@")
		if done[addr] || strings.HasSuffix(addr, ":0") {
			continue
		}
		o := *opt
		o.Addr = addr
		n := redis.NewClient(&o)
		n.FunctionLoadReplace(ctx, library)
		n.Close()
	}
}
