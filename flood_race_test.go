//go:build race

package ratelimit

// msRaceEnabled reports whether the race detector is on. It slows the
// store about tenfold, so the floods of keys run smaller under it.
const msRaceEnabled = true
