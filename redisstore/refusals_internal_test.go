package redisstore

import (
	"fmt"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/slidelog/ratelimit"
)

func testSet(t testing.TB, limit int) ratelimit.PolicySet {
	t.Helper()
	s, err := ratelimit.NewPolicySet(ratelimit.Policy{Name: "p", Limit: limit, Window: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// refused is a refusal as Redis would report it at the instant at.
func refused(at time.Time, retry, reset time.Duration) ratelimit.Result {
	return ratelimit.Result{Limit: 3, RetryAfter: retry, Reset: reset, Policy: "p", At: at}
}

// TestRefusalsAnswer: a remembered refusal answers only its key, set and
// cost, from when its reply was received until its validity, counted
// from when the request was sent, has passed; its waits shrink and its
// At grows with the clock from the reply on.
func TestRefusalsAnswer(t *testing.T) {
	c := newRefusals(16)
	set, other := testSet(t, 3), testSet(t, 4)
	at := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	res := refused(at, 10*time.Second, 8*time.Second)
	const sent, recv = int64(1000), int64(1000 + 5*time.Millisecond)
	c.put("k", set, 2, res, sent, recv, 8*time.Second, 0)
	clock := func(t int64) func() int64 { return func() int64 { return t } }
	tests := []struct {
		name string
		key  string
		set  ratelimit.PolicySet
		cost int
		now  int64
		ok   bool
		d    time.Duration // since the reply, for the waits and At
	}{
		{"the reply's instant", "k", set, 2, recv, true, 0},
		{"a second later", "k", set, 2, recv + int64(time.Second), true, time.Second},
		{"the last nanosecond", "k", set, 2, sent + int64(8*time.Second) - 1, true, 8*time.Second - 5*time.Millisecond - 1},
		{"validity passed", "k", set, 2, sent + int64(8*time.Second), false, 0},
		{"another cost", "k", set, 1, recv, false, 0},
		{"a larger cost", "k", set, 3, recv, false, 0},
		{"another key", "j", set, 2, recv, false, 0},
		{"another set", "k", other, 2, recv, false, 0},
	}
	for _, tt := range tests {
		got, ok, _ := c.get(tt.key, tt.set, tt.cost, clock(tt.now))
		want := ratelimit.Result{}
		if tt.ok {
			want = res
			want.RetryAfter -= tt.d
			want.Reset -= tt.d
			want.At = want.At.Add(tt.d)
		}
		if ok != tt.ok || got != want {
			t.Errorf("%s: %+v, %v; want %+v, %v", tt.name, got, ok, want, tt.ok)
		}
	}
	if h := c.hits.Load(); h != 3 {
		t.Errorf("hits %d, want 3", h)
	}
}

// TestRefusalsEvictTheFirstToExpire fills one bucket and wants a new
// entry to take the slot of the one that expires first, or of one that
// has expired, or of the same key and set.
func TestRefusalsEvictTheFirstToExpire(t *testing.T) {
	c := newRefusals(ways) // one bucket
	set := testSet(t, 3)
	res := refused(time.Unix(0, 0), time.Minute, time.Minute)
	const e = 0
	for i, until := range []time.Duration{40, 10, 30, 20} {
		c.put(fmt.Sprint("k", i), set, 1, res, 0, 0, until*time.Second, e)
	}
	has := func(key string, now time.Duration) bool {
		_, ok, _ := c.get(key, set, 1, func() int64 { return int64(now) })
		return ok
	}
	c.put("new", set, 1, res, 0, 0, time.Minute, e)
	for key, want := range map[string]bool{"k0": true, "k1": false, "k2": true, "k3": true, "new": true} {
		if got := has(key, 0); got != want {
			t.Errorf("after a fifth entry: %s remembered %v, want %v (k1 expires first)", key, got, want)
		}
	}
	// At 25s, k3 has expired: the next entry takes its slot, not the
	// first to expire of the live ones (k2).
	c.put("later", set, 1, res, int64(25*time.Second), int64(25*time.Second), time.Minute, e)
	if !has("k2", 25*time.Second) || !has("later", 25*time.Second) || !has("k0", 25*time.Second) {
		t.Error("an entry replaced a live one while an expired one was there")
	}
	// The same key and set replaces its own entry.
	c.put("k0", set, 1, res, int64(25*time.Second), int64(25*time.Second), 2*time.Minute, e)
	if !has("k2", 25*time.Second) || !has("later", 25*time.Second) || !has("new", 25*time.Second) {
		t.Error("a key's new refusal took another key's slot instead of its own")
	}
}

// TestRefusalsEpoch: a refusal decided before a Refund or Reset of its
// key (asked for in an older epoch of its bucket) is never answered,
// whether it is put before the invalidation or after; forget drops what
// is remembered.
func TestRefusalsEpoch(t *testing.T) {
	c := newRefusals(8)
	set := testSet(t, 3)
	res := refused(time.Unix(0, 0), time.Minute, time.Minute)
	now := func() int64 { return 0 }
	has := func() bool {
		_, ok, _ := c.get("k", set, 1, now)
		return ok
	}
	_, _, e := c.get("k", set, 1, now)
	c.invalidate("k", set)
	c.put("k", set, 1, res, 0, 0, time.Minute, e)
	if has() {
		t.Error("a refusal asked for before an invalidation, put after it, was answered")
	}
	// Not even stored, so that it costs nothing.
	if n := testing.AllocsPerRun(10, func() { c.put("k", set, 1, res, 0, 0, time.Minute, e) }); n != 0 {
		t.Errorf("a refusal asked for before an invalidation: %v allocations, want 0 (not stored)", n)
	}
	// Put first, then the invalidation (a put that checked the epoch just
	// before invalidate ran, storing its entry just after, leaves the
	// same state as this order).
	_, _, e = c.get("k", set, 1, now)
	c.put("k", set, 1, res, 0, 0, time.Minute, e)
	if !has() {
		t.Fatal("a refusal asked for and put in one epoch was not remembered")
	}
	_, ep := c.bucket("k", set.ID())
	ep.Add(1) // as invalidate does, before it forgets
	if has() {
		t.Error("a refusal of an older epoch was answered")
	}
	_, _, e = c.get("k", set, 1, now)
	c.put("k", set, 1, res, 0, 0, time.Minute, e)
	c.forget("k", set)
	if has() {
		t.Error("forget kept the key's refusal")
	}
}

// TestRefusalsSize: the cache holds exactly n slots, every one of them
// reachable, whether or not n is a multiple of the bucket size.
func TestRefusalsSize(t *testing.T) {
	for _, n := range []int{1, 3, 4, 5, 4096} {
		c := newRefusals(n)
		if len(c.slots) != n {
			t.Errorf("n=%d: %d slots", n, len(c.slots))
		}
		set := testSet(t, 3)
		res := refused(time.Unix(0, 0), time.Minute, time.Minute)
		for i := range 20 * n {
			c.put(fmt.Sprint("k", i), set, 1, res, 0, 0, time.Minute, 0)
		}
		for i := range c.slots {
			if c.slots[i].Load() == nil {
				t.Errorf("n=%d: slot %d never used after %d entries", n, i, 20*n)
				break
			}
		}
	}
}

// TestRefusalsKeepNoLargerString: an entry copies its key, so that it
// does not pin the string the key was cut from.
func TestRefusalsKeepNoLargerString(t *testing.T) {
	c := newRefusals(4)
	header := strings.Repeat("x", 1<<16) + "key"
	key := header[len(header)-3:]
	c.put(key, testSet(t, 3), 1, refused(time.Unix(0, 0), time.Minute, time.Minute), 0, 0, time.Minute, 0)
	for i := range c.slots {
		if e := c.slots[i].Load(); e != nil && unsafe.StringData(e.key) == unsafe.StringData(key) {
			t.Error("the entry shares the key's bytes")
		}
	}
}

// BenchmarkRefusalsMemory reports what one remembered refusal allocates,
// for a 16-byte client key (an "ip:" key, say): B/op is the cost of an
// entry in use, on top of the slot of 8 bytes every entry has.
func BenchmarkRefusalsMemory(b *testing.B) {
	c := newRefusals(b.N)
	set := testSet(b, 3)
	res := refused(time.Unix(0, 0), time.Minute, time.Minute)
	keys := make([]string, b.N)
	for i := range keys {
		keys[i] = fmt.Sprintf("ip:%013d", i)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		c.put(keys[i], set, 1, res, 0, 0, time.Minute, 0)
	}
}
