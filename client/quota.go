package client

import (
	"container/list"
	"context"
	"fmt"
	"strings"
	"sync"
	"time"
)

// Bounds of what a Transport remembers.
const (
	// maxServers caps the servers (origins, times partitions) a Transport
	// keeps; the least recently used is forgotten first.
	maxServers = 1024
	// maxQuotas caps the quotas kept per server; a new one replaces a
	// stale one, else the one heard of least recently.
	maxQuotas = 16
)

// serverKey names what a Transport paces apart: an origin, and the
// partition Transport.Partition puts a request in.
type serverKey struct {
	scheme, host, partition string
}

// server is what a Transport knows of the quotas of one serverKey.
//
// Each quota is what the server last said of it: remaining requests and
// the instant more become available (its reset). A request may go when
// every quota has, beyond the requests in flight, one request left: a
// request in flight is not yet in any figure the client holds, or may be
// and is counted twice; so the client may undercount what is left, but
// never overcount it. A figure only lowers what a quota has left until
// its reset: answers arrive in any order, and an earlier figure is a
// higher one. Once a quota's reset has passed, the client cannot know how
// much came back (a sliding window frees one request at its reset, a fixed
// window all of them), so one request goes alone as a probe, and the
// figures of its answer replace the stale ones; a stale quota its answer
// does not mention is forgotten.
type server struct {
	mu       sync.Mutex
	quotas   map[quotaKey]*quota
	inflight int64 // requests sent and not yet answered
	probing  bool  // a probe is in flight
	// changed, when a request waits, is closed and cleared by the next
	// answer, which may let it go.
	changed chan struct{}
}

type quota struct {
	remaining int64
	reset     time.Time
	heard     time.Time // when a response last named it
}

// reserve waits until one more request fits every quota of s, and counts
// it in flight; the caller must then settle it. It reports whether the
// request is a probe. It returns at once, with an error that matches
// context.DeadlineExceeded, when a quota is spent until after ctx's
// deadline, and with ctx's error when ctx is done while it waits.
func (s *server) reserve(ctx context.Context) (probe bool, err error) {
	var p pause
	defer p.stop()
	for {
		if err := ctx.Err(); err != nil {
			return false, err
		}
		s.mu.Lock()
		now := time.Now()
		spent, held, stale := s.holds(now)
		if spent.IsZero() && held.IsZero() && !(stale && s.probing) {
			s.inflight++
			s.probing = s.probing || stale
			s.mu.Unlock()
			return stale, nil
		}
		if dl, ok := ctx.Deadline(); ok && !spent.IsZero() && !dl.After(spent) {
			s.mu.Unlock()
			return false, fmt.Errorf("ratelimit: client: quota spent for %v, past the request's deadline: %w",
				spent.Sub(now), context.DeadlineExceeded)
		}
		changed := s.changes()
		s.mu.Unlock()
		if err := p.wait(ctx, later(spent, held), now, changed); err != nil {
			return false, err
		}
	}
}

// holds reads what holds a request back on s at now; s.mu must be held.
// spent is the latest reset of a quota with nothing left; held, of one
// whose rest the requests in flight hold, which their answers may give
// back; stale reports a quota whose reset has passed, which only a probe
// may learn of again. Either time is zero when no quota is so.
func (s *server) holds(now time.Time) (spent, held time.Time, stale bool) {
	for _, q := range s.quotas {
		switch {
		case !now.Before(q.reset):
			stale = true
		case q.remaining < 1:
			spent = later(spent, q.reset)
		case q.remaining-s.inflight < 1:
			held = later(held, q.reset)
		}
	}
	return spent, held, stale
}

// spentUntil returns when the quotas s knows to be spent at now are back,
// or the zero time if none is spent.
func (s *server) spentUntil(now time.Time) time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	spent, _, _ := s.holds(now)
	return spent
}

// changes returns the channel the next answer settled on s closes, made
// if need be, for a request to wait on; s.mu must be held.
func (s *server) changes() <-chan struct{} {
	if s.changed == nil {
		s.changed = make(chan struct{})
	}
	return s.changed
}

// pause is how reserve waits between its looks at the quotas. It keeps
// the timer of its first timed wait and resets it for the next, so that a
// request that waits several times makes one timer; stop releases it.
type pause struct {
	timer *time.Timer
}

// wait blocks until until (if not zero; now is the reading it is measured
// from), until changed is closed, or until ctx is done. It returns ctx's
// error if ctx was done first, else nil, for reserve to look again.
func (p *pause) wait(ctx context.Context, until, now time.Time, changed <-chan struct{}) error {
	var tick <-chan time.Time
	if !until.IsZero() {
		if p.timer == nil {
			p.timer = time.NewTimer(until.Sub(now))
		} else {
			p.timer.Reset(until.Sub(now))
		}
		tick = p.timer.C
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-tick:
	case <-changed:
	}
	return nil
}

