package ratelimit_test

import (
	"testing"

	"github.com/slidelog/ratelimit"
	"github.com/slidelog/ratelimit/storetest"
)

// The memory store keeps the Store contract, bounded or not.
func TestMemoryStoreConformance(t *testing.T) {
	for _, c := range []struct {
		name string
		opts []ratelimit.Option
	}{
		{"unbounded", nil},
		{"bounded", []ratelimit.Option{ratelimit.WithMaxKeys(1<<16, ratelimit.RejectNewKeys)}},
	} {
		t.Run(c.name, func(t *testing.T) {
			storetest.Run(t, func(t *testing.T, clock *storetest.Clock) ratelimit.Store {
				s, err := ratelimit.NewMemoryStore(append(c.opts, ratelimit.WithClock(clock.Now))...)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { s.Close() })
				return s
			})
		})
	}
}
