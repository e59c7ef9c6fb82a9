package ratelimit

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// units are the units of rolling windows, longest first, as String
// writes them.
func units() [6]unit {
	return [...]unit{{"h", time.Hour}, {"min", time.Minute}, {"s", time.Second}, {"ms", time.Millisecond}, {"us", time.Microsecond}, {"ns", 1}}
}

type unit struct {
	name string
	d    time.Duration
}

// canonicalUnit returns the name String writes for a unit ParsePolicies
// reads.
func canonicalUnit(u string) string {
	switch u {
	case "hour", "hours", "hr":
		return "h"
	case "m", "minute", "minutes", "mins":
		return "min"
	case "sec", "secs", "second", "seconds":
		return "s"
	case "µs":
		return "us"
	}
	return u
}

// periodOf returns the calendar algorithm whose unit is u.
func periodOf(u string) (Algorithm, bool) {
	for _, a := range [...]Algorithm{Daily, Weekly, Monthly} {
		if periodUnit(a) == u {
			return a, true
		}
	}
	return 0, false
}

// periodUnit returns the unit of a calendar algorithm, "" for others.
func periodUnit(a Algorithm) string {
	switch a {
	case Daily:
		return "day"
	case Weekly:
		return "week"
	case Monthly:
		return "month"
	}
	return ""
}

// algoText returns the text of a rolling algorithm in a policy's params.
func algoText(a Algorithm) string {
	switch a {
	case SlidingLog:
		return "log"
	case SlidingWindowCounter:
		return "counter"
	case GCRA:
		return "gcra"
	}
	return a.String()
}

