package ratelimit

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Policy is one quota: at most Limit requests in any rolling Window, as
// Algorithm counts them, or, for the calendar algorithms (Daily, Weekly,
// Monthly), in each calendar period, in Location (UTC if nil), where
// Window is 0. Limit is 1 to math.MaxInt32, and a rolling Window at most
// two years. Location must be the zone time.LoadLocation gives for its
// name, and not the host's own (time.Local), since stores know a quota's
// zone by its name, which servers in other zones would share. Name labels the
// policy in the RateLimit and RateLimit-Policy headers: 1 to 64 letters,
// digits and "-_.", so that it needs no quoting. The zero Algorithm is SlidingLog.
//
// A quota is its name, window (or period) and algorithm: the Limit
// WithLimits returns for a client may change, for that client or for all,
// and its counts are kept. The default policies (New's limit and window,
// WithPolicies) differ: they are the limiter's identity in the store,
// limits included, so that a limiter built with another default limit
// counts every client afresh (see New).
type Policy struct {
	Name      string
	Limit     int
	Window    time.Duration
	Algorithm Algorithm
	Location  *time.Location
}

// Period returns the calendar period of p that holds t, as stores count
// it: from midnight of its first day in p.Location (UTC if nil), weeks
// from Monday; periods are computed with time.Date, so that a day of a
// change of daylight saving time has its 23 or 25 hours, a day whose
// midnight a change skips begins at the change, and one whose midnight
// comes twice begins at the first. For a policy of a rolling window, it
// returns the window that ends at t.
func (p Policy) Period(t time.Time) (start, end time.Time) {
	if !isCalendar(p.Algorithm) {
		return t.Add(-p.Window), t
	}
	loc := p.Location
	if loc == nil {
		loc = time.UTC
	}
	start, end = p.calendarPeriod(t.In(loc))
	if !t.Before(end) {
		// A change of time took the clock back across midnight, as St.
		// John's did from 00:01 to 23:01 until 2011: t's date is that of
		// the period before, which ended at the first midnight.
		return p.calendarPeriod(end)
	}
	return start, end
}

// calendarPeriod returns the bounds of the calendar period of p that
// holds t's date, in t's location.
func (p Policy) calendarPeriod(t time.Time) (start, end time.Time) {
	y, m, d := t.Date()
	loc := t.Location()
	switch p.Algorithm {
	case Daily:
		return midnight(y, m, d, loc), midnight(y, m, d+1, loc)
	case Weekly:
		d -= (int(t.Weekday()) + 6) % 7 // back to Monday
		return midnight(y, m, d, loc), midnight(y, m, d+7, loc)
	}
	return midnight(y, m, 1, loc), midnight(y, m+1, 1, loc)
}

// midnight returns the first instant of the day y-m-d in loc (normalized
// as by time.Date). Where a change of time skips midnight, as Santiago's
// in September, the day begins at the change, and time.Date may give the
// hour before it, on the day before. Where a change takes the clock back
// across midnight, as Amman's did from 01:00 to 00:00 until 2022, the day
// begins at the first of its midnights, and time.Date may give the second.
func midnight(y int, m time.Month, d int, loc *time.Location) time.Time {
	t := time.Date(y, m, d, 0, 0, 0, 0, loc)
	if t.Day() != time.Date(y, m, d, 0, 0, 0, 0, time.UTC).Day() {
		_, t = t.ZoneBounds()
		return t
	}
	// Only a change within the day before can have taken the clock back
	// across midnight; the instant before t may then be on the day before
	// again, as at Casey in 2010, from 02:00 to 23:00.
	change, _ := t.ZoneBounds()
	if change.IsZero() || t.Sub(change) >= 24*time.Hour {
		return t // no change since the day before began, as nearly always
	}
	// Midnight under the offset before the change, if it came then.
	from, _ := change.Add(-1).ZoneBounds()
	_, offset := change.Add(-1).Zone()
	first := time.Date(y, m, d, 0, 0, 0, 0, time.FixedZone("", offset))
	if first.Before(change) && (from.IsZero() || !first.Before(from)) {
		return first.In(loc)
	}
	return t
}

// isCalendar reports whether a counts per calendar period.
func isCalendar(a Algorithm) bool { return a == Daily || a == Weekly || a == Monthly }

// windowOf returns the window p counts in at the instant now: its Window,
// or the length of its calendar period then.
func windowOf(p *Policy, now int64) time.Duration {
	if !isCalendar(p.Algorithm) {
		return p.Window
	}
	start, end := period(p, now)
	return time.Duration(end - start)
}

