package redisstore

import (
	"context"
	"hash/maphash"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/slidelog/ratelimit"
)

// Leases: how a server admits a busy client's requests without a round
// trip each, exactly.
//
// When a key is busy in this process (its requests of the last lease
// period say how busy), a Take asks Redis for a lease of that many slots
// beyond the request; Redis grants at most an eighth of what every policy
// has left after the request (none near the limit, where the behaviour is
// a round trip per request, as without leases) and records the slots at
// once, in the same call, so that every decision anywhere counts them
// from then on. While one request is out asking, the key's other requests
// in this process wait for its answer instead of asking too. This process
// then admits requests of the key from the lease, locally, until the
// slots are used up or the lease's time (at most maxLease) ends; a
// janitor gives the unused slots back then, or the next request of the
// key, first. Redis counts them until they are back: the key's requests
// that the lease cannot admit wait for the return meanwhile, within
// their deadlines, rather than be refused for want of them.
//
// Why no window ever holds more than the limit: a decision anywhere counts
// every slot granted before it, and a lease's slots are used after it was
// granted and before it ends. The sliding log records the slots at the
// lease's end, exactly maxLease after the grant (a set with a log takes no
// lease that must end sooner), so that each request is logged at or after
// the instant it was admitted: it counts for at least as long as it
// should, and its slot frees at most a lease's length late. A request
// admitted from a lease reports the grant as its At, and a Refund at that
// instant finds its slot maxLease later, from any process. GCRA counts
// them when granted, as a burst at that instant, which the bucket
// allowed; the counter and calendar periods count them in the window the
// lease ends in, which is the one they are used in. Giving back what was not used follows the
// refund rules: the log removes the lease's own instants, GCRA gives back
// what of their shares has not refilled, and nothing is given back after a
// Reset.
//
// The table is fixed in size, one slot per hash of key and set. Another
// key takes a slot only once its lease has ended, giving back what the
// lease left unused; until then the other key's requests go to Redis
// without a lease, as with leases off. A collision thus costs round
// trips, never slots.

// maxLease is the longest lease there is, and the one the store takes.
const maxLease = 50 * time.Millisecond

// leaseSlots is the size of the table of leases; maxLeaseSize the most
// slots one lease asks for.
const (
	leaseSlots   = 1024
	maxLeaseSize = 4096
)

type leases struct {
	seed  maphash.Seed
	slots [leaseSlots]lease
}

// lease is one key's lease in this process, and what sizes the next one.
type lease struct {
	mu  sync.Mutex
	key string
	set ratelimit.PolicySet
	// The current grant: left slots to admit from until until (local
	// monotonic ns); res is its Result, received at recv, granted at the
	// server's instant grant; marks say which slots to give back.
	left  int
	until int64
	recv  int64
	grant time.Time
	res   ratelimit.Result
	marks []int64
	// hits counts the Takes of the key in its lease periods: period
	// (local ns / maxLease) and the one before.
	hits, prev, period int64
	// asking is closed when the grant one request went to ask for comes
	// back: the key's other requests wait for it rather than each asking
	// Redis; nil when none is out. quiet is until when none is asked for
	// (local ns), after an answer that granted nothing.
	asking chan struct{}
	quiet  int64
	// reset is the ask a Reset of the key overtook: its grant may count
	// slots the Reset deleted, so it is given back, not admitted from.
	reset chan struct{}
	// returning is closed once the unused slots of the key's last grant
	// are back (or their return failed): until then Redis counts them,
	// and the key's requests that the lease cannot admit wait for it
	// rather than be refused for want of them. nil when none is on its
	// way.
	returning chan struct{}
}

func newLeases() *leases { return &leases{seed: maphash.MakeSeed()} }

// of returns the lease of key under set, locked; or nil, when the slot
// holds another key's lease that has not ended (a grant with time and
// slots left, or an ask out). It takes the slot from another key whose
// lease has ended, and when set's limits differ from those the lease was
// granted under, the grant ends: either way of returns the unused slots,
// for the caller to give back. now is the local clock (ns).
func (t *leases) of(key string, set ratelimit.PolicySet, now int64) (*lease, *grant) {
	id := set.ID()
	l := t.slot(key, id)
	l.mu.Lock()
	var stale *grant
	switch {
	case l.key != key || l.set.ID() != id:
		if l.asking != nil || l.left > 0 && now < l.until {
			l.mu.Unlock()
			return nil, nil
		}
		stale = l.expire()
		l.key, l.set = strings.Clone(key), set
		l.left, l.marks, l.hits, l.prev, l.period, l.asking, l.quiet = 0, nil, 0, 0, 0, nil, 0
		l.returning = nil // the other key's
	case !sameLimits(l.set, set):
		stale = l.expire()
		l.set = set
	}
	return l, stale
}

