//go:build !race

package ratelimit_test

// raceEnabled reports whether the race detector is on; see
// flood_race_test.go.
const raceEnabled = false
