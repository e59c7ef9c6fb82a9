package ratelimit

import (
	"crypto/sha256"
	"encoding/base64"
	"net/http"
	"strconv"
	"time"
	"unsafe"
)

// HeaderSet selects the rate-limit headers a response carries.
type HeaderSet int

const (
	// HeadersNone sends no rate-limit headers (Retry-After still goes on
	// every 429).
	HeadersNone HeaderSet = iota
	// HeadersLegacy sends X-RateLimit-Limit, X-RateLimit-Remaining and
	// X-RateLimit-Reset, as GitHub and most Go limiters do.
	HeadersLegacy
	// HeadersIETF sends RateLimit-Policy and RateLimit as in
	// draft-ietf-httpapi-ratelimit-headers-10.
	HeadersIETF
	// HeadersBoth sends both sets; the default.
	HeadersBoth
)

// ResetFormat selects what X-RateLimit-Reset carries.
type ResetFormat int

const (
	// ResetSeconds sends the seconds until the quota grows again, rounded
	// up: the same figure as RateLimit's t, and immune to client clock
	// skew. The default.
	ResetSeconds ResetFormat = iota
	// ResetUnix sends the Unix time, in seconds rounded up, at which the
	// quota grows again, as GitHub does.
	ResetUnix
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
func ceilSeconds(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	return int64((d + time.Second - 1) / time.Second)
}

// headerValues holds one response's header values. The middleware
// allocates it once per request (alone, or inside the decision it puts in
// the context) and points every header at it, instead of allocating a
// slice and a string per header.
//
// buf holds the formatted numbers of a typical response, sized so that
// the whole fits a small size class; a response needing more (long policy
// names, huge windows, a partition key) spills to one more allocation,
// which append makes on its own.
type headerValues struct {
	vals [6]string
	buf  [32]byte
}

// writeHeaders writes the headers for d, which the store decided, into h,
// with hv as the only memory they need. Numbers are formatted into hv.buf,
// or into the array append moves to if it fills; the strings made from
// either alias bytes that are never written again, so they stay immutable
// as strings must.
func (l *Limiter) writeHeaders(h http.Header, d *Decision, hv *headerValues) {
	p, res := d.plan, d.Result
	b := hv.buf[:0]
	str := func(from int) string { return unsafe.String(&b[from], len(b)-from) }
	reset := ceilSeconds(res.Reset)

	if l.headers == HeadersLegacy || l.headers == HeadersBoth {
		hv.vals[0] = p.limitHV[p.index(res.Policy)]
		i := len(b)
		b = strconv.AppendInt(b, int64(res.Remaining), 10)
		hv.vals[1] = str(i)
		i = len(b)
		if l.resetFmt == ResetUnix {
			b = strconv.AppendInt(b, l.wallClock().Add(res.Reset+time.Second-1).Unix(), 10)
		} else {
			b = strconv.AppendInt(b, reset, 10)
		}
		hv.vals[2] = str(i)
		h[hdrLimit] = hv.vals[0:1:1]
		h[hdrRemaining] = hv.vals[1:2:2]
		h[hdrReset] = hv.vals[2:3:3]
	}
	if l.headers == HeadersIETF || l.headers == HeadersBoth {
		hv.vals[3] = p.policyHV
		i := len(b)
		b = append(b, '"')
		b = append(b, res.Policy...)
		b = append(b, `";r=`...)
		b = strconv.AppendInt(b, int64(res.Remaining), 10)
		b = append(b, ";t="...)
		b = strconv.AppendInt(b, reset, 10)
		if l.pkSecret != nil {
			var pk [9]byte
			b = append(b, ";pk=:"...)
			b = base64.StdEncoding.AppendEncode(b, partitionKey(&pk, l.pkSecret, d.key))
			b = append(b, ':')
		}
		hv.vals[4] = str(i)
		h[hdrPolicy] = hv.vals[3:4:4]
		h[hdrRateLimit] = hv.vals[4:5:5]
	}
	// Only a refusal says when to come back: a request served in dry run
	// was not refused.
	if d.Outcome == Refuse {
		i := len(b)
		b = strconv.AppendInt(b, max(1, ceilSeconds(res.RetryAfter)), 10)
		hv.vals[5] = str(i)
		h[hdrRetryAfter] = hv.vals[5:6:6]
	}
}

// partitionKey returns RateLimit's pk for key: the first 9 bytes of
// SHA-256(secret || key), so that clients can tell partitions apart while
// the key itself (an API key, an address) never leaves the server and
// cannot be guessed back without the per-limiter secret.
func partitionKey(dst *[9]byte, secret []byte, key string) []byte {
	var buf [320]byte
	b := append(buf[:0], secret...)
	b = append(b, key...)
	sum := sha256.Sum256(b)
	copy(dst[:], sum[:])
	return dst[:]
}