// slot returns the slot of the lease of key under the set of ID id.
func (t *leases) slot(key, id string) *lease {
	h := maphash.String(t.seed, key) ^ maphash.String(t.seed, id)*0x9e3779b97f4a7c15
	return &t.slots[h%leaseSlots]
}

// admit counts a Take of cost at now (local ns) and admits it from the
// lease if there is room. Otherwise it returns a channel to wait on when
// another request is out asking for a grant; or, for the caller to ask
// Redis with, the slots the key used in about a lease period (ask then
// says the caller is the one out asking, and done must follow), and an
// expired grant's unused slots to give back first. The caller holds l.mu.
func (l *lease) admit(cost int, now int64) (res ratelimit.Result, ok bool, wait <-chan struct{}, want int, ask chan struct{}, give *grant) {
	p := now / int64(maxLease)
	switch {
	case p == l.period:
	case p == l.period+1:
		l.prev, l.hits = l.hits, 0
	default:
		l.prev, l.hits = 0, 0
	}
	l.period = p
	l.hits += int64(cost)
	if l.left >= cost && now < l.until {
		l.left -= cost
		res = l.res
		res.Remaining += l.left
		res.Reset = max(0, res.Reset-time.Duration(now-l.recv))
		res.At = l.grant
		return res, true, nil, 0, nil, nil
	}
	if l.asking != nil {
		return res, false, l.asking, 0, nil, nil
	}
	if l.returning != nil {
		select {
		case <-l.returning:
			l.returning = nil
		default:
			return res, false, l.returning, 0, nil, nil
		}
	}
	if l.left > 0 && now >= l.until {
		give = l.expire()
	}
	if now < l.quiet || l.prev+l.hits < 2 {
		return res, false, nil, 0, nil, give // not busy, or nothing to be had
	}
	l.asking = make(chan struct{})
	return res, false, nil, int(min(l.prev+l.hits, maxLeaseSize)), l.asking, give
}

// done ends the ask of a grant: t, if Redis answered, with the request
// sent at sent; the key's waiting requests go on. It returns an earlier
// grant's unused slots to give back. The caller holds l.mu.
func (l *lease) done(ask chan struct{}, t *taken, sent, now int64) (give *grant) {
	close(ask)
	if l.asking == ask {
		l.asking = nil
	}
	overtaken := l.reset == ask
	if overtaken {
		l.reset = nil
	}
	switch {
	case t == nil:
	case t.slots > 0 && overtaken:
		// Redis ignores the return if the grant came before the Reset.
		give = &grant{key: l.key, set: l.set, unused: t.slots, at: t.res.At, marks: t.marks}
	case t.slots > 0:
		give = l.expire()
		l.left, l.until, l.recv, l.grant, l.res, l.marks = t.slots, sent+int64(t.lease), now, t.res.At, t.res, t.marks
	default:
		// No lease for a lease period, or, when only the nearness of a
		// window's end refused one, until that end.
		l.quiet = now + int64(maxLease)
		if t.lease > 0 {
			l.quiet = min(l.quiet, sent+int64(t.lease))
		}
	}
	return give
}

// grant is what a lease gives back when it ends: its unused slots, and
// what Redis needs to find them.
type grant struct {
	key    string
	set    ratelimit.PolicySet // the limits it was granted under
	unused int
	at     time.Time
	marks  []int64
	// back, if not nil, is the lease's returning: closed once given
	// back, or not.
	back chan struct{}
}

// expire ends the current grant and returns its unused slots, or nil,
// which the key's requests wait for (see lease.returning). The caller
// holds l.mu.
func (l *lease) expire() *grant {
	if l.left == 0 {
		return nil
	}
	g := &grant{key: l.key, set: l.set, unused: l.left, at: l.grant, marks: l.marks, back: make(chan struct{})}
	l.left, l.returning = 0, g.back
	return g
}

