package ratelimit

import (
	"crypto/sha256"
	"encoding/base64"
	"net/http"
	"strconv"
	"time"
)

// HeaderSet selects the rate-limit headers a response carries: a union of
// the constants below, or 0 for none (Retry-After still goes on every
// 429).
type HeaderSet int

const (
	// HeadersLegacy sends X-RateLimit-Limit, X-RateLimit-Remaining and
	// X-RateLimit-Reset, as GitHub and most Go limiters do; the reset in
	// seconds from now, rounded up, unless HeadersUnixReset.
	HeadersLegacy HeaderSet = 1 << iota
	// HeadersIETF sends RateLimit-Policy and RateLimit as in
	// draft-ietf-httpapi-ratelimit-headers-10.
	HeadersIETF
	// HeadersUnixReset, with HeadersLegacy, makes X-RateLimit-Reset the
	// Unix time, in seconds rounded up, at which the quota grows again,
	// as GitHub sends it, instead of the seconds until then (the same
	// figure as RateLimit's t, and immune to clients' clock skew).
	HeadersUnixReset
)

// Canonical header names, written into the map directly to skip
// canonicalising them on every response.
const (
	hdrLimit       = "X-Ratelimit-Limit"
	hdrRemaining   = "X-Ratelimit-Remaining"
	hdrReset       = "X-Ratelimit-Reset"
	hdrPolicy      = "Ratelimit-Policy"
	hdrRateLimit   = "Ratelimit"
	hdrRetryAfter  = "Retry-After"
	hdrContentType = "Content-Type"
)

// ceilSeconds rounds d up to whole seconds: a wait of 1ms is 1, never 0.
// It divides before it rounds, so that no d, however long, wraps round.
func ceilSeconds(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	s := int64(d / time.Second)
	if d%time.Second != 0 {
		s++
	}
	return s
}

// unixCeil returns the Unix time of t in seconds, rounded up.
func unixCeil(t time.Time) int64 {
	s := t.Unix()
	if t.Nanosecond() != 0 {
		s++
	}
	return s
}

// SetHeaders writes into h the headers Handler sends for d: the rate-limit
// headers WithHeaders selects, when the store decided the request, and
// Retry-After when d refuses it. It is for servers that answer a Decision
// themselves.
func (l *Limiter) SetHeaders(h http.Header, d Decision) {
	if d.decided {
		l.writeHeaders(h, &d)
	}
}

// writeHeaders writes the headers for d, which the store decided, into h.
// The numbers of all the values are formatted into one string, which the
// values are cut from, and every header's slice into one array: a
// response's headers cost two allocations, whatever their number.
func (l *Limiter) writeHeaders(h http.Header, d *Decision) {
	res := &d.Result
	var buf [64]byte
	b := buf[:0]
	var ends [5]int // where each number ends in b
	reset := ceilSeconds(res.Reset)
	if l.headers&HeadersUnixReset != 0 {
		b = strconv.AppendInt(b, unixCeil(res.At.Add(max(res.Reset, 0))), 10)
	} else {
		b = strconv.AppendInt(b, reset, 10)
	}
	ends[0] = len(b)
	b = strconv.AppendInt(b, int64(res.Remaining), 10)
	ends[1] = len(b)
	b = append(b, '"')
	b = append(b, res.Policy...)
	b = append(b, `";r=`...)
	b = strconv.AppendInt(b, int64(res.Remaining), 10)
	b = append(b, ";t="...)
	b = strconv.AppendInt(b, reset, 10)
	if l.pkSecret != nil {
		b = append(b, ";pk=:"...)
		b = base64.StdEncoding.AppendEncode(b, partitionKey(l.pkSecret, d.key))
		b = append(b, ':')
	}
	ends[2] = len(b)
	if d.Outcome == Refuse {
		// Only a refusal says when to come back: a request served in dry
		// run was not refused.
		b = strconv.AppendInt(b, max(1, ceilSeconds(res.RetryAfter)), 10)
	}
	ends[3] = len(b)
	s := string(b)

	v := new([6]string)
	if l.headers&HeadersLegacy != 0 {
		v[0], v[1], v[2] = d.plan.limit(res.Policy), s[ends[0]:ends[1]], s[:ends[0]]
		h[hdrLimit], h[hdrRemaining], h[hdrReset] = v[0:1:1], v[1:2:2], v[2:3:3]
	}
	if l.headers&HeadersIETF != 0 {
		v[3], v[4] = d.plan.policyHV, s[ends[1]:ends[2]]
		h[hdrPolicy], h[hdrRateLimit] = v[3:4:4], v[4:5:5]
	}
	if d.Outcome == Refuse {
		v[5] = s[ends[2]:ends[3]]
		h[hdrRetryAfter] = v[5:6:6]
	}
}

// partitionKey returns RateLimit's pk for key: the first 9 bytes of
// SHA-256(secret || key), so that clients can tell partitions apart while
// the key itself (an API key, an address) never leaves the server and
// cannot be guessed back without the per-limiter secret.
func partitionKey(secret []byte, key string) []byte {
	h := sha256.New()
	h.Write(secret)
	h.Write([]byte(key))
	var sum [sha256.Size]byte
	return h.Sum(sum[:0])[:9]
}
