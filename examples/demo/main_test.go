package main

import (
	"testing"

	"github.com/slidelog/ratelimit/examples/internal/maintest"
)

// TestMainFailsOnTakenPort runs the demo as a person would, on a port
// already in use: it must exit non-zero, without claiming to listen.
func TestMainFailsOnTakenPort(t *testing.T) {
	maintest.FailsOnTakenPort(t, main, "-addr")
}
