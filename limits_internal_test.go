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
		ttl:    time.Minute, now: func() int64 { return now }, inflight: map[string]*cached{},
	}
	count := func() int {
		n := 0
		c.keys.Range(func(any, any) bool { n++; return true })
		return n
	}
	for i := range maxCachedKeys + 5000 {
		_, err := c.planOf(context.Background(), strconv.Itoa(i), func(error) {})
		require.NoError(t, err)
	}
	assert.LessOrEqual(t, count(), maxCachedKeys, "keys cached")
	assert.Equal(t, int64(count()), c.size.Load(), "the size the cache counts")
	// Once the answers have expired, new keys find room without losing
	// any fresh one.
	now += int64(time.Minute)
	for i := range 10 {
		_, err := c.planOf(context.Background(), "fresh-"+strconv.Itoa(i), func(error) {})
		require.NoError(t, err)
	}
	for i := range 10 {
		_, ok := c.keys.Load("fresh-" + strconv.Itoa(i))
		assert.True(t, ok, "fresh key %d cached", i)
	}
	assert.LessOrEqual(t, count(), maxCachedKeys, "keys cached")
}