// ParsePolicies parses policies written as text, such as "300/min",
// "10/s, 1000000/month" or "5000/h;algo=gcra;name=api", into valid
// policies that fit in one set: policies as text, for limits kept in
// configuration files and databases.
//
//	policies = policy *( "," policy )
//	policy   = limit "/" [count] unit *( ";" param )   ; each param at most once
//	unit     = "ns" | "us" | "ms" | "s" | "min" | "h" | "day" | "week" | "month"
//	param    = "name=" name | "algo=" ("log" | "counter" | "gcra") | "tz=" zone
//
// A rolling window is count units long ("100/10s"); day, week and month
// are calendar periods (Daily, Weekly, Monthly), which take no count and
// may take a zone ("1000000/month;tz=Europe/Berlin"). Without a name, a
// policy is named after its window alone ("per-min", "per-10s", "monthly"),
// not its limit, so that a client whose limit changes keeps its counts.
//
// It reports every error at once, joined with errors.Join. Policy.String
// is its inverse.
func ParsePolicies(text string) ([]Policy, error) {
	var ps []Policy
	var errs []error
	for i, item := range strings.Split(text, ",") {
		p, err := parsePolicy(strings.TrimSpace(item))
		if err != nil {
			errs = append(errs, fmt.Errorf("ratelimit: policy %d %q: %w", i+1, strings.TrimSpace(item), err))
			continue
		}
		ps = append(ps, p)
	}
	if len(errs) == 0 {
		_, err := NewPolicySet(ps...)
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return ps, nil
}

// parsePolicy parses one policy of ParsePolicies' text.
func parsePolicy(s string) (Policy, error) {
	rate, params, _ := strings.Cut(s, ";")
	limit, window, ok := strings.Cut(rate, "/")
	if !ok {
		return Policy{}, errors.New(`want limit/window, as in "300/min"`)
	}
	var p Policy
	var errs []error
	n, err := strconv.ParseInt(strings.TrimSpace(limit), 10, 32)
	if err != nil || n < 1 {
		errs = append(errs, fmt.Errorf("limit %q: want a whole number from 1 to 2147483647", limit))
	}
	p.Limit = int(n)
	if err := parseWindow(&p, strings.TrimSpace(window)); err != nil {
		errs = append(errs, err)
	}
	if params != "" {
		// A parameter given twice is refused, not read as its last value:
		// "algo=gcra;algo=log" is a mistake, and which it meant unknown.
		var seen []string
		for param := range strings.SplitSeq(params, ";") {
			key, value, _ := strings.Cut(param, "=")
			if key = strings.TrimSpace(key); slices.Contains(seen, key) {
				errs = append(errs, fmt.Errorf("parameter %q given twice", key))
				continue
			}
			seen = append(seen, key)
			if err := parseParam(&p, key, value); err != nil {
				errs = append(errs, err)
			}
		}
	}
	if p.Name == "" {
		p.Name = defaultName(p)
	}
	if p.Location != nil && !isCalendar(p.Algorithm) {
		errs = append(errs, errors.New("tz: only calendar periods (day, week, month) have a zone"))
	}
	return p, errors.Join(errs...)
}

// parseWindow parses the window of a policy: "[count] unit".
func parseWindow(p *Policy, s string) error {
	digits := strings.IndexFunc(s, func(r rune) bool { return r < '0' || r > '9' })
	if digits < 0 {
		return fmt.Errorf("window %q: want a unit, as in \"min\" or \"10s\"", s)
	}
	count, unit := int64(1), strings.TrimSpace(s[digits:])
	if digits > 0 {
		c, err := strconv.ParseInt(s[:digits], 10, 64)
		if err != nil || c < 1 {
			return fmt.Errorf("window %q: want a count from 1", s)
		}
		count = c
	}
	if a, ok := periodOf(unit); ok {
		if digits > 0 {
			return fmt.Errorf("window %q: a calendar %s takes no count", s, unit)
		}
		p.Algorithm = a
		return nil
	}
	unit = canonicalUnit(unit)
	for _, u := range units() {
		if unit == u.name {
			if count > int64(maxWindow/u.d) {
				return fmt.Errorf("window %q: at most two years", s)
			}
			p.Window = time.Duration(count) * u.d
			return nil
		}
	}
	return fmt.Errorf("window %q: unknown unit %q, want ms, s, min, h, day, week or month", s, unit)
}

// parseParam parses a param of a policy, cut at its "=": "name", "algo"
// or "tz", key trimmed.
func parseParam(p *Policy, key, value string) error {
	switch key {
	case "name":
		p.Name = strings.TrimSpace(value)
		if !validPolicyName(p.Name) {
			return fmt.Errorf("name %q: want 1 to 64 characters of [A-Za-z0-9._-]", p.Name)
		}
	case "algo":
		value = strings.TrimSpace(value)
		if isCalendar(p.Algorithm) {
			return fmt.Errorf("algo %q: a calendar period counts its own way", value)
		}
		for _, a := range [...]Algorithm{SlidingLog, SlidingWindowCounter, GCRA} {
			if value == algoText(a) {
				p.Algorithm = a
				return nil
			}
		}
		return fmt.Errorf("algo %q: want log, counter or gcra", value)
	case "tz":
		value = strings.TrimSpace(value)
		loc, err := loadZone(value)
		if err != nil {
			return fmt.Errorf("tz %q: want a zone of the IANA database, as in Europe/Berlin", value)
		}
		p.Location = loc
	default:
		return fmt.Errorf("unknown parameter %q, want name, algo or tz", key)
	}
	return nil
}

// loadZone loads a zone of the IANA database by name, refusing names
// that are no zone's before they reach the file system, and the names of
// the host's own zone ("Local", "localtime"), which name different zones
// on different servers. An empty element ("Europe//Berlin") is refused
// too: the file system finds the zone where the embedded database does
// not, and the name would give a set another ID than the zone's own.
func loadZone(name string) (*time.Location, error) {
	ok := len(name) > 0 && len(name) <= 64 && !strings.Contains(name, "..") && !isHostZone(name) &&
		!slices.Contains(strings.Split(name, "/"), "")
	for _, c := range name {
		ok = ok && ('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.ContainsRune("/_+-", c))
	}
	if !ok {
		return nil, errors.New("not a zone name")
	}
	return time.LoadLocation(name)
}

// defaultName names a policy after its window.
func defaultName(p Policy) string {
	switch p.Algorithm {
	case Daily:
		return "daily"
	case Weekly:
		return "weekly"
	case Monthly:
		return "monthly"
	}
	return "per-" + windowText(p.Window)
}

// windowText writes a rolling window in the largest unit that divides it.
func windowText(d time.Duration) string {
	for _, u := range units() {
		if d%u.d == 0 {
			if d == u.d {
				return u.name
			}
			return strconv.FormatInt(int64(d/u.d), 10) + u.name
		}
	}
	return "" // unreachable: every duration is a whole number of ns
}

// String returns p as ParsePolicies reads it, as in "300/min" or
// "1000000/month;tz=Europe/Berlin", with its name and algorithm when they
// are not those the text implies.
func (p Policy) String() string {
	var b strings.Builder
	b.WriteString(strconv.Itoa(p.Limit))
	b.WriteByte('/')
	if u := periodUnit(p.Algorithm); u != "" {
		b.WriteString(u)
	} else {
		b.WriteString(windowText(p.Window))
		if p.Algorithm != SlidingLog {
			b.WriteString(";algo=" + algoText(p.Algorithm))
		}
	}
	if p.Name != defaultName(p) {
		b.WriteString(";name=" + p.Name)
	}
	if p.Location != nil {
		b.WriteString(";tz=" + p.Location.String())
	}
	return b.String()
}
