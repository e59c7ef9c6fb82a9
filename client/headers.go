package client

import (
	"net/http"
	"time"
)

// This file reads what one response says of the quotas its request spent.
// It never decides: quota.go does, from the report.

// maxDelay caps every wait a header can ask for: a reset or Retry-After
// further away is taken as this far. It also bounds the Unix times that
// X-RateLimit-Reset is read as.
const maxDelay = 366 * 24 * time.Hour

// unixSlack is how far in the past, before the reference instant, an
// X-RateLimit-Reset may lie and still be read as a Unix time (whose reset
// is then now): enough for a server that rounds down or a slow response,
// far too little to be confused with a count of seconds.
const unixSlack = 24 * time.Hour

// Canonical header names.
const (
	hdrRateLimit  = "Ratelimit"
	hdrPolicy     = "Ratelimit-Policy"
	hdrLimit      = "X-Ratelimit-Limit"
	hdrRemaining  = "X-Ratelimit-Remaining"
	hdrReset      = "X-Ratelimit-Reset"
	hdrRetryAfter = "Retry-After"
	hdrDate       = "Date"
	hdrAge        = "Age"
)

// source says which header a quota was learned from: figures of the same
// policy name from different headers are kept apart.
type source uint8

const (
	srcIETF       source = iota // RateLimit (and RateLimit-Policy)
	srcLegacy                   // X-RateLimit-*
	srcRetryAfter               // Retry-After on a refusal
)

// quotaKey names a quota of one server: a policy and a partition key as
// the server spells them, and the header they came from.
type quotaKey struct {
	name, pk string
	src      source
}

// figure is what a response says of one quota: how many requests remain
// and how long after the response until more do.
type figure struct {
	key       quotaKey
	remaining int64
	reset     time.Duration
}

// report is what one response says: at most maxItems figures, counting
// the one a Retry-After makes.
type report struct {
	figs [maxItems]figure
	n    int
	// retryAfter is the Retry-After of a refusal, or -1 if there is none.
	retryAfter time.Duration
	// cached says a cache answered (a positive Age): the report is empty.
	cached bool
}

// readReport reads into r what a response of status with headers h,
// received at now, says. It ignores a response served from a cache (a
// positive Age), whose figures are not current, and any malformed field.
// RateLimit is read when it names a usable policy; X-RateLimit-* only
// otherwise, since a server that sends both describes one quota twice.
func readReport(r *report, status int, h http.Header, now time.Time) {
	r.n, r.retryAfter, r.cached = 0, -1, false
	if age, ok := seconds(h[hdrAge]); ok && age > 0 {
		r.cached = true
		return
	}
	readIETF(r, h)
	if r.n == 0 {
		readLegacy(r, h, now)
	}
	if status != http.StatusTooManyRequests && status != http.StatusServiceUnavailable && status != http.StatusForbidden {
		return
	}
	ra, ok := retryAfter(h, now)
	if !ok {
		return
	}
	// Retry-After takes precedence over a spent quota's reset (the
	// draft's section 7); a quota with some left it leaves alone.
	for i := range r.figs[:r.n] {
		if r.figs[i].remaining == 0 {
			r.figs[i].reset = ra
		}
	}
	if r.n == maxItems {
		r.n--
	}
	r.figs[r.n] = figure{key: quotaKey{src: srcRetryAfter}, reset: ra}
	r.n++
	r.retryAfter = ra
}

// readIETF reads the RateLimit field, with RateLimit-Policy for the
// window of an item without t, the unit of its quota and its quota.
// Items in another unit than requests are skipped: their r is not a count
// of requests. An item with neither t nor a window says nothing of time,
// so it cannot pace anything and is skipped too.
func readIETF(r *report, h http.Header) {
	lines := h[hdrRateLimit]
	if len(lines) == 0 {
		return
	}
	var items, policies [maxItems]member
	n, ok := parseList(lines, &items)
	if !ok || n == 0 {
		return
	}
	np, ok := parseList(h[hdrPolicy], &policies)
	if !ok {
		np = 0
	}
	for i := range items[:n] {
		it := &items[i]
		if !it.usable() || it.r < 0 {
			continue
		}
		var pol *member
		for j := range policies[:np] {
			p := &policies[j]
			if p.usable() && p.name == it.name && (p.pk == it.pk || p.pk == "" || it.pk == "") {
				pol = p
				break
			}
		}
		reset := it.t
		remaining := it.r
		if pol != nil {
			if pol.qu != "" && pol.qu != "requests" {
				continue
			}
			if reset < 0 {
				reset = pol.w
			}
			if pol.q >= 0 {
				remaining = min(remaining, pol.q)
			}
		}
		if reset < 0 {
			continue
		}
		r.figs[r.n] = figure{key: quotaKey{name: it.name, pk: it.pk, src: srcIETF}, remaining: remaining, reset: secondsDuration(reset)}
		r.n++
	}
}

