package redisstore_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/slidelog/ratelimit"
	"github.com/slidelog/ratelimit/redisstore"
	"github.com/slidelog/ratelimit/storetest"
)

// outage fails every function call with errOutage while down is set, as
// a Redis that does not answer would, without stopping a server.
type outage struct{ down atomic.Bool }

var errOutage = errors.New("test outage")

func (o *outage) DialHook(next redis.DialHook) redis.DialHook { return next }

func (o *outage) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if n := cmd.Name(); o.down.Load() && (n == "fcall" || n == "fcall_ro") {
			cmd.SetErr(errOutage)
			return errOutage
		}
		return next(ctx, cmd)
	}
}

func (o *outage) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// TestRefundOfLocalDecisionsAtOneInstant: under FailLocal, requests the
// fallback admitted at one instant (the memory store admits the
// requests of a key that race at the instant of the first: here its
// clock stands still) were never counted in Redis, each of them; their
// Refunds once Redis is back must all go to the fallback. The table of
// local admissions kept one of them: the others' Refunds took back
// requests Redis did count, and the key went past its limit there.
func TestRefundOfLocalDecisionsAtOneInstant(t *testing.T) {
	for _, algo := range []ratelimit.Algorithm{counter, gcra, ratelimit.Daily} {
		t.Run(algo.String(), func(t *testing.T) {
			ctx := context.Background()
			c := sharedClient(t)
			o := &outage{}
			c.AddHook(o)
			clk := storetest.Clock{}
			clk.Set(time.Now())
			fb, err := ratelimit.NewMemoryStore(ratelimit.MemoryConfig{Clock: clk.Now})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { fb.Close() })
			st, _ := newStore(t, c, redisstore.WithFailurePolicy(redisstore.FailLocal), redisstore.WithFallback(fb),
				redisstore.WithRefusalCache(0))
			const limit, counted, local = 10, 6, 3
			window := time.Hour
			if algo == ratelimit.Daily {
				window = 0
			}
			pol := policySet(t, ratelimit.Policy{Name: "default", Limit: limit, Window: window, Algorithm: algo})
			for i := range counted {
				if res := takeOK(t, st, "k", pol, 1); !res.Allowed {
					t.Fatalf("take %d: %+v", i, res)
				}
			}
			o.down.Store(true) // the fallback decides, and Redis counts nothing
			var ats []time.Time
			for i := range local {
				res := takeOK(t, st, "k", pol, 1)
				if !res.Allowed {
					t.Fatalf("during the outage, take %d: %+v; want allowed by the fallback", i, res)
				}
				ats = append(ats, res.At)
			}
			if f := st.Failures(); f != local {
				t.Fatalf("%d failures, want %d", f, local)
			}
			o.down.Store(false)
			for _, at := range ats {
				if err := st.Refund(ctx, "k", pol, 1, at); err != nil {
					t.Fatal(err)
				}
			}
			allowed := 0
			for range limit {
				if takeOK(t, st, "k", pol, 1).Allowed {
					allowed++
				}
			}
			if allowed != limit-counted {
				t.Errorf("after refunding %d local decisions of one instant: Redis admitted %d more, want %d (it counted %d of %d)",
					local, allowed, limit-counted, counted, limit)
			}
		})
	}
}