// returned tells the requests waiting for g that its return is over.
func (g *grant) returned() {
	if g.back != nil {
		close(g.back)
	}
}

// release gives back the unused slots of each of grants, skipping nil
// ones. The slots are the store's, not the request's that found them: they
// go back though ctx's caller has gone, since nothing else would return
// them; but within ctx's deadline, the request's own, so that a request
// that gives slots back still waits for Redis at most one timeout in all.
// A grant not given back by then is counted as a failed call: its slots
// stay counted in Redis until they leave their windows.
func (s *Store) release(ctx context.Context, grants ...*grant) {
	ctx, cancel := detached(ctx)
	defer cancel()
	for _, g := range grants {
		if g != nil {
			s.giveBack(ctx, g)
			g.returned()
		}
	}
}

// detached returns ctx without its cancellation but with its deadline, if
// it has one: a call made for the store, not for ctx's caller, that must
// still end when the caller's request would have.
func detached(ctx context.Context) (context.Context, context.CancelFunc) {
	dctx := context.WithoutCancel(ctx)
	if dl, ok := ctx.Deadline(); ok {
		return context.WithDeadline(dctx, dl)
	}
	return dctx, func() {}
}

// giveBack gives back g's unused slots in one call, counting a failure.
// It reports whether the call failed after waiting out the whole timeout,
// as every call does while Redis hangs.
func (s *Store) giveBack(ctx context.Context, g *grant) (hung bool) {
	args := append(s.args(g.set, 0, g.at.UnixMicro()), g.unused)
	for _, m := range g.marks {
		args = append(args, m)
	}
	start := time.Now()
	if _, err := s.fcall(ctx, fnRelease, false, keys(s.prefix, g.key, g.set, true), args); err != nil {
		s.fail(err)
		return time.Since(start) >= s.timeout
	}
	return false
}

// janitor gives back the unused slots of leases that have ended, until
// stop is closed, so that a key that went quiet does not keep them for
// its window; then those of every lease, since this process admits no
// more.
func (s *Store) janitor(stop <-chan struct{}, done chan<- struct{}) {
	defer close(done)
	t := time.NewTicker(maxLease)
	defer t.Stop()
	for {
		select {
		case <-stop:
			s.releaseEnded(true)
			return
		case <-t.C:
			s.releaseEnded(false)
		}
	}
}

// releaseEnded gives back the unused slots of the leases that have ended,
// or of all of them.
func (s *Store) releaseEnded(all bool) {
	var gs []*grant
	for i := range s.leases.slots {
		l := &s.leases.slots[i]
		l.mu.Lock()
		if l.left > 0 && (all || s.mono() >= l.until) {
			gs = append(gs, l.expire())
		}
		l.mu.Unlock()
	}
	s.giveBackAll(gs)
}

// sweepCalls is how many calls a sweep of the janitor makes at a time:
// enough that a sweep of many leases takes a few round trips, few enough
// to leave the client's pool (by default 10 connections a CPU) to
// requests.
const sweepCalls = 8

// giveBackAll gives back each of grants, sweepCalls calls at a time.
// Once Close has been called and a call has waited out the whole
// timeout, Redis is taken for hung and the grants not yet sent are
// dropped, their slots counted in Redis until they leave their windows,
// as those of a call that failed: each would wait as long, and a sweep
// that waited for them in turn would hold Close for a timeout a lease.
// Close's sweep, or one it finds under way, thus lasts about one timeout
// while Redis hangs; when it answers, every grant is given back. A sweep
// of an open store tries every grant, however long it takes, so that one
// slow call does not cost the others their slots.
func (s *Store) giveBackAll(grants []*grant) {
	var wg sync.WaitGroup
	var hung atomic.Bool
	calls := make(chan struct{}, sweepCalls)
	for i, g := range grants {
		calls <- struct{}{}
		if hung.Load() && s.closed.Load() {
			for _, g := range grants[i:] {
				g.returned() // dropped: no request waits for it
			}
			break
		}
		wg.Go(func() {
			defer func() { <-calls }()
			if s.giveBack(context.Background(), g) {
				hung.Store(true)
			}
			g.returned()
		})
	}
	wg.Wait()
}