// readLegacy reads X-RateLimit-Remaining and X-RateLimit-Reset (both
// needed), capping the remaining count at X-RateLimit-Limit if it is
// there.
func readLegacy(r *report, h http.Header, now time.Time) {
	remaining, ok := seconds(h[hdrRemaining])
	if !ok {
		return
	}
	reset, ok := legacyReset(h[hdrReset], h[hdrDate], now)
	if !ok {
		return
	}
	if limit, ok := seconds(h[hdrLimit]); ok {
		remaining = min(remaining, limit)
	}
	r.figs[r.n] = figure{key: quotaKey{src: srcLegacy}, remaining: remaining, reset: reset}
	r.n++
}

// legacyReset reads X-RateLimit-Reset, which servers send either as the
// seconds until the reset or, as GitHub does, as the Unix time of it, in
// whole or fractional seconds. The two cannot be confused near any real
// date: a value within a year after the reference instant (the response's
// Date, on the server's clock, else now), or a day before it, is a Unix
// time; else a value of at most a year of seconds is a count of them;
// else it is neither, and ignored. Measuring a Unix time from Date makes
// it immune to a skew between the server's clock and the client's.
func legacyReset(lines, date []string, now time.Time) (time.Duration, bool) {
	if len(lines) == 0 {
		return 0, false
	}
	sec, nsec, ok := decimalSeconds(trimOWS(lines[0]))
	if !ok {
		return 0, false
	}
	ref := now
	if d, ok := httpDate(date); ok {
		ref = d
	}
	if d := time.Unix(sec, nsec).Sub(ref); d >= -unixSlack && d <= maxDelay {
		return max(d, 0), true
	}
	if sec > int64(maxDelay/time.Second) {
		return 0, false
	}
	return min(time.Duration(sec)*time.Second+time.Duration(nsec), maxDelay), true
}

// retryAfter reads Retry-After: delay-seconds, or an HTTP-date measured
// from the response's Date (else from now), as a wait of at least 0.
func retryAfter(h http.Header, now time.Time) (time.Duration, bool) {
	lines := h[hdrRetryAfter]
	if s, ok := seconds(lines); ok {
		return secondsDuration(s), true
	}
	t, ok := httpDate(lines)
	if !ok {
		return 0, false
	}
	ref := now
	if d, ok := httpDate(h[hdrDate]); ok {
		ref = d
	}
	return min(max(t.Sub(ref), 0), maxDelay), true
}

// httpDate parses the first line of a date header.
func httpDate(lines []string) (time.Time, bool) {
	if len(lines) == 0 || len(lines[0]) > 64 {
		return time.Time{}, false
	}
	t, err := http.ParseTime(trimOWS(lines[0]))
	return t, err == nil
}

// seconds parses the first line of a header holding a non-negative
// integer (of at most 15 digits, which no count needs more of).
func seconds(lines []string) (int64, bool) {
	if len(lines) == 0 {
		return 0, false
	}
	s := trimOWS(lines[0])
	if len(s) == 0 || len(s) > 15 {
		return 0, false
	}
	var n int64
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int64(c-'0')
	}
	return n, true
}

// decimalSeconds parses a non-negative count of seconds with an optional
// fraction of up to 9 digits: at most 15 digits before the dot.
func decimalSeconds(s string) (sec, nsec int64, ok bool) {
	i := 0
	for ; i < len(s) && s[i] >= '0' && s[i] <= '9'; i++ {
		if i == 15 {
			return 0, 0, false
		}
		sec = sec*10 + int64(s[i]-'0')
	}
	if i == 0 {
		return 0, 0, false
	}
	if i == len(s) {
		return sec, 0, true
	}
	if s[i] != '.' || i+1 == len(s) || len(s)-i-1 > 9 {
		return 0, 0, false
	}
	scale := int64(time.Second)
	for i++; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return 0, 0, false
		}
		scale /= 10
		nsec += int64(c-'0') * scale
	}
	return sec, nsec, true
}

// secondsDuration converts a count of seconds, capped at maxDelay.
func secondsDuration(s int64) time.Duration {
	if s >= int64(maxDelay/time.Second) {
		return maxDelay
	}
	return time.Duration(s) * time.Second
}

// trimOWS trims the spaces and tabs around a field value.
func trimOWS(s string) string {
	i, j := 0, len(s)
	for i < j && (s[i] == ' ' || s[i] == '\t') {
		i++
	}
	for j > i && (s[j-1] == ' ' || s[j-1] == '\t') {
		j--
	}
	return s[i:j]
}
