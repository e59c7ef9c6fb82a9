package ratelimit

import (
	"math/rand/v2"
	"sync/atomic"
	"time"
)

// The memory store's remembered refusals: how a client flooding over its
// limit is answered without taking its entry's lock.
//
// A refusal can be repeated exactly while nothing but time changes the
// entry. When a Take is refused and a request of cost 1 would be refused
// too, no Take can record anything in the entry until that cost-1 request
// would fit (after R1): every policy's state only loses what leaves its
// window, and the figures of the refusal only shift with the clock until
// the reported policy's Reset, when its remaining count may grow. So the
// refusal, with its Result, holds for the same key, set and cost until
// min(R1, Reset) from when it was decided: RetryAfter and Reset shrink by
// the time passed, and At grows by it. What else changes an entry (a
// refund, a reset, the entry being dropped) takes the entry's lock and
// forgets its refusal under it, as the refusal was published under it.
//
// Refusals live in a table of a fixed number of slots, indexed by the
// entry's hash, read with one atomic load: a flooding client's requests
// then share a cache line that nobody writes, so that they scale across
// cores. A refusal whose slot another takes is forgotten early, which
// costs only the fast path.

// refusalSlots is the size of a store's table: a power of two.
const refusalSlots = 4096

// refusal is a refusal that holds, as it was decided, until until.
type refusal struct {
	e     *entry
	cost  int64
	at    int64 // when it was decided, on the store's clock
	until int64 // when the entry may change by more than the clock
	res   Result
}

// result returns the refusal as decided again at now, before until.
func (r *refusal) result(now int64) Result {
	res, d := r.res, time.Duration(now-r.at)
	res.RetryAfter -= d
	if res.Reset > 0 {
		res.Reset -= d
	}
	res.At = time.Unix(0, now)
	return res
}

// refusals is a store's table of remembered refusals.
type refusals struct {
	slots [refusalSlots]atomic.Pointer[refusal]
	hits  stripedCounter
}

// find returns the refusal that holds for e's key and set at cost, or nil.
// It takes no lock: the caller has only the key, the set and its hash.
func (t *refusals) find(h uint64, key string, ps *policySet, cost int64) *refusal {
	r := t.slots[h&(refusalSlots-1)].Load()
	if r == nil || r.cost != cost || !r.e.is(key, ps) {
		return nil
	}
	return r
}

// publish remembers r in its entry's slot. The caller holds r.e.mu.
func (t *refusals) publish(h uint64, r *refusal) {
	t.slots[h&(refusalSlots-1)].Store(r)
}

// forget drops the refusal of e, whose hash is h, if its slot holds one.
// The caller holds e.mu.
func (t *refusals) forget(h uint64, e *entry) {
	slot := &t.slots[h&(refusalSlots-1)]
	if r := slot.Load(); r != nil && r.e == e {
		slot.CompareAndSwap(r, nil)
	}
}

// stripedCounter is a counter that goroutines on different cores add to
// without sharing a cache line, most of the time: each add picks one of
// its stripes at random.
type stripedCounter struct {
	stripes [16]struct {
		n atomic.Uint64
		_ [56]byte
	}
}

func (c *stripedCounter) add() { c.stripes[rand.Uint32()&15].n.Add(1) }

func (c *stripedCounter) load() uint64 {
	var n uint64
	for i := range c.stripes {
		n += c.stripes[i].n.Load()
	}
	return n
}
