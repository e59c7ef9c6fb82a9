package redisstore_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/slidelog/ratelimit"
	"github.com/slidelog/ratelimit/storetest"
)

// commands records the names of the commands a client sends.
type commands struct {
	mu    sync.Mutex
	names []string
}

func (c *commands) DialHook(next redis.DialHook) redis.DialHook { return next }

func (c *commands) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		c.mu.Lock()
		c.names = append(c.names, cmd.Name())
		c.mu.Unlock()
		return next(ctx, cmd)
	}
}

func (c *commands) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// count returns how many of the commands recorded are named name.
func (c *commands) count(name string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, s := range c.names {
		if s == name {
			n++
		}
	}
	return n
}

// snapshot is every key under a prefix, with its value (DUMP) and its
// expiry as an instant (PEXPIRETIME), so that a later snapshot differs if
// anything was written, deleted, or had its TTL moved.
func snapshot(t *testing.T, c redis.UniversalClient, prefix string) map[string][2]string {
	t.Helper()
	ctx := context.Background()
	m := map[string][2]string{}
	for _, k := range scanKeys(t, c, prefix) {
		d, err := c.Dump(ctx, k).Result()
		if err != nil {
			t.Fatal(err)
		}
		m[k] = [2]string{d, c.Do(ctx, "PEXPIRETIME", k).String()}
	}
	return m
}

// TestPeekReadOnly peeks at keys of every algorithm in every state a Take
// would change (instants to evict, a counter to roll, a clock stepped
// back, a foreign value, a key never seen) and wants nothing changed in
// Redis: no key created, no value or expiry moved. Peek goes by
// FCALL_RO, so the server itself refuses a write.
func TestPeekReadOnly(t *testing.T) {
	c := sharedClient(t)
	rec := &commands{}
	c.AddHook(rec)
	ctx := context.Background()
	clk := storetest.Clock{}
	T := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	clk.Set(T)
	st, p := clockedStore(t, c, &clk)
	set := policySet(t,
		ratelimit.Policy{Name: "log", Limit: 3, Window: time.Minute},
		ratelimit.Policy{Name: "gcra", Limit: 3, Window: time.Minute, Algorithm: gcra},
		ratelimit.Policy{Name: "counter", Limit: 3, Window: time.Minute, Algorithm: counter},
	)
	if _, err := st.Peek(ctx, "unseen", set); err != nil {
		t.Fatal(err)
	}
	if ks := scanKeys(t, c, p); len(ks) != 0 {
		t.Fatalf("Peek of a key never seen created %q", ks)
	}
	takeOK(t, st, "k", set, 2)
	clk.Advance(30 * time.Second)
	takeOK(t, st, "k", set, 1)
	c.Set(ctx, stateKey(p, "foreign", set, "gcra"), "hello", time.Hour)
	c.RPush(ctx, stateKey(p, "foreign", set, "log"), "x")
	for i, at := range []time.Duration{31 * time.Second, 65 * time.Second, 100 * time.Second, -time.Hour} {
		clk.Set(T.Add(at))
		before := snapshot(t, c, p)
		for _, key := range []string{"k", "foreign"} {
			if _, err := st.Peek(ctx, key, set); err != nil {
				t.Fatalf("peek %d of %s: %v", i, key, err)
			}
		}
		if after := snapshot(t, c, p); !mapsEqual(before, after) {
			t.Errorf("peek %d (at +%v) changed Redis:\nbefore %v\nafter  %v", i, at, before, after)
		}
	}
	if n := rec.count("fcall_ro"); n == 0 {
		t.Error("no FCALL_RO sent: Peek did not run read-only")
	}
}

func mapsEqual(a, b map[string][2]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// TestResetDeletesTheSetsKeys: Reset deletes the keys of one client under
// one set, and no other, and leaves the marker of its instant (which
// keeps refunds of earlier requests from reaching later counts).
func TestResetDeletesTheSetsKeys(t *testing.T) {
	c := sharedClient(t)
	st, p := newStore(t, c)
	set := policySet(t,
		ratelimit.Policy{Name: "log", Limit: 3, Window: time.Minute},
		ratelimit.Policy{Name: "gcra", Limit: 3, Window: time.Minute, Algorithm: gcra},
		ratelimit.Policy{Name: "counter", Limit: 3, Window: time.Minute, Algorithm: counter},
	)
	other := policySet(t, ratelimit.Policy{Name: "log", Limit: 3, Window: time.Minute})
	takeOK(t, st, "k", set, 1)
	takeOK(t, st, "k", other, 1)
	takeOK(t, st, "j", set, 1)
	if err := st.Reset(context.Background(), "k", set); err != nil {
		t.Fatal(err)
	}
	got := scanKeys(t, c, p)
	marker := stateKey(p, "k", set, "")
	want := []string{stateKey(p, "k", other, "log"), marker[:len(marker)-1]}
	for i := range set.Len() {
		want = append(want, stateKey(p, "j", set, set.At(i).Name))
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("keys after Reset %q, want %q", got, want)
	}
}
