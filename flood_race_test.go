//go:build race

package ratelimit_test

// raceEnabled reports whether the race detector is on; it slows the
// flood tenfold, so TestKeyFlood runs a tenth of its full size.
const raceEnabled = true