// nominalWindow returns the window RateLimit-Policy announces for p: its
// Window, or a calendar period's usual length (a month's is 30 days).
func nominalWindow(p *Policy) time.Duration {
	switch p.Algorithm {
	case Daily:
		return 24 * time.Hour
	case Weekly:
		return 7 * 24 * time.Hour
	case Monthly:
		return 30 * 24 * time.Hour
	}
	return p.Window
}

// maxWindow bounds a Policy's window: two years, far beyond any rate
// limit's, so that sums of instants and windows never overflow.
const maxWindow = 2 * 365 * 24 * time.Hour

// Algorithm selects how a Policy counts requests. The zero value is
// SlidingLog.
type Algorithm int

const (
	// SlidingLog keeps the instant of every allowed request in the window
	// and is exact: no rolling window ever holds more than the limit. A key
	// costs 8 bytes per logged request on top of its fixed cost.
	SlidingLog Algorithm = iota
	// SlidingWindowCounter counts requests in fixed windows and weighs the
	// previous window's count by how much of it the rolling window still
	// covers. It costs a few bytes per key whatever the limit, but is
	// approximate: it assumes the previous window's requests were spread
	// evenly, so a rolling window can admit somewhat more than the limit.
	SlidingWindowCounter
	// GCRA is the generic cell rate algorithm, a token bucket kept as one
	// instant: bursts up to the limit, then one request every window/limit.
	// It costs a few bytes per key whatever the limit and is exact for its
	// own definition, but a rolling window can admit up to about twice the
	// limit (a full burst, then the refill). When a client's limit
	// changes it keeps the time its bucket takes to refill: a client that
	// had used half its bucket has half of the new one left.
	GCRA
	// Daily counts requests per calendar day, from midnight in the
	// policy's Location: a quota that starts afresh each day, as an
	// invoice counts it, not a rolling 24 hours.
	Daily
	// Weekly counts requests per calendar week, from Monday midnight.
	Weekly
	// Monthly counts requests per calendar month, from midnight of its
	// first day: "1,000,000 a month, reset on the 1st".
	Monthly
)

// String returns the algorithm's name, as Go spells its constant
// ("SlidingLog"), or "Algorithm(n)" for an unknown value.
func (a Algorithm) String() string {
	switch a {
	case SlidingLog:
		return "SlidingLog"
	case SlidingWindowCounter:
		return "SlidingWindowCounter"
	case GCRA:
		return "GCRA"
	case Daily:
		return "Daily"
	case Weekly:
		return "Weekly"
	case Monthly:
		return "Monthly"
	}
	return "Algorithm(" + strconv.Itoa(int(a)) + ")"
}

// validate reports what is wrong with p, or nil.
func (p Policy) validate() error {
	var errs []error
	if p.Limit < 1 || p.Limit > math.MaxInt32 {
		errs = append(errs, fmt.Errorf("ratelimit: policy %q: limit %d, want 1 to %d", p.Name, p.Limit, math.MaxInt32))
	}
	switch {
	case isCalendar(p.Algorithm) && p.Window != 0:
		errs = append(errs, fmt.Errorf("ratelimit: policy %q: window %v for a %v policy, which counts per calendar period: want 0", p.Name, p.Window, p.Algorithm))
	case !isCalendar(p.Algorithm) && (p.Window <= 0 || p.Window > maxWindow):
		errs = append(errs, fmt.Errorf("ratelimit: policy %q: window %v, want more than 0 and at most two years", p.Name, p.Window))
	case !isCalendar(p.Algorithm) && p.Location != nil:
		errs = append(errs, fmt.Errorf("ratelimit: policy %q: a Location for a %v policy, which counts in a rolling window", p.Name, p.Algorithm))
	case p.Location != nil && !namesItself(p.Location):
		errs = append(errs, fmt.Errorf("ratelimit: policy %q: Location %q is not the zone time.LoadLocation gives for that name, or is the host's own", p.Name, p.Location))
	}
	if !validPolicyName(p.Name) {
		errs = append(errs, fmt.Errorf("ratelimit: policy name %q: want 1 to 64 characters of [A-Za-z0-9._-]", p.Name))
	}
	if algorithmOf(p.Algorithm) == nil {
		errs = append(errs, fmt.Errorf("ratelimit: policy %q: unknown algorithm %v", p.Name, p.Algorithm))
	}
	return errors.Join(errs...)
}

