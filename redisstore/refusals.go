package redisstore

import (
	"hash/maphash"
	"math"
	"strings"
	"sync/atomic"
	"time"

	"github.com/slidelog/ratelimit"
)

// refusals remembers refusals that Redis decided, so that a client who
// floods past its limit is answered without a round trip until its
// request could fit: see the package documentation for the rule and why
// it keeps the limiter exact.
//
// It is a set-associative cache of fixed size: an entry's hash picks a
// bucket of up to four slots, and a new entry takes an empty slot of its
// bucket, or else the one that expires first. Slots hold pointers to
// immutable entries, so that a lookup is a few atomic loads and no lock;
// two goroutines storing into one bucket at once may lose one of the
// entries, which costs only a round trip later.
type refusals struct {
	seed  maphash.Seed
	slots []atomic.Pointer[refusal]
	// epochs holds one counter per bucket, moved on by every Refund and
	// Reset of a key of the bucket: an entry counts only in the epoch it
	// was asked for in, so that a refusal Redis decided before a Refund,
	// whose reply arrives after it, is never answered, however the two
	// interleave.
	epochs []atomic.Uint64
	hits   atomic.Uint64
}

// ways is how many slots a bucket has.
const ways = 4

// A refusal is one remembered refusal: what Redis answered a request of
// cost for key under the set whose ID is set, valid until until in the
// bucket's epoch epoch. Times are the store's local clock (see
// Store.mono), in nanoseconds.
type refusal struct {
	key   string
	set   string
	ps    ratelimit.PolicySet // its limits: a change of them is another quota here
	cost  int
	epoch uint64
	until int64 // when the request was sent, plus the refusal's validity
	recv  int64 // when the reply was received
	res   ratelimit.Result
}

// is reports whether e, which may be nil, is a refusal for key under the
// set whose ID is set.
func (e *refusal) is(key, set string) bool {
	return e != nil && e.key == key && e.set == set
}

func newRefusals(n int) *refusals {
	return &refusals{
		seed:   maphash.MakeSeed(),
		slots:  make([]atomic.Pointer[refusal], n),
		epochs: make([]atomic.Uint64, (n+ways-1)/ways),
	}
}

// bucket returns the slots of the bucket of key and set, and its epoch.
func (c *refusals) bucket(key, set string) ([]atomic.Pointer[refusal], *atomic.Uint64) {
	h := maphash.String(c.seed, key) ^ maphash.String(c.seed, set)*0x9e3779b97f4a7c15
	b := int(h % uint64(len(c.epochs)))
	return c.slots[b*ways : min((b+1)*ways, len(c.slots))], &c.epochs[b]
}

// get returns the refusal remembered for a request of cost for key under
// set, as a fresh decision at the local instant now() would report it,
// if there is one still valid then. Otherwise it returns the epoch to
// pass to put. It reads the clock only after finding an entry, so that
// the reading is no earlier than the entry's reply.
func (c *refusals) get(key string, set ratelimit.PolicySet, cost int, now func() int64) (res ratelimit.Result, ok bool, epoch uint64) {
	id := set.ID()
	b, ep := c.bucket(key, id)
	epoch = ep.Load()
	for i := range b {
		e := b[i].Load()
		if !e.is(key, id) || e.cost != cost || e.epoch != epoch || !sameLimits(e.ps, set) {
			continue
		}
		t := now()
		if t >= e.until {
			break
		}
		// The wait shrinks from when the reply was received, so that it
		// is never shorter than the truth.
		d := time.Duration(max(t-e.recv, 0))
		res = e.res
		res.RetryAfter -= d
		res.Reset -= d
		res.At = res.At.Add(d)
		c.hits.Add(1)
		return res, true, epoch
	}
	return ratelimit.Result{}, false, epoch
}

// put remembers res, the refusal of a request of cost for key under set
// that was sent at sent and answered at recv, for valid from when it was
// sent: the server decided after that, so the entry never outlives the
// instant it describes. epoch is what get returned before the request
// was sent: a Refund or Reset since may have made the refusal stale.
func (c *refusals) put(key string, set ratelimit.PolicySet, cost int, res ratelimit.Result, sent, recv int64, valid time.Duration, epoch uint64) {
	id := set.ID()
	b, ep := c.bucket(key, id)
	if valid <= 0 || ep.Load() != epoch {
		return
	}
	// The slot to take: this key's, a free one, or else the one that
	// expires first (an expired one, if any).
	victim, first := 0, int64(math.MaxInt64)
	for i := range b {
		e := b[i].Load()
		if e == nil || e.is(key, id) {
			victim = i
			break
		}
		if e.until < first {
			victim, first = i, e.until
		}
	}
	// Copy the key, so that the entry does not pin a larger string it was
	// cut from (a whole header, say).
	b[victim].Store(&refusal{key: strings.Clone(key), set: id, ps: set, cost: cost, epoch: epoch, until: sent + int64(valid), recv: recv, res: res})
}

// forget drops whatever is remembered for key under set, after an
// admission that proves it stale.
func (c *refusals) forget(key string, set ratelimit.PolicySet) {
	id := set.ID()
	b, _ := c.bucket(key, id)
	for i := range b {
		if e := b[i].Load(); e.is(key, id) {
			b[i].CompareAndSwap(e, nil)
		}
	}
}

// invalidate makes what is remembered for key under set, and every
// refusal of its bucket decided before now, stale: for a Refund or Reset,
// once it has reached Redis.
func (c *refusals) invalidate(key string, set ratelimit.PolicySet) {
	_, ep := c.bucket(key, set.ID())
	ep.Add(1)
	c.forget(key, set)
}
