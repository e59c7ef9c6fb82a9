package ratelimit

import (
	"context"
	"errors"
	"hash/maphash"
	"math"
	"math/bits"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// MemoryStore is the built-in Store: counts in process memory.
//
// Each key and policy set has an entry: its lock, its states (one per
// policy) and its identity. Entries live in shards, each a map behind its
// own lock that is held only to find, add or drop an entry; a decision
// holds just its entry's lock, so different keys never wait on each
// other. A shard's map is keyed by a 64-bit hash of the key, seeded per
// store and mixed with the set's, which also picks the shard; each entry
// keeps its key and set, so that a lookup is exact while the map itself
// never reads a key's bytes. A client refused again and again is answered
// from its remembered refusal, without its entry's lock (see
// refusals.go), so that a flood from one key does not serialize.
//
// Memory stays bounded three ways: expired instants are dropped whenever
// an entry is used; a new entry that finds its shard doubled since the
// shard was last swept sweeps it, if any entry there can be idle by then,
// so sweeping keeps pace with any flood of new keys; and a background
// sweep drops every idle entry once per sweep interval and gives shrunken
// shards fresh maps (Go maps never return memory on their own). An entry
// is idle when its own set's policies can no longer refuse a request
// because of it. WithMaxKeys bounds the number of entries.
//
// MemoryStore is safe for simultaneous use by multiple goroutines. Close
// stops its background sweep.
type MemoryStore struct {
	shards    []shard
	shardMask uint64
	seed      maphash.Seed
	clock     func() time.Time // nil: the monotonic clock alone
	base      time.Time        // when the store was made (monotonic clock)
	epoch     int64            // base in Unix nanoseconds
	latest    atomic.Int64     // latest reading of an injected clock
	perShard  int              // most entries a shard may hold; 0 for no bound
	overflow  Overflow

	evicted  atomic.Uint64
	rejected atomic.Uint64
	refused  refusals

	stop      chan struct{}
	done      chan struct{}
	closeOnce sync.Once
}

var (
	_ Store    = (*MemoryStore)(nil)
	_ Peeker   = (*MemoryStore)(nil)
	_ Resetter = (*MemoryStore)(nil)
	_ Refunder = (*MemoryStore)(nil)
)

// A shard is 64 bytes, so that shards do not share cache lines.
type shard struct {
	mu sync.RWMutex
	m  map[uint64]*entry // by the entry's hash
	// other holds the entries whose hash a different entry in m already
	// has. With a random 64-bit seed that takes billions of entries in
	// one shard to happen once; it keeps lookups exact when it does.
	other map[identity]*entry
	// rest holds, for entries of sets of several policies, the states of
	// all but the first, so that the usual entry of one policy pays
	// nothing for them. An entry's states are made with it.
	rest map[*entry][]state
	peak int32 // most entries m has held since it was made
	// A new entry sweeps the shard once it holds sweepLen entries, unless
	// none can be idle yet: none is before sweepAt.
	sweepLen int32
	sweepAt  int64
}

// identity is what an entry counts for.
type identity struct{ key, set string }

// entry is the lock and state of one key under one policy set. The lock
// guards the entry's states, first and any in the shard's rest, and seen.
type entry struct {
	mu    sync.Mutex
	first state
	// seen is the latest instant the entry was decided at (see at), or
	// dropped once the entry is dropped from its shard: a request that
	// found it then looks again.
	seen int64
	key  string
	set  *policySet
}

// dropped is the seen of an entry dropped from its shard.
const dropped = math.MaxInt64

// at returns the instant to decide e at, given a reading of the store's
// clock taken before e was locked, and notes it. Take reads the clock
// before it waits for the lock, to keep the reading out of the time the
// lock is held, so readings may reach the lock out of order: each is held
// at the latest instant e was decided at. That instant was read before
// this request got the lock, so it lies within the request's span, and e's
// instants stay in order, as every algorithm needs. The caller holds e's
// lock.
func (e *entry) at(now int64) int64 {
	now = max(now, e.seen)
	e.seen = now
	return now
}

// is reports whether e counts for key under set.
func (e *entry) is(key string, set *policySet) bool {
	return e.key == key && (e.set == set || e.set.id == set.id)
}

// find returns the entry of key and set, whose hash is h, or nil. The
// caller holds sh.mu.
func (sh *shard) find(h uint64, key string, set *policySet) *entry {
	if e := sh.m[h]; e != nil && e.is(key, set) {
		return e
	}
	if len(sh.other) > 0 {
		return sh.other[identity{key, set.id}]
	}
	return nil
}

// add adds e, whose hash is h, to sh. The caller holds sh.mu.
func (sh *shard) add(h uint64, e *entry) {
	if _, taken := sh.m[h]; !taken {
		sh.m[h] = e
		sh.peak = max(sh.peak, int32(len(sh.m)))
		return
	}
	if sh.other == nil {
		sh.other = make(map[identity]*entry)
	}
	sh.other[identity{e.key, e.set.id}] = e
}

// len returns how many entries sh holds. The caller holds sh.mu.
func (sh *shard) len() int { return len(sh.m) + len(sh.other) }

// states are one entry's states, one per policy of its set.
type states struct {
	first *state
	rest  []state
}

func (st states) at(i int) *state {
	if i == 0 {
		return st.first
	}
	return &st.rest[i-1]
}

// Overflow says what a store bounded by WithMaxKeys does with a new key
// when it is full and no tracked key is idle.
type Overflow int

const (
	// RejectNewKeys answers requests from new keys with ErrStoreFull (503
	// from the middleware) until room frees up. Tracked keys keep their
	// exact counts, so a flood of new keys cannot reset anyone's quota.
	RejectNewKeys Overflow = iota
	// EvictLeastRecent drops the least recently active key (sampled, as in
	// Redis's approximate LRU) to make room: new keys are always served,
	// but an evicted key's count starts over.
	EvictLeastRecent
)

// sweepInterval is how often the background sweep runs.
const sweepInterval = time.Minute

const (
	// maxShards is how many shards a store has, fewer when WithMaxKeys is
	// small (see newMemoryStore).
	maxShards = 256
	// minPerShard is the least bound per shard that WithMaxKeys leads to,
	// when it allows it, so that per-shard bounds stay usable.
	minPerShard = 16
	// minSweepLen is the least a shard holds before a new entry sweeps it.
	minSweepLen = 32
	// evictSample is how many entries a full shard samples for a victim.
	evictSample = 8
	// pollLimit is how many times lockPolling tries a held entry lock
	// before it waits for it: enough to outlast a decision on another
	// core, few enough that a lock a sweep holds costs a poller little.
	pollLimit = 64
)

// memoryConfig is what NewMemoryStore and New accept for the memory store.
type memoryConfig struct {
	maxKeys  int
	overflow Overflow
	clock    func() time.Time // nil: time.Now, read as the monotonic clock
}

func (c memoryConfig) validate() error {
	if c.overflow != RejectNewKeys && c.overflow != EvictLeastRecent {
		return errors.New("ratelimit: WithMaxKeys: unknown overflow policy")
	}
	return nil
}

// NewMemoryStore returns a memory store configured by the memory-store
// options among opts (WithMaxKeys, WithClock); any other option is an
// error. New makes one itself unless given WithStore: call this to share
// one store between limiters (each keeps its own counts: see Store), or to
// give another store a local fallback.
func NewMemoryStore(opts ...Option) (*MemoryStore, error) {
	c := defaultConfig()
	var errs []error
	for _, o := range opts {
		if o.apply == nil {
			errs = append(errs, errors.New("ratelimit: zero Option"))
			continue
		}
		if !o.memory {
			errs = append(errs, errors.New("ratelimit: NewMemoryStore: "+o.name+" is not a memory-store option"))
			continue
		}
		o.apply(&c)
	}
	errs = append(errs, c.errs...)
	if err := errors.Join(append(errs, c.mem.validate())...); err != nil {
		return nil, err
	}
	return newMemoryStore(c.mem), nil
}

func newMemoryStore(c memoryConfig) *MemoryStore {
	n := maxShards
	if c.maxKeys > 0 {
		// The largest power of two that leaves each shard minPerShard
		// entries, if there is one; else a single shard.
		n = min(n, 1<<max(0, bits.Len(uint(c.maxKeys/minPerShard))-1))
	}
	s := &MemoryStore{
		shards:    make([]shard, n),
		shardMask: uint64(n - 1),
		seed:      maphash.MakeSeed(),
		clock:     c.clock,
		overflow:  c.overflow,
		stop:      make(chan struct{}),
		done:      make(chan struct{}),
	}
	s.base = time.Now()
	s.epoch = s.base.UnixNano()
	s.latest.Store(math.MinInt64)
	if c.maxKeys > 0 {
		s.perShard = max(1, c.maxKeys/n)
	}
	for i := range s.shards {
		s.shards[i].m = make(map[uint64]*entry)
		s.shards[i].sweepLen = minSweepLen
	}
	go s.sweepLoop()
	return s
}

// now reads the store's clock in Unix nanoseconds, the scale of every
// instant the store keeps (fixed windows are aligned to it, as a shared
// store aligns them). With the default clock it reads only the monotonic
// clock, from the wall time the store was made: time.Since skips the
// wall-clock read that time.Now makes and Sub ignores, and the wall clock
// stepping cannot move a window.
//
// An injected clock may step back; its readings are held at the latest
// one, so that the store's instants never go back, across entries as
// within one (see entry.at). The monotonic clock needs no such care.
func (s *MemoryStore) now() int64 {
	if s.clock == nil {
		return s.epoch + int64(time.Since(s.base))
	}
	t := s.clock().UnixNano()
	for {
		last := s.latest.Load()
		if t <= last {
			return last
		}
		if s.latest.CompareAndSwap(last, t) {
			return t
		}
	}
}

// Take implements Store.
func (s *MemoryStore) Take(ctx context.Context, key string, set PolicySet, cost int) (Result, error) {
	if err := set.CheckCost(cost); err != nil {
		return Result{}, err
	}
	if err := ctx.Err(); err != nil {
		return Result{}, err
	}
	ps := set.p
	h := s.hash(key, ps)
	read := s.now()
	if r := s.refused.find(h, key, ps, int64(cost)); r != nil && read < r.until {
		s.refused.hits.add()
		// A reading taken before the refusal was decided is held at
		// its instant, which is within this request's span too.
		return r.result(max(read, r.at)), nil
	}
	sh := &s.shards[h&s.shardMask]
	for {
		e, st := s.lockedEntry(sh, h, key, ps)
		var now int64
		if e == nil {
			var err error
			e, st, now, err = s.insert(sh, h, key, ps)
			if err != nil {
				return Result{}, err
			}
			if e == nil {
				continue // another request added the entry first
			}
		} else {
			now = e.at(read)
		}
		v, i, until := decide(ps, st, now, int64(cost))
		if until > now {
			res := result(&ps.policies[i], v, now)
			s.refused.publish(h, &refusal{e: e, cost: int64(cost), at: now, until: until, res: res})
			e.mu.Unlock()
			return res, nil
		}
		e.mu.Unlock()
		return result(&ps.policies[i], v, now), nil
	}
}

// lockedEntry returns the live entry of key and ps in sh, whose hash is
// h, locked, and its states; or nil if sh holds none. It locks the entry
// the hash leads to before it reads the entry's identity, since both are
// on the cache line the lock is: the line of a busy key then moves
// between cores once a request, not twice.
func (s *MemoryStore) lockedEntry(sh *shard, h uint64, key string, ps *policySet) (*entry, states) {
	for {
		sh.mu.RLock()
		e := sh.m[h]
		if e == nil && len(sh.other) > 0 {
			e = sh.other[identity{key, ps.id}]
		}
		st := statesOf(sh, e, ps)
		sh.mu.RUnlock()
		if e == nil {
			return nil, states{}
		}
		lockPolling(&e.mu)
		if !e.is(key, ps) {
			// Another key holds the hash: ours, if any, is beside the map.
			e.mu.Unlock()
			sh.mu.RLock()
			e = sh.other[identity{key, ps.id}]
			st = statesOf(sh, e, ps)
			sh.mu.RUnlock()
			if e == nil {
				return nil, states{}
			}
			e.mu.Lock()
		}
		if e.seen != dropped {
			return e, st
		}
		e.mu.Unlock()
	}
}

// lockPolling locks mu, polling it first while it is held. A decision
// holds its entry's lock for less time than sync.Mutex, finding the lock
// held, pauses between looks, so requests for one busy key would queue
// behind one another's pauses; TryLock only reads a held lock, and takes
// it as soon as it is free. A lock held longer (by a sweep) sends the
// request on to Lock after pollLimit looks.
func lockPolling(mu *sync.Mutex) {
	for range pollLimit {
		if mu.TryLock() {
			return
		}
	}
	mu.Lock()
}

// statesOf returns the states of e, taken to be an entry of ps, without
// reading e. The caller holds sh.mu.
func statesOf(sh *shard, e *entry, ps *policySet) states {
	if e == nil {
		return states{}
	}
	st := states{first: &e.first}
	if len(ps.policies) > 1 {
		st.rest = sh.rest[e]
	}
	return st
}

// Peek implements Peeker.
func (s *MemoryStore) Peek(ctx context.Context, key string, set PolicySet) (Result, error) {
	if set.p == nil {
		return Result{}, ErrEmptyPolicySet
	}
	if err := ctx.Err(); err != nil {
		return Result{}, err
	}
	ps := set.p
	h := s.hash(key, ps)
	var rs [4]Result
	results := rs[:0]
	e, st := s.lockedEntry(&s.shards[h&s.shardMask], h, key, ps)
	if e == nil {
		now := s.now()
		for i := range ps.policies {
			p := &ps.policies[i]
			results = append(results, result(p, verdict{ok: true, remaining: int64(p.Limit)}, now))
		}
		return Tightest(results), nil
	}
	defer e.mu.Unlock()
	// Read under the lock, the clock is no earlier than e.seen: no
	// clamp is needed, and Peek writes nothing.
	now := s.now()
	for i, a := range ps.algos {
		p := &ps.policies[i]
		results = append(results, result(p, a.peek(st.at(i), int64(p.Limit), int64(p.Window), now), now))
	}
	return Tightest(results), nil
}

// Reset implements Resetter: it drops the key's entry for set.
func (s *MemoryStore) Reset(ctx context.Context, key string, set PolicySet) error {
	if set.p == nil {
		return ErrEmptyPolicySet
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	h := s.hash(key, set.p)
	sh := &s.shards[h&s.shardMask]
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if e := sh.find(h, key, set.p); e != nil {
		e.mu.Lock()
		s.drop(sh, h, e)
		e.mu.Unlock()
	}
	return nil
}

// Refund implements Refunder.
func (s *MemoryStore) Refund(ctx context.Context, key string, set PolicySet, cost int, at time.Time) error {
	if err := set.CheckCost(cost); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	ps := set.p
	h := s.hash(key, ps)
	e, st := s.lockedEntry(&s.shards[h&s.shardMask], h, key, ps)
	if e == nil {
		return nil
	}
	defer e.mu.Unlock()
	s.refused.forget(h, e)
	now, t := s.now(), at.UnixNano() // under the lock: no earlier than e.seen
	for i, a := range ps.algos {
		p := &ps.policies[i]
		if t > now-int64(p.Window) && t <= now {
			a.refund(st.at(i), int64(p.Limit), int64(p.Window), now, t, int64(cost))
		}
	}
	return nil
}

// decide checks every policy of ps, then records in all of them or none,
// and returns the verdict of the policy that binds tightest, with the
// policy's index. For a refusal that may be remembered (see refusals.go)
// it also returns until when; otherwise until is at most now. The caller
// holds the entry's lock, and makes the Result once it has let go of it:
// a hot key's lock is held for as little as the decision needs.
func decide(ps *policySet, st states, now, cost int64) (worst verdict, at int, until int64) {
	refused := false
	for i, a := range ps.algos {
		p := &ps.policies[i]
		if v := a.decide(st.at(i), int64(p.Limit), int64(p.Window), now, cost); !v.ok {
			if !refused || v.tighter(&worst) {
				worst, at = v, i
			}
			refused = true
		}
	}
	if refused {
		return worst, at, now + holds(ps, st, now, cost, &worst)
	}
	for i, a := range ps.algos {
		p := &ps.policies[i]
		if v := a.record(st.at(i), int64(p.Limit), int64(p.Window), now, cost); i == 0 || v.tighter(&worst) {
			worst, at = v, i
		}
	}
	return worst, at, now
}

// holds returns how long the refusal v of cost at now holds as it is, or
// 0 if it may not be remembered: unless a request of cost 1 is refused
// too, smaller requests may be counted meanwhile. The policies' states
// have been brought to now.
func holds(ps *policySet, st states, now, cost int64, v *verdict) int64 {
	r1 := v.retry
	if cost > 1 {
		r1 = 0
		for i, a := range ps.algos {
			p := &ps.policies[i]
			if v := a.decide(st.at(i), int64(p.Limit), int64(p.Window), now, 1); !v.ok {
				r1 = max(r1, v.retry)
			}
		}
	}
	if v.reset > 0 {
		return min(r1, v.reset)
	}
	return r1
}

func result(p *Policy, v verdict, now int64) Result {
	return Result{
		At:         time.Unix(0, now),
		Allowed:    v.ok,
		Limit:      p.Limit,
		Remaining:  int(v.remaining),
		RetryAfter: time.Duration(v.retry),
		Reset:      time.Duration(v.reset),
		Policy:     p.Name,
	}
}

// insert adds the entry of key and ps, whose hash is h, to sh, sweeping
// the shard first when a sweep is due and making room if the shard is
// full, and returns the new entry locked, with a reading of the clock for
// its first decision: the reading precedes any other request's for the
// entry, since none can find the entry before its lock is released, so
// instants stay in order. It returns a nil entry if the entry is there
// already.
func (s *MemoryStore) insert(sh *shard, h uint64, key string, ps *policySet) (*entry, states, int64, error) {
	now := s.now()
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if sh.find(h, key, ps) != nil {
		return nil, states{}, 0, nil
	}
	if sh.len() >= int(sh.sweepLen) && now >= sh.sweepAt {
		s.sweep(sh, now)
	}
	if s.perShard > 0 && sh.len() >= s.perShard && !s.makeRoom(sh, now) {
		s.rejected.Add(1)
		return nil, states{}, 0, ErrStoreFull
	}
	// Copy, so that the entry does not pin a larger string the key was
	// cut from (a whole header, say).
	e := &entry{key: strings.Clone(key), set: ps, seen: now}
	e.mu.Lock()
	st := states{first: &e.first}
	if n := len(ps.policies); n > 1 {
		st.rest = make([]state, n-1)
		if sh.rest == nil {
			sh.rest = make(map[*entry][]state)
		}
		sh.rest[e] = st.rest
	}
	sh.add(h, e)
	sh.sweepAt = min(sh.sweepAt, now+ps.minIdle)
	return e, st, now, nil
}

// idleAt returns the instant from which every state of e is idle. The
// caller holds e's lock.
func idleAt(e *entry, st states) int64 {
	at := int64(-1 << 63)
	for i, a := range e.set.algos {
		p := &e.set.policies[i]
		at = max(at, a.idleAt(st.at(i), int64(p.Limit), int64(p.Window)))
	}
	return at
}

// lastUsed returns an instant that grows with e's activity. The caller
// holds e's lock.
func lastUsed(e *entry, st states) int64 {
	t := int64(-1 << 63)
	for i, a := range e.set.algos {
		t = max(t, a.last(st.at(i)))
	}
	return t
}

// sweep drops the idle entries of sh and notes when the next sweep is due:
// once the shard has doubled, and not before one of its entries can have
// gone idle. Sweeping a whole shard when it doubles costs a new entry at
// most two entry visits, amortized, and skipping sweeps that cannot find
// anything makes a flood of keys within one window cost none. The caller
// holds sh.mu.
func (s *MemoryStore) sweep(sh *shard, now int64) {
	next := int64(1<<63 - 1)
	visit := func(h uint64, e *entry) {
		// Waiting here is safe: no goroutine holds an entry's lock while
		// it asks for a shard's.
		e.mu.Lock()
		if at := idleAt(e, statesOf(sh, e, e.set)); at <= now {
			s.drop(sh, h, e)
		} else {
			next = min(next, at)
		}
		e.mu.Unlock()
	}
	for h, e := range sh.m {
		visit(h, e)
	}
	for _, e := range sh.other {
		visit(s.hash(e.key, e.set), e)
	}
	sh.sweepLen = int32(max(2*sh.len(), minSweepLen))
	sh.sweepAt = next
}

// hash returns the hash of key and ps, by which the store finds their
// entry, its shard and its remembered refusal.
func (s *MemoryStore) hash(key string, ps *policySet) uint64 {
	return maphash.String(s.seed, key) ^ ps.hash
}

// drop removes e, whose hash is h, from sh. The caller holds sh.mu and
// e.mu.
func (s *MemoryStore) drop(sh *shard, h uint64, e *entry) {
	e.seen = dropped
	s.refused.forget(h, e)
	if sh.m[h] == e {
		delete(sh.m, h)
	} else {
		delete(sh.other, identity{e.key, e.set.id})
	}
	delete(sh.rest, e)
}

// makeRoom frees a place in the full shard sh, reporting whether it could.
// An idle entry goes first, if there is one; failing that, under
// EvictLeastRecent, the sampled entry whose latest request is oldest.
func (s *MemoryStore) makeRoom(sh *shard, now int64) bool {
	var victim *entry
	var victimHash uint64
	victimAt := int64(1<<63 - 1)
	n := evictSample
	// Entries in sh.other are left out of the sample: there are almost
	// never any, and a sample need not see every entry.
	for h, e := range sh.m {
		if n == 0 {
			break
		}
		n--
		// Waiting here is safe: no goroutine holds an entry's lock while
		// it asks for a shard's.
		e.mu.Lock()
		st := statesOf(sh, e, e.set)
		if idleAt(e, st) <= now {
			s.drop(sh, h, e)
			e.mu.Unlock()
			return true
		}
		if t := lastUsed(e, st); t < victimAt {
			victim, victimHash, victimAt = e, h, t
		}
		e.mu.Unlock()
	}
	// The sample may have missed idle entries: sweep the shard if one can
	// be idle, which costs at most one visit of each entry per entry it
	// frees, since the sweep notes when the next can be.
	if now >= sh.sweepAt {
		n := sh.len()
		s.sweep(sh, now)
		if sh.len() < n {
			return true
		}
	}
	if s.overflow != EvictLeastRecent || victim == nil {
		return false
	}
	victim.mu.Lock()
	s.drop(sh, victimHash, victim)
	victim.mu.Unlock()
	s.evicted.Add(1)
	return true
}

// sweepLoop runs the background sweep until Close.
func (s *MemoryStore) sweepLoop() {
	defer close(s.done)
	t := time.NewTicker(sweepInterval)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
			s.sweepAll()
		}
	}
}

