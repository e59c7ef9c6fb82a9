package redisstore_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/slidelog/ratelimit"
	"github.com/slidelog/ratelimit/redisstore"
)

// zsetScript is the textbook sliding log, kept only to measure against:
// a sorted set scored by microsecond instant, each member unique (the
// server's TIME strings and a per-key sequence, since instants collide).
var zsetScript = redis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local window, limit = tonumber(ARGV[1]), tonumber(ARGV[2])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', string.format('%.0f', now - window))
if redis.call('ZCARD', KEYS[1]) >= limit then return 0 end
local seq = redis.call('HINCRBY', KEYS[2], 'seq', 1)
redis.call('ZADD', KEYS[1], string.format('%.0f', now), t[1] .. string.format('%06d', tonumber(t[2])) .. '-' .. seq)
redis.call('PEXPIRE', KEYS[1], math.ceil(window / 1000))
redis.call('PEXPIRE', KEYS[2], math.ceil(window / 1000))
return 1
`)

// memoryUsage is MEMORY USAGE of k, counting every element (SAMPLES 0).
func memoryUsage(t testing.TB, c redis.UniversalClient, k string) int64 {
	t.Helper()
	n, err := c.MemoryUsage(context.Background(), k, 0).Result()
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// keyBytes measures, at 1 and 300 requests in the window, the bytes Redis
// spends on one client's log kept by the store under prefix and by the
// sorted-set script under a key name of the same length. It deletes the
// keys it made when t ends.
func keyBytes(t testing.TB, c redis.UniversalClient, prefix string) (list, zset [2]int64) {
	t.Helper()
	st, err := redisstore.New(c, redisstore.WithPrefix(prefix), redisstore.WithTimeout(5*time.Second), redisstore.WithRefusalCache(0))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	pol, _ := ratelimit.NewPolicySet(ratelimit.Policy{Name: "default", Limit: 300, Window: time.Minute})
	var b [8]byte
	rand.Read(b[:])
	for i, n := range []int{1, 300} {
		key := "memory-" + hex.EncodeToString(b[:]) + strconv.Itoa(i)
		lk := stateKey(prefix, key, pol, "default")
		zk := strings.Replace(lk, "default", "zsetlg", 1) // the same length
		t.Cleanup(func() { c.Unlink(ctx, lk, zk, zk+":seq") })
		for range n {
			if res, err := st.Take(ctx, key, pol, 1); err != nil || !res.Allowed {
				t.Fatalf("Take: %+v, %v", res, err)
			}
			if ok, err := zsetScript.Run(ctx, c, []string{zk, zk + ":seq"}, int64(60e6), 300).Int(); err != nil || ok != 1 {
				t.Fatalf("zset script: %d, %v", ok, err)
			}
		}
		list[i], zset[i] = memoryUsage(t, c, lk), memoryUsage(t, c, zk)
	}
	return list, zset
}

// TestMemoryUsage checks the store's log against its target, at most 16
// bytes an instant at 300 requests, key and all, and against the sorted
// set there. At one request the two cost about the same and the key name
// dominates; on Redis 7.0 a list of any length is a quicklist, with some
// 60 bytes of fixed overhead that a one-element sorted set does not have,
// so only the figures are logged.
func TestMemoryUsage(t *testing.T) {
	c := sharedClient(t)
	list, zset := keyBytes(t, c, testPrefix(t, c))
	t.Logf("MEMORY USAGE at 1 and 300 requests: list %d and %d bytes (%.1f a request), sorted set %d and %d (%.1f)",
		list[0], list[1], float64(list[1])/300, zset[0], zset[1], float64(zset[1])/300)
	if list[1] > 16*300 {
		t.Errorf("list at 300 requests: %d bytes, want <= %d (16 a request)", list[1], 16*300)
	}
	if list[1] >= zset[1]/8 {
		t.Errorf("at 300 requests: list %d bytes, sorted set %d; want the list 8 times smaller", list[1], zset[1])
	}
}

// fillLog appends n instants, a second apart, to the log at k in one
// script call, as n requests a second apart would, and gives it a TTL.
var fillLog = redis.NewScript(`
local n, t = tonumber(ARGV[1]), tonumber(ARGV[2])
local batch = {}
for i = 1, n do
  batch[#batch + 1] = string.format('%d', t + i * 1000000)
  if #batch == 1000 or i == n then
    redis.call('RPUSH', KEYS[1], unpack(batch))
    batch = {}
  end
end
redis.call('PEXPIRE', KEYS[1], 3600000)
return redis.call('LLEN', KEYS[1])
`)

// TestPlanMemory measures, with MEMORY USAGE, the Redis memory of one
// client under the plan, {10 a second, sliding log} beside
// {100,000 a day}, with the daily policy kept by GCRA, by the window
// counter and, for comparison, by a sliding log, each at its fullest: 10
// instants in the second's log, and a daily quota used up (100,000
// instants in the daily log, filled by a script). Key names are the
// production ones (the default prefix). The daily GCRA or counter state
// takes under 200 bytes, and the whole client (both keys) under 1% of
// what it takes with a log for both policies.
func TestPlanMemory(t *testing.T) {
	c := sharedClient(t)
	ctx := context.Background()
	var b [8]byte
	rand.Read(b[:])
	key := "plan-memory-" + hex.EncodeToString(b[:])
	T := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	st, err := redisstore.New(c, redisstore.WithTimeout(5*time.Second), redisstore.WithScriptClock(func() time.Time { return T }))
	if err != nil {
		t.Fatal(err)
	}
	plans := map[string]ratelimit.Algorithm{"gcra": ratelimit.GCRA, "counter": ratelimit.SlidingWindowCounter, "log": ratelimit.SlidingLog}
	whole := map[string]int64{}
	daily := map[string]int64{}
	var second int64
	for name, a := range plans {
		set := policySet(t,
			ratelimit.Policy{Name: "second", Limit: 10, Window: time.Second},
			ratelimit.Policy{Name: "daily", Limit: 100_000, Window: 24 * time.Hour, Algorithm: a})
		ks := []string{stateKey(redisstore.DefaultPrefix, key, set, "second"), stateKey(redisstore.DefaultPrefix, key, set, "daily")}
		t.Cleanup(func() { c.Unlink(ctx, ks...) })
		for range 10 {
			if res, err := st.Take(ctx, key, set, 1); err != nil || !res.Allowed {
				t.Fatalf("%s: %+v, %v", name, res, err)
			}
		}
		if a == ratelimit.SlidingLog {
			// The daily quota used up: 100,000 instants over the day.
			c.Del(ctx, ks[1])
			if n, err := fillLog.Run(ctx, c, ks[1:], 100_000, T.Add(-24*time.Hour).UnixMicro()).Int(); err != nil || n != 100_000 {
				t.Fatalf("filling the daily log: %d, %v", n, err)
			}
		}
		second = memoryUsage(t, c, ks[0])
		daily[name] = memoryUsage(t, c, ks[1])
		whole[name] = second + daily[name]
	}
	t.Logf("MEMORY USAGE, one client: the second's log at 10 instants %d B; daily GCRA %d B, counter %d B, log at 100,000 instants %d B",
		second, daily["gcra"], daily["counter"], daily["log"])
	for _, name := range []string{"gcra", "counter"} {
		share := float64(whole[name]) / float64(whole["log"])
		t.Logf("whole client with a daily %s: %d B, %.3f%% of %d B with a daily log", name, whole[name], 100*share, whole["log"])
		if daily[name] >= 200 {
			t.Errorf("daily %s: %d bytes, want under 200", name, daily[name])
		}
		if share >= 0.01 {
			t.Errorf("whole client with a daily %s: %d bytes, %.2f%% of the %d with a daily log, want under 1%%", name, whole[name], 100*share, whole["log"])
		}
	}
}
