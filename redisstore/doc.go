// Package redisstore is a ratelimit.Store kept in Redis, so that a fleet of
// servers shares one count per client and policy instead of each server
// admitting the limit on its own. It implements every algorithm, chosen
// per policy, and the optional abilities Peek, Reset and Refund.
//
// Plug it into a limiter with ratelimit.WithStore, on a client with the
// settings the README explains:
//
//	rdb := redis.NewClient(&redis.Options{
//		Addr:                  "127.0.0.1:6379",
//		ContextTimeoutEnabled: true, // the store's timeout reaches the socket
//		Dialer:                redisstore.Dial,
//		DialTimeout:           redisstore.DefaultTimeout,
//		DialerRetries:         1,  // fail a refused dial at once, no backoff
//		MaxRetries:            -1, // never send a call twice
//		PoolTimeout:           redisstore.DefaultTimeout,
//	})
//	st, err := redisstore.New(rdb, redisstore.WithFailurePolicy(redisstore.FailLocal))
//	if err != nil {
//		log.Fatal(err)
//	}
//	defer st.Close()
//	l, err := ratelimit.New(300, time.Minute, ratelimit.KeyByIP(), ratelimit.WithStore(st))
//
// Every decision is one round trip: a call of a Redis function (FCALL),
// from a library the store loads once per server. The function reads the
// time from Redis (TIME), so servers whose clocks disagree share one
// window; brings every policy of the set to now; and records the request
// in each only if all of them allow it. A refused request writes nothing.
//
// In front of Redis, each process keeps a bounded cache of refusals
// (WithRefusalCache), each remembered for at most a second and never
// beyond the instant a fresh decision could differ (the slots of another
// process's lease count as held until then: their return is seen within
// the second), so that a flooding client costs a round trip a second;
// and, if asked (WithLeases), leases
// of slots for busy keys, taken in the same call and admitted from
// locally for at most 50 ms, which keep every window exact. A Reset or
// Refund in one process is seen by the others within a second.
//
// When Redis fails, the store counts the failure and acts as its
// FailurePolicy says: an error (the middleware answers 503), an admission
// counted nowhere, or a decision by a local store with each limit divided
// among the fleet (WithFleetSize). Nothing is latched.
//
// The README (redisstore/README.md in the repository) has the key layout,
// the memory each algorithm costs, how clocks that step are handled, the
// exactness argument for the refusal cache and for leases, durability,
// and the figures of a fleet of four processes.
package redisstore
