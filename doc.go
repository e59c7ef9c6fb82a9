// Package ratelimit is net/http middleware that caps how many requests each
// client may make in a rolling window, exactly.
//
// A Limiter is built from a limit, a window and a KeyFunc that says whom a
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
// is allowed when fewer than limit of those remain; otherwise it is answered
// with 429 Too Many Requests and a Retry-After that says exactly when the
// oldest logged request leaves the window, rounded up to whole seconds.
// Rejected requests are not logged, so a client that keeps retrying while
// blocked recovers as soon as its window drains. Unlike fixed windows, the
// log never admits a burst of twice the limit across a window boundary.
//
// Every response the middleware handles carries the caller's standing in
// X-RateLimit-* and IETF RateLimit/RateLimit-Policy headers; see
// WithHeaders.
//
// The built-in store keeps state in process memory, sharded so that
// different keys never wait on each other, and bounded: idle keys are swept
// as new keys arrive, and WithMaxKeys caps how many are tracked. A Store
// shared by many servers (package redisstore) plugs in with WithStore.
package ratelimit
