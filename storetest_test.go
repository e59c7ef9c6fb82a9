package ratelimit_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/slidelog/ratelimit"
	"github.com/slidelog/ratelimit/storetest"
)

// The memory store keeps the Store contract, bounded or not.
func TestMemoryStoreConformance(t *testing.T) {
	for _, c := range []struct {
		name string
		cfg  ratelimit.MemoryConfig
	}{
		{"unbounded", ratelimit.MemoryConfig{}},
		{"bounded", ratelimit.MemoryConfig{MaxKeys: 1 << 16}},
		{"evicting", ratelimit.MemoryConfig{MaxKeys: 1 << 16, EvictLeastRecent: true}},
	} {
		t.Run(c.name, func(t *testing.T) {
			storetest.Run(t, func(t *testing.T, clock *storetest.Clock) ratelimit.Store {
				cfg := c.cfg
				cfg.Clock = clock.Now
				s, err := ratelimit.NewMemoryStore(cfg)
				require.NoError(t, err)
				t.Cleanup(func() { s.Close() })
				return s
			})
		})
	}
}
