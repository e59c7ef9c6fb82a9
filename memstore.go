package ratelimit

import (
	"context"
	"errors"
	"hash/maphash"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// MemoryConfig configures a memory store. The zero MemoryConfig is an
// unbounded store on the monotonic clock.
type MemoryConfig struct {
	// MaxKeys bounds how many states the store tracks (one per key and
	// policy); 0 is no bound beyond idle states being swept. When a new
	// one arrives at a full store an idle one is dropped if there is
	// one; otherwise the Take fails with an error (503 from the
	// middleware), so that a flood of new keys cannot reset anyone's
	// count. The bound is kept per shard, so the store may refuse a
	// little before MaxKeys states in all, never after. Under a stream of
	// new keys a full shard looks for idle states once it has been asked
	// for a 32nd as many new keys as it holds since it last looked, or a
	// second later, so that sweeping costs a new key at most 32 state
	// visits, amortized: in between, a state gone idle may wait to be
	// dropped, and a new key be refused (or evict another) in its place.
	MaxKeys int
	// EvictLeastRecent makes a full store drop the least recently active
	// state it samples instead of refusing the new key: new keys are
	// served, but an evicted key's count starts over. MaxKeys stays a
	// bound, though: a key whose set has more policies than a shard may
	// hold (at least 16, or MaxKeys if less) is refused all the same.
	EvictLeastRecent bool
	// Clock, if set, is read instead of time.Now, for simulations that
	// replay traffic. A reading earlier than the latest a key's state
	// was decided at is taken as that latest, so that its counts never
	// see time step back; keys are held apart, so another key's Result.At
	// may be earlier.
	Clock func() time.Time
}

// NewMemoryStore returns a Store that keeps its counts in process memory,
// to share between limiters (each keeps its own counts: see Store) or to
// give another store a local fallback; New makes one itself unless given
// WithStore. The caller closes it, which stops its background sweep.
//
// Each key's state under each policy is an entry: a lock and the
// algorithm's state. Entries live in shards, each a map per set ID and
// policy behind one lock that is held only to find, add or drop an entry,
// and a decision holds only its entries' locks, so different keys never
// wait on each other. Memory stays bounded: what has left a window is
// dropped whenever an entry is used; a new entry that finds its shard
// doubled since it was last swept sweeps it, unless no entry there can be
// idle yet, so that sweeping keeps pace with any flood of new keys; a
// background sweep drops every idle entry once a minute; MaxKeys bounds
// the number of entries; and a shard keeps the maps of a set ID only
// while they hold an entry.
func NewMemoryStore(c MemoryConfig) (Store, error) {
	if c.MaxKeys < 0 {
		return nil, errors.New("ratelimit: MemoryConfig.MaxKeys: " + strconv.Itoa(c.MaxKeys) + ", want >= 0")
	}
	return newMemoryStore(c), nil
}

// memoryStore is the built-in Store.
type memoryStore struct {
	shards   []shard
	seed     maphash.Seed
	clock    func() time.Time // nil: the monotonic clock alone
	base     time.Time        // when the store was made (monotonic clock)
	epoch    int64            // base in Unix nanoseconds
	perShard int              // most entries a shard may hold; 0 for no bound
	evict    bool
	evicted  atomic.Uint64
	rejected atomic.Uint64
	stop     context.CancelFunc // stops the background sweep
	sweeping sync.WaitGroup
}

// A shard holds the entries of the keys its hash picks, grouped by their
// sets' IDs.
type shard struct {
	mu   sync.RWMutex
	sets map[string]*group // by set ID
	n    int               // entries in sets
	// peak is the most entries the shard has held since its maps were
	// made.
	peak int
	// dropped is the latest instant the shard forgot an entry at: that
	// of a Reset or an eviction, or the one a swept entry went idle at,
	// and never before the entry was last decided at. An entry made
	// since decides no earlier, so that nothing the forgotten one
	// counted bears on its decisions.
	dropped int64
	// counted is the latest instant a forgotten entry was decided at: an
	// entry made since takes no refund of a request counted until then,
	// which may have belonged to the forgotten one. Its own first
	// request, at dropped or later, may be taken back.
	counted int64
	// A new entry sweeps the shard once it holds sweepLen entries,
	// unless none can be idle yet: none is before sweepAt.
	sweepLen int
	sweepAt  int64
	// swept is when the shard was last swept, or the earliest reading
	// of a full shard since if the clock stepped back, and asked how many
	// new keys it has been asked to hold since (see makeRoom).
	swept int64
	asked int
}

// A group holds the entries of a shard's keys under the sets of one ID, a
// map per policy, so that a decision under several policies finds a key's
// entries under one lock. It lives while it holds an entry, so that the
// memory of the sets a store has counted under is bounded by its entries.
type group struct {
	// set is the first set of the ID the shard was given: its windows and
	// algorithms are those of every set of the ID, its limits not.
	set *policySet
	m   []map[string]*entry // by policy, then key
	n   int                 // entries in m
}

// entry is the lock and state of one key under one policy.
type entry struct {
	mu sync.Mutex
	// seen is the latest instant the entry was decided at, or dropped
	// once the entry is dropped from its shard: a request that found it
	// then looks again. A decision reads the clock before it waits for
	// the lock, to keep the reading out of the time the lock is held;
	// such readings can reach the lock out of order, so each is held at
	// seen, which was read before this request got the lock and so lies
	// within its span too.
	seen int64
	// since is the latest instant of requests a refund may not take back
	// from this entry: one before its first decision.
	since int64
	st    state
}

const (
	dropped    = math.MaxInt64 // the seen of a dropped entry
	minInstant = math.MinInt64
	// maxShards is how many shards a store has, fewer when MaxKeys is
	// small (see newMemoryStore).
	maxShards = 256
	// minPerShard is the least bound per shard that MaxKeys leads to,
	// when it allows it, so that per-shard bounds stay usable.
	minPerShard = 16
	// minSweepLen is the least a shard holds before a new entry sweeps it.
	minSweepLen = 32
	// evictSample is how many entries a full shard samples for a victim.
	evictSample = 8
	// sweepInterval is how often the background sweep runs.
	sweepInterval = time.Minute
	// sweepGap is how long a full shard waits after a sweep before it
	// sweeps again for room, unless it has been asked to hold enough new
	// keys since to pay for it at sweepVisits entry visits each (see
	// makeRoom).
	sweepGap    = time.Second
	sweepVisits = 32
)

func newMemoryStore(c MemoryConfig) *memoryStore {
	n := maxShards
	for c.MaxKeys > 0 && n > 1 && c.MaxKeys/n < minPerShard {
		n /= 2 // so that per-shard bounds stay usable
	}
	ctx, stop := context.WithCancel(context.Background())
	s := &memoryStore{shards: make([]shard, n), seed: maphash.MakeSeed(), clock: c.Clock, base: time.Now(),
		evict: c.EvictLeastRecent, stop: stop}
	s.epoch = s.base.UnixNano()
	if c.MaxKeys > 0 {
		s.perShard = max(1, c.MaxKeys/n)
	}
	for i := range s.shards {
		s.shards[i] = shard{sets: make(map[string]*group), dropped: minInstant, counted: minInstant, sweepLen: minSweepLen, sweepAt: math.MaxInt64, swept: minInstant}
	}
	s.sweeping.Go(func() { s.sweepLoop(ctx) })
	return s
}

// now reads the store's clock in Unix nanoseconds. With the default clock
// it reads only the monotonic clock, from the wall time the store was
// made, so that a step of the wall clock cannot move a window. An
// injected clock may step back: each entry holds its instants in order
// (see entry.seen).
func (s *memoryStore) now() int64 {
	if s.clock == nil {
		return s.epoch + int64(time.Since(s.base))
	}
	return s.clock().UnixNano()
}

func (s *memoryStore) shardOf(key string) *shard {
	return &s.shards[maphash.String(s.seed, key)&uint64(len(s.shards)-1)]
}

// Take implements Store.
func (s *memoryStore) Take(ctx context.Context, key string, set PolicySet, cost int) (Result, error) {
	return s.decide(ctx, key, set, cost, true)
}

// Peek implements Store. It may drop what has left a window, which no
// decision depends on, and changes nothing else.
func (s *memoryStore) Peek(ctx context.Context, key string, set PolicySet) (Result, error) {
	return s.decide(ctx, key, set, 1, false)
}

// decide answers whether cost requests of key fit under set, and records
// them if they do and record is set (a Take), making the key's entries
// if need be; without record (a Peek) it makes none and records nothing.
func (s *memoryStore) decide(ctx context.Context, key string, set PolicySet, cost int, record bool) (Result, error) {
	var buf [4]*entry
	es, now, made, err := s.lock(ctx, key, set, cost, record, buf[:0])
	if err != nil {
		return Result{}, err
	}
	v, i := takeAll(set.p, es, now, cost, record)
	unlockAll(es)
	if made && !v.ok {
		// The entries made for this request counted nothing: they are
		// idle now, sooner than add told the shard.
		s.idleFrom(key, now)
	}
	p := &set.p.policies[i]
	return Result{Allowed: v.ok, Limit: p.Limit, Remaining: v.remaining, RetryAfter: v.retry, Reset: v.reset,
		Policy: p.Name, Window: windowOf(p, now), At: time.Unix(0, now)}, nil
}

// takeAll takes cost requests under every policy of ps, from the states
// of es, recording them if record is set and every policy allows them, so
// that a request is counted in all of them or in none. It returns the
// verdict of the policy that binds tightest, with its index.
func takeAll(ps *policySet, es []*entry, now int64, cost int, record bool) (worst verdict, at int) {
	for i := 0; record && len(es) > 1 && i < len(es); i++ {
		record = ps.algos[i].take(&es[i].st, &ps.policies[i], now, cost, false).ok
	}
	for i, a := range ps.algos {
		if v := a.take(&es[i].st, &ps.policies[i], now, cost, record); i == 0 || v.tighter(worst) {
			worst, at = v, i
		}
	}
	return worst, at
}

// Refund implements Store.
func (s *memoryStore) Refund(ctx context.Context, key string, set PolicySet, cost int, at time.Time) error {
	t := at.UnixNano()
	var buf [4]*entry
	es, now, _, err := s.lock(ctx, key, set, cost, false, buf[:0])
	if err != nil {
		return err
	}
	idle := int64(math.MaxInt64)
	for i, a := range set.p.algos {
		p := &set.p.policies[i]
		if e := es[i]; t > e.since && t <= now && (isCalendar(p.Algorithm) || t > now-int64(p.Window)) {
			a.refund(&e.st, p, now, t, cost)
			idle = min(idle, a.idleAt(&e.st, p))
		}
	}
	unlockAll(es)
	if idle != math.MaxInt64 {
		s.idleFrom(key, idle) // sooner, maybe, than the shard's sweepAt says
	}
	return nil
}

// idleFrom tells key's shard that an entry of key goes idle at the
// instant at, which may be sooner than its sweepAt says, so that a full
// shard still finds it (see makeRoom). The caller holds no entry's lock:
// a shard's is taken once the entries' are let go, as everywhere.
func (s *memoryStore) idleFrom(key string, at int64) {
	sh := s.shardOf(key)
	sh.mu.Lock()
	sh.sweepAt = min(sh.sweepAt, at)
	sh.mu.Unlock()
}

// Reset implements Store: it drops the key's entries under set.
func (s *memoryStore) Reset(ctx context.Context, key string, set PolicySet) error {
	if err := check(ctx, set, 1); err != nil {
		return err
	}
	sh, now := s.shardOf(key), s.now()
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if g := sh.sets[set.p.id]; g != nil {
		for i, m := range g.m {
			if e := m[key]; e != nil {
				// Waiting here is safe: no goroutine holds an entry's
				// lock while it asks for a shard's.
				e.mu.Lock()
				sh.forget(g, i, key, e, max(now, e.seen))
				e.mu.Unlock()
			}
		}
	}
	return nil
}

// lock returns, appended to es, the entries of key under each policy of
// set, locked in the set's order, and the instant to decide at, for a
// call of cost; the caller unlocks them (es is the caller's, so that a
// buffer on its stack stays there). An entry that does not exist is made
// if create is set; otherwise it stands in as a fresh entry outside the
// store, as a key never seen (a Peek of one reports a full quota, and a
// Refund changes nothing).
//
// Entries are found and made under the shard's lock and locked after it
// is let go: no goroutine holds an entry's lock while it asks for a
// shard's, so a sweep, which holds the shard's lock, may wait for an
// entry's. An entry dropped meanwhile sends the request to look again.
// made reports whether the call added entries to the store.
func (s *memoryStore) lock(ctx context.Context, key string, set PolicySet, cost int, create bool, es []*entry) (_ []*entry, _ int64, made bool, _ error) {
	if err := check(ctx, set, cost); err != nil {
		return nil, 0, false, err
	}
	sh, read := s.shardOf(key), s.now()
	for {
		sh.mu.RLock()
		es = sh.entries(set.p, key, es[:0])
		sh.mu.RUnlock()
		if create && slices.Contains(es, nil) {
			if err := s.insert(sh, set.p, key, es, read); err != nil {
				return nil, 0, false, err
			}
			made = true
		}
		now := read
		for i := range es {
			if es[i] == nil {
				es[i] = &entry{seen: minInstant, st: newState()}
			}
			es[i].mu.Lock()
			now = max(now, es[i].seen) // dropped if the entry was dropped
		}
		if now != dropped {
			for _, e := range es {
				e.seen = now
			}
			return es, now, made, nil
		}
		unlockAll(es)
	}
}

// check returns why a call of cost under set, with ctx, counts nothing.
func check(ctx context.Context, set PolicySet, cost int) error {
	if err := set.CheckCost(cost); err != nil {
		return err
	}
	return ctx.Err()
}

func unlockAll(es []*entry) {
	for _, e := range es {
		e.mu.Unlock()
	}
}

// entries appends to es the entry of key under each policy of ps, nil for
// each it lacks. The caller holds sh.mu.
func (sh *shard) entries(ps *policySet, key string, es []*entry) []*entry {
	g := sh.sets[ps.id]
	for i := range ps.policies {
		var e *entry
		if g != nil {
			e = g.m[i][key]
		}
		es = append(es, e)
	}
	return es
}

// insert adds to sh the entries es lacks for key, one per policy of ps,
// sweeping the shard first when a sweep is due and making
// room if it is full. read is a reading of the clock taken before the
// shard's lock: a new entry decides at it, or at the instant the shard
// last forgot an entry if that is later.
func (s *memoryStore) insert(sh *shard, ps *policySet, key string, es []*entry, read int64) error {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if s.perShard > 0 && len(es) > s.perShard {
		// No room made could hold them all: drop nobody for the key.
		s.rejected.Add(1)
		return errStoreFull
	}
	sh.asked++
	if sh.n >= sh.sweepLen && read >= sh.sweepAt {
		s.sweep(sh, read)
	}
	// Room for every entry the key lacks before any is added, so that
	// making room for one never drops another, new and so idle (which
	// would send the request round again, for ever in a small shard), and
	// the key gets all of them or none. Making room may drop one of the
	// key's own entries: look again each time.
	for {
		missing := 0
		for _, e := range sh.entries(ps, key, es[:0]) {
			if e == nil {
				missing++
			}
		}
		if s.perShard == 0 || sh.n+missing <= s.perShard {
			break
		}
		if !s.makeRoom(sh, read) {
			s.rejected.Add(1)
			return errStoreFull
		}
	}
	key = strings.Clone(key) // never pins a larger string
	g := sh.sets[ps.id]
	if g == nil {
		g = &group{set: ps, m: make([]map[string]*entry, len(es))}
		for i := range g.m {
			g.m[i] = make(map[string]*entry)
		}
		sh.sets[ps.id] = g
	}
	for i, e := range es {
		if e == nil { // not there, nor made first by another request
			es[i] = sh.add(g, &ps.policies[i], i, key, read)
		}
	}
	return nil
}

// add makes the entry of key under p, the i-th policy of g, for a request
// that read the clock at read, and returns it. The caller holds sh.mu.
func (sh *shard) add(g *group, p *Policy, i int, key string, read int64) *entry {
	// since keeps a refund from reaching back past an entry of the key
	// the shard forgot: what it counted, at or before the instant it was
	// last decided at, is never taken from this one.
	at := max(read, sh.dropped)
	e := &entry{seen: at, since: max(read-1, sh.counted), st: newState()}
	g.m[i][key] = e
	g.n++
	sh.n++
	sh.peak = max(sh.peak, sh.n)
	// The entry counts its first request at the instant at or later, and
	// no state goes idle within a window of a request it counted, but
	// GCRA's within one emission interval, and a calendar count before
	// its period ends.
	idle := at + int64(p.Window)
	switch {
	case p.Algorithm == GCRA:
		idle = at + interval(p)
	case isCalendar(p.Algorithm):
		_, idle = period(p, at)
	}
	sh.sweepAt = min(sh.sweepAt, idle)
	return e
}

// forget drops e, the entry of key under the i-th policy of g, at the
// instant at: at least the latest it was decided at, so that an entry
// made later decides after what e counted, even where a clock stepping
// back would have it decide earlier, and takes no refund of it (see
// shard.counted). The caller holds sh.mu and e.mu.
func (sh *shard) forget(g *group, i int, key string, e *entry, at int64) {
	sh.counted = max(sh.counted, e.seen)
	e.seen = dropped
	delete(g.m[i], key)
	if g.n--; g.n == 0 {
		delete(sh.sets, g.set.id)
	}
	sh.n--
	sh.dropped = max(sh.dropped, at)
}

// sweep drops the idle entries of sh and notes when the next sweep is due:
// once the shard has doubled, and not before one of its entries can have
// gone idle. Sweeping a whole shard when it doubles costs a new entry at
// most two entry visits, amortized, and skipping sweeps that cannot find
// anything makes a flood of keys within one window cost none. The caller
// holds sh.mu.
func (s *memoryStore) sweep(sh *shard, now int64) {
	next := int64(math.MaxInt64)
	for _, g := range sh.sets {
		for i, m := range g.m {
			p, a := &g.set.policies[i], g.set.algos[i]
			for key, e := range m {
				e.mu.Lock()
				if at := a.idleAt(&e.st, p); at <= now {
					sh.forget(g, i, key, e, max(at, e.seen))
				} else {
					next = min(next, at)
				}
				e.mu.Unlock()
			}
		}
	}
	sh.sweepLen = max(2*sh.n, minSweepLen)
	sh.sweepAt = next
	sh.swept, sh.asked = now, 0
	if sh.peak >= 64 && sh.n <= sh.peak/4 {
		// Go maps keep the memory of their peak: give a shrunken shard
		// maps of their present size (maps.Clone may keep the capacity).
		sh.sets = resized(sh.sets)
		for _, g := range sh.sets {
			for i, m := range g.m {
				g.m[i] = resized(m)
			}
		}
		sh.peak = sh.n
	}
}

// resized returns a copy of m made for its present size.
func resized[V any](m map[string]V) map[string]V {
	r := make(map[string]V, len(m))
	maps.Copy(r, m)
	return r
}

// makeRoom frees a place in the full shard sh, reporting whether it could:
// the idle entries, if any can be idle yet (see sweep), else, when the
// store evicts, the least recently decided of a sample. The caller holds
// sh.mu.
//
// As a full store churns, a sweep may free only the entry that went idle
// since the last: so that a flood of new keys cannot make each of them
// cost a sweep of the shard, the shard sweeps for room once sweepGap has
// passed since it last swept, or sooner once it has been asked to hold
// enough new keys to pay for the sweep at sweepVisits entry visits each.
// Until then an idle entry may wait for its sweep, and a new key is
// refused or evicts another. An injected clock that steps back to before
// the last sweep counts the gap from its new readings, so that the shard
// still sweeps a gap later, not once the clock reads the sweep's instant.
func (s *memoryStore) makeRoom(sh *shard, now int64) bool {
	sh.swept = min(sh.swept, now)
	paid := sweepVisits*(sh.asked+1) >= sh.n || now >= sh.swept+int64(sweepGap)
	if n := sh.n; paid && now >= sh.sweepAt {
		if s.sweep(sh, now); sh.n < n {
			return true
		}
	}
	if !s.evict || sh.n == 0 {
		return false
	}
	victim, g, i, key := sh.leastRecent()
	victim.mu.Lock()
	sh.forget(g, i, key, victim, max(now, victim.seen))
	victim.mu.Unlock()
	s.evicted.Add(1)
	return true
}

// leastRecent returns the least recently decided of a sample of the
// entries of sh, with its group, its policy's index and its key: an equal
// share of evictSample entries, rounded up, from each of its maps, so that
// the entries of every policy are sampled, not those of one map alone; or,
// when evictSample maps or more hold entries, one entry from each of
// those counted (a set's maps are counted together, so that may be a
// few more than evictSample), so that a shard of many sets costs no more.
// The caller holds sh.mu, and sh holds an entry.
func (sh *shard) leastRecent() (victim *entry, g *group, i int, key string) {
	filled := 0 // maps holding an entry, counted a set at a time up to evictSample
	for _, g := range sh.sets {
		for _, m := range g.m {
			filled += min(len(m), 1)
		}
		if filled >= evictSample {
			break
		}
	}
	share := (evictSample + filled - 1) / filled
	left, oldest := share*filled, int64(math.MaxInt64) // evictSample or more
	for _, gr := range sh.sets {
		for n, m := range gr.m {
			taken := 0
			for k, e := range m {
				if taken == share || left == 0 {
					break
				}
				e.mu.Lock()
				if e.seen < oldest {
					victim, g, i, key, oldest = e, gr, n, k, e.seen
				}
				e.mu.Unlock()
				taken, left = taken+1, left-1
			}
		}
		if left == 0 {
			break
		}
	}
	return victim, g, i, key
}

// sweepLoop sweeps every shard once per sweepInterval, until Close.
func (s *memoryStore) sweepLoop(ctx context.Context) {
	t := time.NewTicker(sweepInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			for i := range s.shards {
				sh, now := &s.shards[i], s.now()
				sh.mu.Lock()
				s.sweep(sh, now)
				sh.mu.Unlock()
			}
		}
	}
}

// Stats reports the store's counters.
func (s *memoryStore) Stats() Stats {
	st := Stats{Evicted: s.evicted.Load(), Rejected: s.rejected.Load()}
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.RLock()
		st.Keys += sh.n
		sh.mu.RUnlock()
	}
	return st
}

// Close stops the background sweep and waits for it. It is safe to call
// more than once; the store still answers afterwards, without the
// background sweep.
func (s *memoryStore) Close() error {
	s.stop()
	s.sweeping.Wait()
	return nil
}
