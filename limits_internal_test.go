package ratelimit

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
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
