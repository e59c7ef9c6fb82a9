// Package redisstore is a ratelimit.Store kept in Redis, so that a fleet of
// servers shares one count per client and policy instead of each server
// admitting the limit on its own. It implements every algorithm, chosen
// per policy, and the optional abilities Peek, Reset and Refund.
//
// Plug it into a limiter with ratelimit.WithStore:
//
//	rdb := redis.NewClient(&redis.Options{
//		Addr:                  "127.0.0.1:6379",
//		ContextTimeoutEnabled: true, // the store's timeout reaches the socket
//		DialTimeout:           redisstore.DefaultTimeout,
//		DialerRetries:         1,  // fail a refused dial at once, no backoff
//		MaxRetries:            -1, // no command retries: see Failures
//		PoolTimeout:           redisstore.DefaultTimeout,
//	})
//	st, err := redisstore.New(rdb, redisstore.WithFailurePolicy(redisstore.FailLocal))
//	if err != nil {
//		log.Fatal(err)
//	}
//	defer st.Close()
//	l, err := ratelimit.New(300, time.Minute, ratelimit.KeyByIP(), ratelimit.WithStore(st))
//
// Every decision is one round trip: a Lua script, sent by SHA1 with
// EVALSHA and re-sent whole only when the server answers NOSCRIPT (after
// a restart or SCRIPT FLUSH). The script reads the time from Redis
// (TIME), so servers whose clocks disagree still share one window; brings
// every policy of the set to now; decides for each; and, only if all of
// them allow it, records the request in each. It returns every policy's
// verdict, and the Result reports the tightest (see ratelimit.Store). A
// refused request is never recorded, and a refusal writes nothing.
//
// # Algorithms
//
// Each policy of a set is kept by its own Algorithm, and one request is
// checked against policies of different algorithms atomically, all or
// none. What each keeps in Redis:
//
//   - SlidingLog: a list of the integer microsecond instants of the
//     requests in the window, oldest first; a request of cost n adds n.
//     Exact; about 11 bytes an instant.
//   - SlidingWindowCounter: one string "index:current:previous", the
//     fixed window (a multiple of the window since the Unix epoch, as the
//     memory store aligns it) and the counts of it and the one before.
//   - GCRA: one integer string, the theoretical arrival time in
//     microseconds.
//
// The counter and GCRA cost the same few bytes whatever the limit, so a
// daily quota of 100,000 beside a per-second burst costs a client a few
// hundred bytes, where a log for it would cost a megabyte when used up;
// the README has the figures. The arithmetic is the memory store's, in
// microseconds (windows are counted in whole microseconds, rounded up),
// exact even where a limit times a window passes the 2^53 that Lua's
// numbers hold.
//
// # Keys
//
// A client key is never sent to Redis as it is: it is hashed with
// SHA-256, and policy p of a set lives at
//
//	<prefix>{<hex SHA-256 of the key>}:<hex of the first 8 bytes of SHA-256 of set.ID()>:<p's name>
//
// The braces are a Redis Cluster hash tag: all the keys of one client,
// whatever the set, live in one slot, so a script may touch them
// together, while different clients spread over the whole cluster. The
// set's digest keeps sets apart as the ratelimit.Store contract asks: a
// count belongs to a key, a set and one of its policies, so limiters,
// plans and sets that share a policy never touch each other's counts, and
// changing a policy's limit, window or algorithm starts afresh.
//
// Keys under the store's prefix are the store's: a value there that is
// not a valid state (another type, a list holding a non-number, counts
// above the limit) is deleted by the next Take or Refund and read as empty
// by Peek, so such a key heals at once instead of failing every call.
//
// Every key has a TTL, and none expires while it can still affect a
// decision: a log until its newest instant leaves the window (its expiry
// moves in steps of a quarter window, so an idle log lingers up to a
// quarter window longer), GCRA until its arrival time, a counter until two
// windows after its window starts. Expiries are counted from the server's
// clock reading, so they hold whatever the servers' clocks say.
//
// # Clocks
//
// A server's clock may step back (NTP, a failover to a server whose clock
// lags). An instant logged at most 100ms ahead of the server's clock is
// taken for another server's clock, and now is raised to it, so that each
// log stays in order. An instant further ahead is evidence of a step, not
// of traffic: the next decision rewrites it as now, keeping counts and
// order, so the window slides on from the new time; a GCRA arrival time
// more than a whole bucket ahead is clamped to a full bucket, and a
// counter whose window lies ahead moves to now's, counts and all. A key
// then never stays locked past about a window, as its RetryAfter says.
//
// # Peek, Reset and Refund
//
// Peek runs a read-only script by EVALSHA_RO (Redis 7.0 and later; EVALSHA
// on older servers, once one has said it lacks it): it evicts nothing,
// records nothing and moves no expiry, and a key it has never seen stays
// absent. Reset is one UNLINK of the set's keys of the client. Refund runs
// one script: for each policy whose window still holds the instant at,
// the log removes cost instants equal to it from its tail (LREM with a
// negative count), GCRA moves its arrival time back by cost intervals,
// and the counter takes cost off the count of the window at fell in. Peek,
// Reset and Refund report a failure of Redis as an error wrapping
// ErrUnavailable, whatever the FailurePolicy.
//
// # Remembered refusals
//
// A client flooding past its limit would cost a script call per request.
// The store remembers refusals in a cache local to the process
// (WithRefusalCache, on by default), keyed by client key and set, and
// answers a request from it, without a round trip, when the rule below
// says a fresh decision would be the same.
//
// A refusal of cost c at instant t is remembered only when the set would
// refuse a request of cost 1 at t too: no request of any cost fits, so
// nothing can be counted, by this process or any other, until the set's
// wait for a request of cost 1, R1 (the script reports whether that is
// so, and R1). It answers only requests of the same key, set and cost c,
// until t + min(R1, Reset of the policy reported), with the Result it had:
// RetryAfter and Reset shrinking with the clock, At growing with it.
// That is exact: a sliding log only loses instants as time passes, and
// other servers can only add instants, which they cannot before R1; GCRA
// and the counter likewise only free room as time passes. So a fresh
// decision until then would refuse for the same policy, with the same
// Remaining (which changes only at that policy's Reset), waiting until
// the same instant. A request of another cost goes to Redis: a smaller
// cost that would fit is never refused by the cache.
//
// Across the network: the validity is timed on the local monotonic clock
// from when the request was sent, since the server decided after that,
// so an entry never outlives the instant it describes; RetryAfter and
// Reset shrink from when the reply was received, so the wait advertised
// is never less than the truth (it may exceed it by the round trip).
//
// Each process learns a refusal on its own, from its own round trip, and
// its cache holds only what Redis told it. A Refund or Reset through this
// store forgets the refusal this process remembers for that key and set
// (and keeps a reply decided before it from being remembered); other
// processes learn nothing of it and keep refusing until their own entry
// expires, at most min(R1, Reset) after their refusal, as if the Refund or
// Reset had come that much later. An admission forgets the key's entry
// too, since it proves it stale.
//
// Under FailLocal, a refusal decided by the local fallback is not
// remembered: it describes the fallback's count, not Redis's, and the
// fallback answers its own refusals without a round trip anyway. Refusals
// remembered from Redis before an outage are still answered during it,
// under every FailurePolicy, until they expire: they are still true.
//
// The cache is a fixed array of slots, four a bucket: a new entry takes a
// free slot of its bucket or the one that expires first, so it is bounded
// and O(1), and a lookup takes no lock and allocates nothing. Stats counts
// the refusals it answered (CachedRefusals), and so does the Limiter's
// Stats.
//
// # Failures
//
// Every call is bounded by a timeout (WithTimeout, 50 ms by default). When
// Redis fails or is too slow, the store counts the failure (Failures, and
// the hook set by WithFailureHook) and then, as its FailurePolicy says,
// returns an error wrapping ErrUnavailable (the middleware answers 503 with
// Retry-After), allows the request, or decides it with a local memory store.
// Nothing is latched: the next call tries Redis again, so the store recovers
// on its own when Redis comes back.
//
// Give the client the settings above, so that a failing call fails within
// the timeout and a down server costs no wait at all: ContextTimeoutEnabled
// lets the store's deadline reach the socket; DialerRetries: 1 and
// MaxRetries: -1 stop go-redis from retrying a refused dial with backoff
// (by default every call of an outage then waits out the whole timeout)
// and from re-sending a script whose reply was lost, which would count a
// request twice; DialTimeout and PoolTimeout bound a new connection and
// the wait for a free one.
//
// # Durability
//
// The counts are only as durable as the Redis that holds them. A Redis
// that evicts keys under memory pressure forgets the counts it evicts: use
// maxmemory-policy noeviction, or an instance apart from caches. A Redis
// restarted without persistence forgets every count, and a failover with
// asynchronous replication forgets the writes the new master had not
// received: clients then get their quota again, up to twice the limit in
// one window (a test saw 596 admitted in one 10 s window for a limit of
// 300). Against restarts, run Redis with the append-only file
// (appendonly yes; appendfsync always loses nothing acknowledged,
// everysec up to a second of counts); against failovers, make the master
// refuse writes unless replicas keep up (min-replicas-to-write 1,
// min-replicas-max-lag 10), which narrows the loss to the lag allowed.
// The store does not use WAIT, which would add a round trip to every
// admission. Either way a client sees only a quota that starts over, never
// an error.
package redisstore
