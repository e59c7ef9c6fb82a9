// Package fakeclock is the clock the tests move by hand.
package fakeclock

import (
	"sync"
	"time"
)

// Start is where a new Clock starts: a whole day since the Unix epoch,
// which every window of a whole number of microseconds up to a day, or of
// seconds dividing a day, divides, so that fixed windows aligned to the
// epoch are also aligned to the start of a test.
var Start = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// Clock is a clock that moves only when told to. It is safe for
// simultaneous use.
type Clock struct {
	mu sync.Mutex
	t  time.Time
}

// New returns a Clock reading Start.
func New() *Clock { return &Clock{t: Start} }

// Now returns the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

// Advance moves the clock by d, which may be negative.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// Set moves the clock to t.
func (c *Clock) Set(t time.Time) {
	c.mu.Lock()
	c.t = t
	c.mu.Unlock()
}