// stop stops the timer of p, if it made one.
func (p *pause) stop() {
	if p.timer != nil {
		p.timer.Stop()
	}
}

// outcome is how a request reserved on a server ended.
type outcome struct {
	probe    bool
	answered bool // the server answered (rep is what it said)
	// free says the request spent no quota: the server refused it (429),
	// a cache answered it, or it never left for the server.
	free bool
	rep  *report
}

// settle counts the request o describes out of flight and learns what its
// answer says, at now.
func (s *server) settle(o outcome, now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.inflight--
	if o.probe {
		s.probing = false
	}
	rep := o.rep
	if rep == nil {
		rep = &report{}
	}
	for i := range rep.figs[:rep.n] {
		s.learn(&rep.figs[i], now)
	}
	for k, q := range s.quotas {
		switch {
		case rep.names(k):
		case !now.Before(q.reset):
			if o.probe && o.answered {
				delete(s.quotas, k)
			}
		case k.src != srcRetryAfter && !o.free && rep.covers(k):
			// The answer says nothing of this quota: take it that the
			// request spent one.
			q.remaining = max(q.remaining-1, 0)
		}
	}
	if s.changed != nil {
		close(s.changed)
		s.changed = nil
	}
}

// learn takes in what a response received at now says of one quota.
func (s *server) learn(f *figure, now time.Time) {
	reset := now.Add(f.reset)
	q := s.quotas[f.key]
	if q == nil {
		if s.quotas == nil {
			s.quotas = make(map[quotaKey]*quota)
		}
		if len(s.quotas) >= maxQuotas {
			s.evictQuota(now)
		}
		// The key's strings point into the response's headers: copy
		// them, so that a kept quota does not keep the whole response.
		k := quotaKey{name: strings.Clone(f.key.name), pk: strings.Clone(f.key.pk), src: f.key.src}
		s.quotas[k] = &quota{remaining: f.remaining, reset: reset, heard: now}
		return
	}
	q.heard = now
	switch {
	case !now.Before(q.reset):
		q.remaining, q.reset = f.remaining, reset
	case f.remaining < q.remaining:
		q.remaining, q.reset = f.remaining, reset
	case f.remaining == q.remaining:
		q.reset = later(q.reset, reset)
	}
}

// quotas returns the figures of the quotas the report names, other than
// Retry-After's.
func (r *report) quotas() []figure {
	f := r.figs[:r.n]
	if r.n > 0 && f[r.n-1].key.src == srcRetryAfter {
		f = f[:r.n-1]
	}
	return f
}

// names reports whether r has a figure for k.
func (r *report) names(k quotaKey) bool {
	for i := range r.figs[:r.n] {
		if r.figs[i].key == k {
			return true
		}
	}
	return false
}

// covers reports whether the request r describes may have spent the
// quota k, which r does not name: when r names no quota at all, it could
// have spent any; when it names some, it spent those of its partitions.
func (r *report) covers(k quotaKey) bool {
	f := r.quotas()
	if len(f) == 0 {
		return true
	}
	for i := range f {
		if f[i].key.pk == k.pk {
			return true
		}
	}
	return false
}

// evictQuota forgets a stale quota or, if none is, the one heard of least
// recently.
func (s *server) evictQuota(now time.Time) {
	var victim quotaKey
	var oldest time.Time
	first := true
	for k, q := range s.quotas {
		if !now.Before(q.reset) {
			delete(s.quotas, k)
			return
		}
		if first || q.heard.Before(oldest) {
			victim, oldest, first = k, q.heard, false
		}
	}
	delete(s.quotas, victim)
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// servers is a Transport's table of servers, least recently used first
// out once it holds maxServers.
type servers struct {
	mu  sync.Mutex
	m   map[serverKey]*list.Element
	lru list.List // of *serverEntry, most recent at the front
}

type serverEntry struct {
	key serverKey
	s   *server
}

// get returns the server of k, made if need be.
func (t *servers) get(k serverKey) *server {
	t.mu.Lock()
	defer t.mu.Unlock()
	if e, ok := t.m[k]; ok {
		t.lru.MoveToFront(e)
		return e.Value.(*serverEntry).s
	}
	if t.m == nil {
		t.m = make(map[serverKey]*list.Element)
	}
	if t.lru.Len() >= maxServers {
		// A request still in flight on the server forgotten settles on
		// it all the same; only what it learns is lost.
		old := t.lru.Back()
		delete(t.m, old.Value.(*serverEntry).key)
		t.lru.Remove(old)
	}
	s := new(server)
	// The key's strings may point into the request's URL: copy them.
	k = serverKey{scheme: strings.Clone(k.scheme), host: strings.Clone(k.host), partition: strings.Clone(k.partition)}
	t.m[k] = t.lru.PushFront(&serverEntry{key: k, s: s})
	return s
}

// len returns the number of servers in t.
func (t *servers) len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.lru.Len()
}
