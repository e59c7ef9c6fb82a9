// Package ratelimit is net/http middleware that caps how many requests each
// client may make in a rolling window, exactly.
//
// A Limiter is built from a limit, a window and a Keyer that says whom a
// request counts against:
//
//	l, err := ratelimit.New(300, time.Minute, ratelimit.KeyByIP())
//	if err != nil {
//		log.Fatal(err)
//	}
//	defer l.Close()
//	http.ListenAndServe(":8080", l.Handler(mux))
//
// By default the Limiter keeps, per key, the log of the instants of the
// requests it allowed in the last window (a sliding window log). A request
// is allowed when fewer than limit of those remain; otherwise it is
// answered with 429 Too Many Requests and a Retry-After that says exactly
// when the oldest logged request leaves the window, rounded up to whole
// seconds. Refused requests are not logged, so a client that keeps
// retrying while blocked recovers as soon as its window drains. Unlike
// fixed windows, the log never admits a burst of twice the limit across a
// window boundary. GCRA and SlidingWindowCounter cost less memory per key
// for large limits; Daily, Weekly and Monthly count per calendar period.
//
// A request may have to fit several policies at once (WithPolicies: 10 a
// second and 1,000,000 a month), and each client may have its own, looked
// up where the application keeps them (WithLimits), or written as text
// (ParsePolicies).
//
// Every response the middleware decides carries the caller's standing in
// X-RateLimit-* and IETF RateLimit/RateLimit-Policy headers; see
// WithHeaders. Package client reads them on the calling side.
//
// The built-in store keeps state in process memory, sharded so that
// different keys never wait on each other, and bounded: idle keys are
// swept as new keys arrive and in the background, and MemoryConfig.MaxKeys
// caps how many are tracked. A Store shared by many servers (package
// redisstore) plugs in with WithStore; package storetest checks any Store
// against the contract.
package ratelimit
