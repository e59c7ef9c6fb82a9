//go:build !race

package ratelimit

// msRaceEnabled reports whether the race detector is on; see
// flood_race_test.go.
const msRaceEnabled = false
