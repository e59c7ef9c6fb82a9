package ratelimit

import (
	"context"
	"errors"
	"time"
)

// A Store keeps the counts behind a Limiter's decisions: the memory store
// (NewMemoryStore), package redisstore for a fleet of servers, or one of
// your own. Package storetest checks a Store against this contract.
//
// Take decides whether cost more requests for key fit every policy of set
// and, if and only if all of them allow it, records them in all of them;
// it never records a refused request. Deciding and recording are one
// atomic step per key and set. The store reads its own clock (a shared
// store a shared one), so every figure of a decision comes from one
// reading, Result.At.
//
// A count belongs to a key, a set and one of its policies: Takes share
// counts exactly when they pass the same key and sets with the same ID.
// Limiters, plans and sets that share a store never touch each other's
// counts, and the servers of a fleet that pass the same key and set share
// one count. A key's state for a policy may be forgotten once the policy
// could no longer refuse a request because of it.
//
// The Result describes the policy that binds tightest: if any refuses,
// the refusing one with the longest RetryAfter; otherwise the one with the
// fewest Remaining, ties going to the longer Reset, remaining ties to the
// first in the set's order. RetryAfter is, on a refusal, the exact
// time until a request of the same cost would fit if nothing else were
// counted meanwhile (never less); it is 0 when allowed.
//
// Peek reports the standing of key under set without counting anything or
// changing any state a later decision depends on: whether one more
// request would fit now (Allowed), how many would (Remaining), how long
// until one would if none does (RetryAfter), and Reset. A key the store
// has never seen has its full quota.
//
// Reset forgets the counts of key under set, so that its next request
// starts a full quota.
//
// Refund takes back cost requests that Take allowed for key under set at
// the instant at (their Result.At); set is the one given to that Take, as
// its limits were, since GCRA's share of the bucket depends on them (a
// Limiter refunds so). The sliding log removes those very
// instants, the window counter takes them off the count of the window
// they fell in, and GCRA gives back what of their share of the bucket has
// not refilled since at. A refund never reaches counts that came after a
// Reset or after the store forgot the key: requests counted at or before
// a Reset are never taken back from what the key counts after it. A
// refund of requests counted at the very instant the store forgot counts,
// by a Reset of this key or of another, or otherwise, may be ignored: they
// stay counted. Refunding requests that have left the window changes
// nothing, and so does a refund at an instant the store's clock has not
// reached; refunding more than was counted (a request refunded twice,
// say) leaves the key its full quota, never more.
//
// Take, Peek and Refund return an error, having changed nothing, for an
// empty set and for a cost CheckCost refuses. If ctx is done first, every
// method returns an error wrapping ctx.Err(); a store that waits on a
// network stops waiting when ctx is done, and a request it had already
// sent may then have taken effect, as one that timed out may.
//
// Close releases what the store holds (a memory store's background
// sweep). A Limiter closes only the store it made itself.
//
// Implementations must be safe for simultaneous use by multiple
// goroutines.
type Store interface {
	Take(ctx context.Context, key string, set PolicySet, cost int) (Result, error)
	Peek(ctx context.Context, key string, set PolicySet) (Result, error)
	Reset(ctx context.Context, key string, set PolicySet) error
	Refund(ctx context.Context, key string, set PolicySet, cost int, at time.Time) error
	Close() error
}

// Result is one decision of a Store.
type Result struct {
	// Allowed reports whether the request fits and was counted (for
	// Peek, whether one more request would fit now).
	Allowed bool
	// Limit is the quota of the policy reported: requests per window.
	Limit int
	// Remaining is how many more requests the window admits after this
	// one (for Peek, how many it admits now).
	Remaining int
	// RetryAfter is 0 when allowed; otherwise how long until the request
	// would fit: exact, where the headers round it up.
	RetryAfter time.Duration
	// Reset is how long until the quota of the policy reported grows
	// again; 0 when nothing is counted.
	Reset time.Duration
	// Policy names the policy reported: on a refusal the violated one
	// with the longest wait, otherwise the one with the fewest remaining.
	Policy string
	// Window is the window of the policy reported.
	Window time.Duration
	// At is the store's reading of its clock for the decision: the
	// instant an allowed request was counted at, which Refund takes.
	At time.Time
}

// Stats are a store's counters, for metrics. Limiter.Stats reports them
// for a store that keeps them (the memory store and redisstore do).
type Stats struct {
	// Keys is how many states the memory store tracks now: one per key
	// and policy.
	Keys int
	// Evicted counts the live states dropped to make room
	// (MemoryConfig.EvictLeastRecent).
	Evicted uint64
	// Rejected counts the new keys refused because the store was full.
	Rejected uint64
	// CachedRefusals counts the refusals redisstore answered from its
	// cache without a round trip to Redis.
	CachedRefusals uint64
}

// ErrInvalidCost is returned by a Store for a cost below 1 or above the
// least limit of a set: the first is meaningless, and the second could
// never fit, so waiting cannot help. The middleware refuses such a cost
// before asking the store (see WithCost).
var ErrInvalidCost = errors.New("ratelimit: invalid cost")

// Other errors of the stores of this package. The middleware answers a
// store's errors with its error handler (503 by default), never with
// their text.
var (
	// errStoreFull is returned for a new key when a memory store bounded
	// by MemoryConfig.MaxKeys is full of live keys and does not evict.
	errStoreFull = errors.New("ratelimit: store is full")
	// errEmptySet is returned for the zero PolicySet.
	errEmptySet = errors.New("ratelimit: empty policy set")
)
