package ratelimit

import (
	"context"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/slidelog/ratelimit/internal/fakeclock"
)

// testCacheKeys is the bound the cache tests give a cache: the logic is
// that of maxCachedKeys at a size -race runs quickly.
const testCacheKeys = 1 << 12

// A SaaS of 100,000 active clients is looked up once per client per ttl,
// not on every request: the cache holds them all. A cache smaller than the
// clients active within a ttl (it held 65,536) drops answers as fast as
// it stores them, and under round-robin traffic every request becomes a
// call of the lookup, a database query at the request rate. Under -race,
// which slows each call about tenfold, 70,000 clients: still more than the
// old bound.
func TestLimitsCacheHoldsAHundredThousandClients(t *testing.T) {
	clients := 100_000
	if msRaceEnabled {
		clients = 70_000
	}
	var lookups atomic.Int64
	lookup := func(context.Context, string) ([]Policy, error) {
		lookups.Add(1)
		return []Policy{{Name: "contract", Limit: 5, Window: time.Minute}}, nil
	}
	l, err := New(5, time.Minute, KeyByHeader("X-API-Key"), WithLimits(lookup, time.Hour))
	require.NoError(t, err)
	t.Cleanup(func() { l.Close() })
	keys := make([]string, clients)
	for i := range keys {
		keys[i] = "apikey:client-" + strconv.Itoa(i)
	}
	for round := range 2 {
		for _, k := range keys {
			require.Equal(t, Serve, l.Allow(context.Background(), k, 1).Outcome, "round %d, %s", round, k)
		}
	}
	assert.Equal(t, int64(clients), lookups.Load(), "lookups for two rounds of every client")
}

// WithLimits' cache holds at most its bound of keys, expired ones going
// first, however many clients there are.
func TestLimitsCacheBounded(t *testing.T) {
	now := int64(0)
	c := &limitsCache{
		lookup: func(context.Context, string) ([]Policy, error) { return nil, nil },
		ttl:    time.Minute, timeout: time.Minute, now: func() int64 { return now }, inflight: map[string]*flight{},
		turns: make(chan struct{}, maxLookups), maxKeys: testCacheKeys,
	}
	count := func() int {
		n := 0
		c.keys.Range(func(any, any) bool { n++; return true })
		return n
	}
	// A lookup that answers at once, within a deadline of a minute that
	// no goroutine a busy machine keeps waiting reaches.
	lookup := func(key string) {
		t.Helper()
		_, err := c.planOf(context.Background(), key, func(error) {})
		require.NoError(t, err, "key %s", key)
	}
	for i := range testCacheKeys + 5000 {
		lookup(strconv.Itoa(i))
	}
	assert.LessOrEqual(t, count(), testCacheKeys, "keys cached")
	assert.Equal(t, int64(count()), c.size.Load(), "the size the cache counts")
	// Once the answers have expired, new keys find room without losing
	// any fresh one.
	now += int64(time.Minute)
	for i := range 10 {
		lookup("fresh-" + strconv.Itoa(i))
	}
	for i := range 10 {
		_, ok := c.keys.Load("fresh-" + strconv.Itoa(i))
		assert.True(t, ok, "fresh key %d cached", i)
	}
	assert.LessOrEqual(t, count(), testCacheKeys, "keys cached")
}

// The cache holds up to its bound of keys before it makes room, and
// making room never drops the answer it is storing: a client whose lookup
// just answered is not looked up again on its next request. Which keys go
// is the map's order, so the answer stored is checked over several rounds.
func TestLimitsCacheKeepsWhatItStores(t *testing.T) {
	c := &limitsCache{now: func() int64 { return 0 }, maxKeys: testCacheKeys}
	fresh := func() *cached { return &cached{expires: int64(time.Minute)} }
	count := func() int {
		n := 0
		c.keys.Range(func(any, any) bool { n++; return true })
		return n
	}
	next := 0
	fill := func(n int) {
		for range n {
			c.store(strconv.Itoa(next), fresh())
			next++
		}
	}
	fill(testCacheKeys)
	require.Equal(t, testCacheKeys, count(), "keys cached at the bound")
	for round := range 6 { // each round refills a quarter of the cache
		key := "new-" + strconv.Itoa(round)
		c.store(key, fresh())
		_, ok := c.keys.Load(key)
		require.True(t, ok, "round %d: the key stored as the cache made room", round)
		require.Equal(t, testCacheKeys*3/4, count(), "round %d: keys left", round)
		fill(testCacheKeys - count())
	}
}

