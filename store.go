package ratelimit

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Policy is one quota: at most Limit requests in any rolling Window.
// Name labels the policy in the RateLimit and RateLimit-Policy headers; it
// must be a token of letters, digits and "-_." so that it needs no quoting
// rules beyond the surrounding double quotes.
type Policy struct {
	Name   string
	Limit  int
	Window time.Duration
}

// MaxWindow is the longest window a Policy may have: two years, well
// beyond any rate limit's, and within what the sliding log's compact ring
// can span.
const MaxWindow = 2 * 365 * 24 * time.Hour

// validate reports what is wrong with p, or nil.
func (p Policy) validate() error {
	var errs []error
	if p.Limit < 1 {
		errs = append(errs, fmt.Errorf("ratelimit: policy %q: limit %d, want >= 1", p.Name, p.Limit))
	}
	if p.Window <= 0 || p.Window > MaxWindow {
		errs = append(errs, fmt.Errorf("ratelimit: policy %q: window %v, want > 0 and <= %v", p.Name, p.Window, MaxWindow))
	}
	if !validPolicyName(p.Name) {
		errs = append(errs, fmt.Errorf("ratelimit: policy name %q: want 1 to 64 characters of [A-Za-z0-9._-]", p.Name))
	}
	return errors.Join(errs...)
}

func validPolicyName(s string) bool {
	if len(s) == 0 || len(s) > 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_' || c == '.') {
			return false
		}
	}
	return true
}

// A Store keeps the per-key state behind the limiter's decisions.
//
// Take decides whether cost more requests for key fit every policy in
// policies and, if and only if all of them allow it, records them in all of
// them; it never records a rejected request. Deciding and recording are one
// atomic step per key. The store reads its own clock (a shared store reads a
// shared one), so every figure of a decision comes from one reading.
//
// The Result describes the policy that binds tightest: on a rejection, the
// violated policy with the longest RetryAfter; otherwise the policy with the
// fewest requests remaining (ties go to the longer Reset). Callers pass the
// same policies for a key on every call; cost is at least 1.
//
// Implementations must be safe for simultaneous use by multiple goroutines.
// The memory store is the default; package redisstore shares state across
// servers.
type Store interface {
	Take(ctx context.Context, key string, policies []Policy, cost int) (Result, error)
}

// Errors a Store may return. The middleware answers both with its error
// handler (503 by default), never with their text.
var (
	// ErrStoreFull is returned when a store bounded by WithMaxKeys is full
	// of live keys and configured to reject new ones.
	ErrStoreFull = errors.New("ratelimit: store is full")

	// ErrCostExceedsLimit is returned for a cost larger than some policy's
	// limit: such a request could never be allowed, so waiting cannot help.
	ErrCostExceedsLimit = errors.New("ratelimit: cost exceeds the limit")

	// ErrInvalidCost is returned for a cost below 1.
	ErrInvalidCost = errors.New("ratelimit: cost must be at least 1")
)
