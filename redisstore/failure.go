package redisstore

import (
	"errors"
	"fmt"
	"hash/maphash"
	"sync/atomic"
	"time"

	"github.com/slidelog/ratelimit"
)

// FailurePolicy says what a Store does with a request when Redis fails or
// does not answer within the timeout. Every failure is counted first (see
// Store.Failures and WithFailureHook), whatever the policy.
type FailurePolicy int

const (
	// FailClosed returns an error wrapping ErrUnavailable. The middleware
	// answers it with its error handler, by default 503 Service
	// Unavailable with Retry-After: 1 (or lets the request through if the
	// limiter was built WithFailOpen).
	FailClosed FailurePolicy = iota
	// FailOpen allows the request without counting it anywhere. The
	// Result reports each policy at Limit - cost remaining and no Reset,
	// as if the key were fresh, and names the one with the least limit.
	// Protection is off while Redis is down, except for the refusals the
	// store remembers (WithRefusalCache), which it answers until they
	// expire. A Refund of a request admitted so takes back nothing.
	FailOpen
	// FailLocal decides with a store local to the process (a memory store
	// made by New, or the one given WithFallback), each limit divided by
	// the fleet size (WithFleetSize), so that that many servers admit at
	// most the limit in all while Redis is down. Requests decided locally
	// are not counted in Redis when it returns.
	FailLocal
)

// String returns the policy's name, as its constant spells it.
func (p FailurePolicy) String() string {
	switch p {
	case FailClosed:
		return "FailClosed"
	case FailOpen:
		return "FailOpen"
	case FailLocal:
		return "FailLocal"
	}
	return fmt.Sprintf("FailurePolicy(%d)", int(p))
}

// ErrUnavailable is wrapped by the error Take returns under FailClosed
// when Redis fails; errors.Is finds it, and the wrapped cause too.
var ErrUnavailable = errors.New("ratelimit: redisstore: redis unavailable")

// openResult is the Result of a request let through by FailOpen at the
// local instant at: nothing is known of the key's real standing, and
// nothing is counted, so each policy has its quota less the cost and no
// Reset, and the one reported is the tightest of those, as for any
// decision: the least limit, ties to the first.
func openResult(set ratelimit.PolicySet, cost int, at time.Time) ratelimit.Result {
	p := set.At(0)
	for i := range set.Len() {
		if set.At(i).Limit < p.Limit {
			p = set.At(i)
		}
	}
	res := result(p, at.UnixMicro(), true, int64(p.Limit-cost), 0, 0)
	res.At = at
	return res
}

// locals remembers the requests admitted without Redis, by FailOpen or
// the fallback of FailLocal, by key, set and instant, so that their
// Refund goes to the fallback, which counted them, or nowhere, and not
// to Redis, which did not: there it would take back a request Redis did
// count. A fixed table of hashes, each with how many requests were
// admitted at its instant (the fallback admits a key's racing requests at
// one instant), up to 255; a request whose entry another overwrote is
// refunded from Redis, as before.
type locals struct {
	seed  maphash.Seed
	slots [4096]atomic.Uint64
}

// admission is what locals knows a request by.
type admission struct {
	key, set string
	at       int64
}

// tagCount is the part of a slot that counts its admissions; the rest is
// the admissions' tag.
const tagCount = 0xff

// slot returns the slot of a request admitted at at, and its tag.
func (l *locals) slot(key string, set ratelimit.PolicySet, at time.Time) (*atomic.Uint64, uint64) {
	h := maphash.Comparable(l.seed, admission{key, set.ID(), at.UnixNano()})
	return &l.slots[h%uint64(len(l.slots))], h&^tagCount | (tagCount + 1) // 0 is an empty slot
}

// add notes a request admitted without Redis at at.
func (l *locals) add(key string, set ratelimit.PolicySet, at time.Time) {
	s, tag := l.slot(key, set, at)
	for {
		old, next := s.Load(), tag|1
		if old&^tagCount == tag {
			next = old + min(1, tagCount-old&tagCount) // up to 255
		}
		if s.CompareAndSwap(old, next) {
			return
		}
	}
}

// take reports whether a request admitted at at was admitted without
// Redis, and forgets it.
func (l *locals) take(key string, set ratelimit.PolicySet, at time.Time) bool {
	s, tag := l.slot(key, set, at)
	for {
		old := s.Load()
		if old&^tagCount != tag {
			return false
		}
		next := old - 1
		if next&tagCount == 0 {
			next = 0
		}
		if s.CompareAndSwap(old, next) {
			return true
		}
	}
}