// Making room, the cache drops expired answers first, an answer expiring
// at this very instant among them, and keeps every fresh one while
// expired ones are left.
func TestLimitsCacheMakesRoomFromExpiredFirst(t *testing.T) {
	const now = int64(time.Hour)
	c := &limitsCache{now: func() int64 { return now }, maxKeys: testCacheKeys}
	for i := range testCacheKeys {
		expires := now // expired now: planOf serves only now < expires
		if i%2 == 0 {
			expires = now + int64(time.Minute)
		}
		c.store(strconv.Itoa(i), &cached{expires: expires})
	}
	c.store("new", &cached{expires: now + int64(time.Minute)})
	for i := 0; i < testCacheKeys; i += 2 {
		_, ok := c.keys.Load(strconv.Itoa(i))
		require.True(t, ok, "fresh key %d cached", i)
	}
	_, ok := c.keys.Load("new")
	assert.True(t, ok, "the key stored as the cache made room")
}

// WithLimits' sets group the memory store's entries by their IDs: clients
// of distinct limits under the same names, windows and algorithms share one
// group, and each quota of its own (a window, a name) makes one, which the
// store keeps only while it holds an entry, so that clients of quotas of
// their own cost memory as their keys do, no more and not for longer.
func TestLimitsGroupsBoundedByEntries(t *testing.T) {
	const clients = 5000
	lookup := func(_ context.Context, key string) ([]Policy, error) {
		kind, n, _ := strings.Cut(key, ":") // "limit:7" or "window:7"
		i, err := strconv.Atoi(n)
		if kind == "limit" {
			return []Policy{{Name: "per-s", Limit: i + 1, Window: time.Second}}, err
		}
		return []Policy{{Name: "burst", Limit: 10, Window: time.Duration(i+1) * time.Millisecond}}, err
	}
	clk := fakeclock.New()
	l, err := New(10, time.Minute, KeyByHeader("X-API-Key"), WithClock(clk.Now),
		WithLimits(lookup, time.Hour), WithLookupTimeout(time.Minute))
	require.NoError(t, err)
	t.Cleanup(func() { l.Close() })
	s := l.store.(*memoryStore)
	groups := func() map[string]int { // set ID -> entries, over every shard
		ids := make(map[string]int)
		for i := range s.shards {
			sh := &s.shards[i]
			sh.mu.RLock()
			for id, g := range sh.sets {
				assert.Positive(t, g.n, "shard %d: a group of no entry", i)
				ids[id] += g.n
			}
			sh.mu.RUnlock()
		}
		return ids
	}
	ctx := context.Background()

	for i := range clients {
		d := l.Allow(ctx, "limit:"+strconv.Itoa(i), 1)
		require.Equal(t, Serve, d.Outcome, "client of limit %d: %v", i+1, d.Err)
		require.Equal(t, i+1, d.Result.Limit, "client of limit %d", i+1)
	}
	ids := groups()
	require.Len(t, ids, 1, "set IDs for %d clients of distinct limits", clients)
	var shared string
	for id := range ids {
		shared = id
	}

	for i := range clients {
		d := l.Allow(ctx, "window:"+strconv.Itoa(i), 1)
		require.Equal(t, Serve, d.Outcome, "client of window %d ms: %v", i+1, d.Err)
	}
	ids = groups()
	assert.Equal(t, clients+1, len(ids), "set IDs after %d clients of windows of their own", clients)
	assert.Equal(t, clients, ids[shared], "entries of the clients of distinct limits")

	clk.Advance(clients * time.Millisecond) // every window has passed
	msSweepAll(s)
	assert.Zero(t, len(groups()), "groups once their entries went idle")
	assert.Zero(t, l.Stats().Keys, "entries once idle")
	d := l.Allow(ctx, "window:7", 1)
	assert.Equal(t, Serve, d.Outcome, "a client of a quota of its own again: %v", d.Err)
	assert.Equal(t, 1, len(groups()), "set IDs at the end")
}