// namesItself reports whether loc is the zone time.LoadLocation gives for
// its name, as far as their offsets at the start of January and July of
// 2000 to 2040 tell: a set's ID names its zones, so that two zones of one
// name (time.FixedZone("", h) for any h) would share counts over
// different periods. The host's own zone, "Local" or "localtime", names
// a different zone on each server of another zone, and does not count.
func namesItself(loc *time.Location) bool {
	if isHostZone(loc.String()) {
		return false
	}
	named, err := time.LoadLocation(loc.String())
	if err != nil {
		return false
	}
	for y := 2000; y <= 2040; y++ {
		for _, m := range []time.Month{time.January, time.July} {
			t := time.Date(y, m, 1, 0, 0, 0, 0, time.UTC)
			_, a := t.In(loc).Zone()
			_, b := t.In(named).Zone()
			if a != b {
				return false
			}
		}
	}
	return true
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

// A PolicySet is the policies one request must fit, all at once: valid,
// with distinct names, kept in the order of their names. It is what a
// Store counts by (see Store): its ID names its quotas, whatever their
// limits, so that a set whose limits changed counts on where the old one
// left off. Make one with NewPolicySet; a Limiter makes its own. The zero
// PolicySet is empty, and a Store refuses it.
//
// A PolicySet is immutable and safe for simultaneous use.
type PolicySet struct{ p *policySet }

type policySet struct {
	policies []Policy // by name
	algos    []algorithm
	id       string
	maxCost  int // the least limit: no greater cost can fit
}

// NewPolicySet returns the set of policies, or every reason they cannot
// be one, joined: no policies, an invalid policy, or two with one name.
func NewPolicySet(policies ...Policy) (PolicySet, error) {
	return newPolicySet("", policies)
}

// newPolicySet makes a set whose counts are kept apart from those of every
// set of another scope, even one of the same policies: a Limiter's sets
// are scoped by the limiter's identity (see New).
func newPolicySet(scope string, policies []Policy) (PolicySet, error) {
	var errs []error
	if len(policies) == 0 {
		errs = append(errs, errors.New("ratelimit: no policies"))
	}
	ps := slices.Clone(policies)
	slices.SortStableFunc(ps, func(a, b Policy) int { return strings.Compare(a.Name, b.Name) })
	for i, p := range ps {
		errs = append(errs, p.validate())
		if i > 0 && ps[i-1].Name == p.Name {
			errs = append(errs, fmt.Errorf("ratelimit: policy name %q used twice in one set", p.Name))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return PolicySet{}, err
	}
	s := &policySet{policies: ps, maxCost: math.MaxInt}
	var b strings.Builder
	if scope != "" {
		b.WriteString(strconv.Quote(scope))
		b.WriteByte('|')
	}
	for i, p := range ps {
		if i > 0 {
			b.WriteByte(',')
		}
		if isCalendar(p.Algorithm) {
			fmt.Fprintf(&b, "%s:%v@%s", p.Name, p.Algorithm, locationName(p.Location))
		} else {
			fmt.Fprintf(&b, "%s:%dns:%v", p.Name, int64(p.Window), p.Algorithm)
		}
		s.algos = append(s.algos, algorithmOf(p.Algorithm))
		s.maxCost = min(s.maxCost, p.Limit)
	}
	s.id = b.String()
	return PolicySet{s}, nil
}

// locationName names loc in an ID: UTC for nil.
func locationName(loc *time.Location) string {
	if loc == nil {
		return "UTC"
	}
	return loc.String()
}

// Len returns the number of policies in s.
func (s PolicySet) Len() int {
	if s.p == nil {
		return 0
	}
	return len(s.p.policies)
}

// At returns the i-th policy of s, in the order of their names.
func (s PolicySet) At(i int) Policy { return s.p.policies[i] }

// ID returns the identity of s, the same in every process and for sets of
// the same quotas however their policies were ordered and whatever their
// limits: each policy's name, window in nanoseconds (or its calendar
// period and Location) and algorithm, as
// "burst:1000000000ns:SlidingLog,monthly:Monthly@UTC", after the quoted
// scope of a set a Limiter made. A shared store names a set's counts by it
// (or by a digest of it).
func (s PolicySet) ID() string {
	if s.p == nil {
		return ""
	}
	return s.p.id
}

// CheckCost reports why a Take of cost could never be counted under s:
// ErrInvalidCost below 1 or above some policy's limit (no wait could make
// it fit), or an error for an empty set.
func (s PolicySet) CheckCost(cost int) error {
	switch {
	case s.p == nil:
		return errEmptySet
	case cost < 1 || cost > s.p.maxCost:
		return ErrInvalidCost
	}
	return nil
}

// isHostZone reports whether name is one of the host's own zone, which
// names a different zone on servers in other zones.
func isHostZone(name string) bool { return name == "Local" || name == "localtime" }
