// Package redisstore is a ratelimit.Store kept in Redis, so that a fleet of
// servers shares one exact sliding-window log per client instead of each
// server admitting the limit on its own.
//
// Plug it into a limiter with ratelimit.WithStore:
//
//	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379", ContextTimeoutEnabled: true})
//	st, err := redisstore.New(rdb, redisstore.WithFailurePolicy(redisstore.FailLocal))
//	if err != nil {
//		log.Fatal(err)
//	}
//	defer st.Close()
//	l, err := ratelimit.New(300, time.Minute, ratelimit.KeyByIP(), ratelimit.WithStore(st))
//
// Every decision is one round trip: a Lua script, sent by SHA1 with EVALSHA
// and re-sent whole only when the server answers NOSCRIPT (after a restart
// or SCRIPT FLUSH). The script reads the time from Redis (TIME), so servers
// whose clocks disagree still share one window; evicts the instants that
// have left each policy's window; decides for every policy; and, only if all
// of them allow it, appends the request's instant cost times to each
// policy's log. No key is ever left without a TTL, none expires while it
// holds an instant still in its window, and a rejected request is never
// recorded. The TTL moves in steps of a quarter window, so an idle key
// lingers up to a quarter window past its window; see the README.
//
// # Keys and memory
//
// A client key is never sent to Redis as it is: it is hashed with SHA-256,
// and each policy's log is the Redis list
//
//	<prefix>{<hex SHA-256 of the key>}:<policy name>:<window>
//
// for example "ratelimit:{fec525…902b02}:default:60s" for the key
// "203.0.113.7". The braces are a Redis Cluster hash tag: all the policies
// of one client live in one slot, so the script may touch them together,
// while different clients spread over the whole cluster.
//
// A log is a list of integer microsecond instants, oldest at the head.
// Redis stores such a list as a listpack of 64-bit integers, about 10 bytes
// an instant, against about 130 for a sorted set once it outgrows its
// compact encoding; see the README for measured figures. A request of cost
// n stores n instants.
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
package redisstore