// sweepAll drops every idle entry and gives each shard that has shrunk to
// a quarter of its peak maps of their present size, since Go maps keep
// the memory of their peak.
func (s *MemoryStore) sweepAll() {
	for i := range s.shards {
		sh := &s.shards[i]
		now := s.now()
		sh.mu.Lock()
		s.sweep(sh, now)
		if sh.peak >= 64 && len(sh.m) <= int(sh.peak/4) {
			sh.m, sh.peak = resized(sh.m), int32(len(sh.m))
			sh.other = resized(sh.other)
			sh.rest = resized(sh.rest)
		}
		sh.mu.Unlock()
	}
}

// resized returns a copy of m made for its present size (maps.Clone may
// keep m's capacity), or nil for a nil m.
func resized[K comparable, V any](m map[K]V) map[K]V {
	if m == nil {
		return nil
	}
	r := make(map[K]V, len(m))
	for k, v := range m {
		r[k] = v
	}
	return r
}

// Stats reports the store's counters.
func (s *MemoryStore) Stats() Stats {
	var st Stats
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.RLock()
		st.Keys += sh.len()
		sh.mu.RUnlock()
	}
	st.Evicted = s.evicted.Load()
	st.Rejected = s.rejected.Load()
	st.CachedRefusals = s.refused.hits.load()
	return st
}

// Close stops the background sweep and waits for it. It is safe to call
// more than once; the store still answers Take afterwards, without the
// background sweep.
func (s *MemoryStore) Close() error {
	s.closeOnce.Do(func() { close(s.stop) })
	<-s.done
	return nil
}

// Stats are a store's counters, for metrics.
type Stats struct {
	Keys     int    // entries tracked now: one per key and policy set
	Evicted  uint64 // live entries dropped to make room (EvictLeastRecent)
	Rejected uint64 // new entries refused because the store was full (RejectNewKeys)
	// CachedRefusals counts refusals answered from a refusal remembered
	// until it could change: by the memory store without taking the
	// key's lock, by redisstore without a round trip to Redis. A flood
	// from one client over its limit shows here.
	CachedRefusals uint64
}
