package ratelimit

import (
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Policy is one quota: at most Limit requests in any rolling Window, as
// Algorithm counts them. Name labels the policy in the RateLimit and
// RateLimit-Policy headers; it must be a token of letters, digits and
// "-_." so that it needs no quoting rules beyond the surrounding double
// quotes. The zero Algorithm is SlidingLog.
type Policy struct {
	Name      string
	Limit     int
	Window    time.Duration
	Algorithm Algorithm
}

// MaxWindow is the longest window a Policy may have: two years, well
// beyond any rate limit's, and within what the sliding log's compact ring
// can span.
const MaxWindow = 2 * 365 * 24 * time.Hour

// validate reports what is wrong with p, or nil.
func (p Policy) validate() error {
	var errs []error
	if p.Limit < 1 || p.Limit > math.MaxInt32 {
		errs = append(errs, fmt.Errorf("ratelimit: policy %q: limit %d, want 1 to %d", p.Name, p.Limit, math.MaxInt32))
	}
	if p.Window <= 0 || p.Window > MaxWindow {
		errs = append(errs, fmt.Errorf("ratelimit: policy %q: window %v, want more than 0 and at most two years", p.Name, p.Window))
	}
	if !validPolicyName(p.Name) {
		errs = append(errs, fmt.Errorf("ratelimit: policy name %q: want 1 to 64 characters of [A-Za-z0-9._-]", p.Name))
	}
	if p.Algorithm.impl() == nil {
		errs = append(errs, fmt.Errorf("ratelimit: policy %q: unknown algorithm %v", p.Name, p.Algorithm))
	}
	return errors.Join(errs...)
}

func validPolicyName(s string) bool {
	if len(s) == 0 || len(s) > 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_' || c == '.') {
			return false
		}
	}
	return true
}

// A PolicySet is the policies one request must fit, all at once: valid,
// with distinct names, kept in the order of their names. It is what a
// Store counts by, so two Takes share counts exactly when they pass the
// same key and equal sets (see Store). Make one with NewPolicySet; the
// Limiter makes its own. The zero PolicySet is empty, and a Store refuses
// it.
//
// A PolicySet is immutable and safe for simultaneous use.
type PolicySet struct{ p *policySet }

type policySet struct {
	policies []Policy
	id       string
	hash     uint64      // of id, mixed into the memory store's key hashes
	algos    []algorithm // policies[i].Algorithm.impl()
	maxLimit int         // the least limit, above which no cost fits
	minIdle  int64       // the least time a new key's state takes to go idle
}

// setSeed hashes set identities; the memory store mixes the result with
// its own seeded hash of the key.
var setSeed = maphash.MakeSeed()

