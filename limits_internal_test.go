package ratelimit

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/slidelog/ratelimit/internal/fakeclock"
)

// WithLimits' cache holds at most maxCachedKeys keys, expired ones going
// first, however many clients there are.
func TestLimitsCacheBounded(t *testing.T) {
	now := int64(0)
	c := &limitsCache{
		lookup: func(context.Context, string) ([]Policy, error) { return nil, nil },
		ttl:    time.Minute, timeout: time.Minute, now: func() int64 { return now }, inflight: map[string]*cached{},
		turns: make(chan struct{}, maxLookups),
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
	for i := range maxCachedKeys + 5000 {
		lookup(strconv.Itoa(i))
	}
	assert.LessOrEqual(t, count(), maxCachedKeys, "keys cached")
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
	assert.LessOrEqual(t, count(), maxCachedKeys, "keys cached")
}

// WithLimits' sets number the memory store's catalog by their IDs: clients
// of distinct limits under the same names, windows and algorithms share
// one set, but each quota of its own (a window, a name) adds one. The
// store numbers at most maxCataloged policies: a set beyond them is
// refused as by a full store, a client under it peeks a full quota, and
// the sets the store knows are served as before.
func TestLimitsCatalogBounded(t *testing.T) {
	const overflow = 100
	lookup := func(_ context.Context, key string) ([]Policy, error) {
		kind, n, _ := strings.Cut(key, ":") // "limit:7" or "window:7"
		i, err := strconv.Atoi(n)
		if kind == "limit" {
			return []Policy{{Name: "per-s", Limit: i + 1, Window: time.Second}}, err
		}
		return []Policy{{Name: "burst", Limit: 10, Window: time.Duration(i+1) * time.Millisecond}}, err
	}
	l, err := New(10, time.Minute, KeyByHeader("X-API-Key"), WithClock(fakeclock.New().Now),
		WithLimits(lookup, time.Hour), WithLookupTimeout(time.Minute))
	require.NoError(t, err)
	t.Cleanup(func() { l.Close() })
	s := l.store.(*memoryStore)
	catalogued := func() (ids, policies int) {
		s.catalog.mu.Lock()
		defer s.catalog.mu.Unlock()
		return len(s.catalog.byID), len(s.catalog.policies)
	}
	ctx := context.Background()

	for i := range 1000 {
		d := l.Allow(ctx, "limit:"+strconv.Itoa(i), 1)
		require.Equal(t, Serve, d.Outcome, "client of limit %d: %v", i+1, d.Err)
		require.Equal(t, i+1, d.Result.Limit, "client of limit %d", i+1)
	}
	ids, _ := catalogued()
	assert.Equal(t, 1, ids, "set IDs for 1,000 clients of distinct limits")

	served, refused := 0, 0
	for i := range maxCataloged + overflow {
		switch d := l.Allow(ctx, "window:"+strconv.Itoa(i), 1); {
		case d.Outcome == Serve:
			served++
		case d.Outcome == Fail && errors.Is(d.Err, errStoreFull):
			refused++
		default:
			t.Fatalf("client of window %d ms: %v, %v", i+1, d.Outcome, d.Err)
		}
	}
	_, policies := catalogued()
	assert.Equal(t, maxCataloged, policies, "policies numbered")
	assert.Equal(t, maxCataloged-1, served, "clients of windows of their own served")
	assert.Equal(t, overflow+1, refused, "clients of windows of their own refused")
	maps := 0
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.RLock()
		require.LessOrEqual(t, len(sh.m), maxCataloged, "shard %d: policies it has room for", i)
		for _, m := range sh.m {
			if m != nil {
				maps++
			}
		}
		sh.mu.RUnlock()
	}
	assert.LessOrEqual(t, maps, l.Stats().Keys, "maps in the shards: at most one per entry")

	last := "window:" + strconv.Itoa(maxCataloged+overflow-1)
	res, err := l.Peek(ctx, last)
	require.NoError(t, err, "Peek of a client the store could not number")
	assert.Equal(t, 10, res.Remaining, "Peek of a client the store could not number")
	require.NoError(t, l.Reset(ctx, last), "Reset of a client the store could not number")
	for _, key := range []string{"window:0", "window:" + strconv.Itoa(maxCataloged-2), "limit:7"} {
		d := l.Allow(ctx, key, 1)
		assert.Equal(t, Serve, d.Outcome, "%s again: %v", key, d.Err)
	}
	_, policies = catalogued()
	assert.Equal(t, maxCataloged, policies, "policies numbered at the end")
}