// NewPolicySet returns the set of policies, or every reason they cannot
// be one, joined: no policies, an invalid policy, or two with one name.
func NewPolicySet(policies ...Policy) (PolicySet, error) {
	var errs []error
	if len(policies) == 0 {
		errs = append(errs, errors.New("ratelimit: no policies"))
	}
	ps := slices.Clone(policies)
	slices.SortStableFunc(ps, func(a, b Policy) int { return strings.Compare(a.Name, b.Name) })
	for i, p := range ps {
		errs = append(errs, p.validate())
		if i > 0 && ps[i-1].Name == p.Name {
			errs = append(errs, fmt.Errorf("ratelimit: policy name %q used twice in one set", p.Name))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return PolicySet{}, err
	}
	s := &policySet{policies: ps, maxLimit: math.MaxInt}
	var b strings.Builder
	for i, p := range ps {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(p.Name)
		b.WriteByte(':')
		b.WriteString(strconv.Itoa(p.Limit))
		b.WriteByte('/')
		b.WriteString(strconv.FormatInt(int64(p.Window), 10))
		b.WriteString("ns:")
		b.WriteString(p.Algorithm.String())
		a := p.Algorithm.impl()
		s.algos = append(s.algos, a)
		s.maxLimit = min(s.maxLimit, p.Limit)
		s.minIdle = max(s.minIdle, a.minIdle(int64(p.Limit), int64(p.Window)))
	}
	s.id = b.String()
	s.hash = maphash.String(setSeed, s.id)
	return PolicySet{s}, nil
}

// Len returns the number of policies in s.
func (s PolicySet) Len() int {
	if s.p == nil {
		return 0
	}
	return len(s.p.policies)
}

// At returns the i-th policy of s, in the order of their names.
func (s PolicySet) At(i int) Policy { return s.p.policies[i] }

// ID returns the identity of s, the same in every process and for equal
// sets however their policies were ordered: each policy's name, limit,
// window in nanoseconds and algorithm, as
// "burst:10/1000000000ns:SlidingLog,default:300/60000000000ns:GCRA". A
// shared store names a set's counts by it (or by a digest of it).
func (s PolicySet) ID() string {
	if s.p == nil {
		return ""
	}
	return s.p.id
}

// CheckCost reports why a Take of cost could never be counted under s:
// ErrInvalidCost below 1, ErrCostExceedsLimit above some policy's limit
// (no wait could make it fit), or an error for an empty set.
func (s PolicySet) CheckCost(cost int) error {
	switch {
	case s.p == nil:
		return ErrEmptyPolicySet
	case cost < 1:
		return ErrInvalidCost
	case cost > s.p.maxLimit:
		return ErrCostExceedsLimit
	}
	return nil
}

// A Store keeps the counts behind the limiter's decisions.
//
// Take decides whether cost more requests for key fit every policy of set
// and, if and only if all of them allow it, records them in all of them;
// it never records a refused request. Deciding and recording are one
// atomic step per key and set. The store reads its own clock (a shared
// store a shared one), so every figure of a decision comes from one
// reading.
//
// What is counted together: a count belongs to a key, a set and one of
// its policies. Takes share counts exactly when they pass the same key and
// equal sets (PolicySet.ID); two limiters, plans or policy sets that share
// a store never touch each other's counts, even where their sets have a
// policy in common, and the servers of a fleet that pass the same key and
// set share one count. A key's state for a set may be forgotten once no
// policy of the set could refuse a request because of it, that is, by the
// set's own windows, never another set's.
//
// The Result describes the policy that binds tightest, as Tightest picks
// it from one Result per policy. RetryAfter is, on a refusal, the exact
// time until a request of the same cost would fit if nothing else were
// counted meanwhile (never less); it is 0 when allowed.
//
// Take returns an error, having counted nothing, for an empty set
// (ErrEmptyPolicySet) and for a cost CheckCost refuses. If ctx is done
// before Take decides, it returns an error wrapping ctx.Err(); a store
// that waits on a network stops waiting when ctx is done, and a request
// it had already sent may then have been counted, as one that timed out
// may: an error from Take does not promise that nothing was counted.
//
// Implementations must be safe for simultaneous use by multiple
// goroutines. The memory store is the default; package redisstore shares
// counts across servers. Package storetest checks a Store against this
// contract.
type Store interface {
	Take(ctx context.Context, key string, set PolicySet, cost int) (Result, error)
}

// The optional abilities of a Store. A Store that has one implements its
// interface; the Limiter reports one it needs and its store lacks as an
// error that names the interface (errors.Is ErrUnsupported), never by
// ignoring the call. Each is atomic per key and set, as Take is.
type (
	// A Peeker reports the standing of key under set without counting
	// anything or changing any state a later decision depends on. The
	// Result says whether one more request would fit now (Allowed), how
	// many would (Remaining), how long until one would if none does
	// (RetryAfter), and Reset, as Take's do. A key the store has never
	// seen, or has forgotten, has its full quota; that is not an error.
	Peeker interface {
		Peek(ctx context.Context, key string, set PolicySet) (Result, error)
	}

	// A Resetter forgets the counts of key under set, so that its next
	// request starts a full quota. Resetting a key the store has never
	// seen is not an error.
	Resetter interface {
		Reset(ctx context.Context, key string, set PolicySet) error
	}

	// A Refunder takes back cost requests that Take allowed for key under
	// set at the instant at (Result.At): each policy forgets them as if
	// they had never been counted, as far as its algorithm can tell (the
	// sliding log exactly: it removes those very instants; GCRA gives
	// back their share of the bucket; the window counter takes them off
	// the count of the window they fell in). Refunding requests that have
	// left the window changes nothing and is not an error; refunding more
	// than Take counted is the caller's mistake, which the sliding log
	// ignores and the others cannot see.
	Refunder interface {
		Refund(ctx context.Context, key string, set PolicySet, cost int, at time.Time) error
	}
)

// ErrUnsupported is matched (errors.Is) by the error a Limiter returns
// when its store lacks an optional ability a call or option needs.
var ErrUnsupported = errors.New("ratelimit: the store does not support this")

// Tightest returns, of one Result per policy of a set (in the set's
// order), the one a Store reports: if any refuses, the refusing one with
// the longest RetryAfter; otherwise the one with the fewest Remaining,
// ties going to the longer Reset; remaining ties to the first. It returns
// the zero Result for none.
func Tightest(results []Result) Result {
	best := -1
	for i := range results {
		if best < 0 || tighter(&results[i], &results[best]) {
			best = i
		}
	}
	if best < 0 {
		return Result{}
	}
	return results[best]
}

// tighter reports whether a binds tighter than b, as Tightest orders them.
func tighter(a, b *Result) bool {
	va, vb := verdictOf(a), verdictOf(b)
	return va.tighter(&vb)
}

// Errors a Store may return. The middleware answers a store's errors with
// its error handler (503 by default), never with their text; it refuses a
// cost CheckCost refuses before asking the store.
var (
	// ErrStoreFull is returned when a store bounded by WithMaxKeys is full
	// of live keys and configured to reject new ones.
	ErrStoreFull = errors.New("ratelimit: store is full")

	// ErrCostExceedsLimit is returned for a cost larger than some policy's
	// limit: such a request could never be allowed, so waiting cannot help.
	ErrCostExceedsLimit = errors.New("ratelimit: cost exceeds the limit")

	// ErrInvalidCost is returned for a cost below 1.
	ErrInvalidCost = errors.New("ratelimit: cost must be at least 1")

	// ErrEmptyPolicySet is returned for a Take with the zero PolicySet.
	ErrEmptyPolicySet = errors.New("ratelimit: empty policy set")
)
