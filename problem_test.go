package ratelimit_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/slidelog/ratelimit"
	"github.com/slidelog/ratelimit/internal/fakeclock"
)

// A client that asks for problem details gets the draft's quota-exceeded
// problem; any other gets the text body.
func TestProblemDetails(t *testing.T) {
	l := newLimiter(t, 1, time.Minute, ratelimit.KeyByIP(), ratelimit.WithClock(fakeclock.New().Now),
		ratelimit.WithPolicies(ratelimit.Policy{Name: "burst", Limit: 5, Window: time.Second}))
	h := l.Handler(okHandler)
	get(h, "192.0.2.1:1")
	for _, c := range []struct {
		accept  []string // Accept lines
		problem bool
	}{
		{[]string{"application/problem+json"}, true},
		{[]string{"application/json, application/problem+json;q=0.9"}, true},
		{[]string{"text/html, APPLICATION/PROBLEM+JSON"}, true},
		{[]string{"text/html", "application/problem+json"}, true}, // a second line
		{[]string{`application/problem+json; charset="utf-8"`}, true},
		{[]string{"application/problem+json;q=0"}, false},
		{[]string{"application/problem+json;q=0.0"}, false},
		{[]string{"application/problem+json;q=abc"}, false},
		{[]string{`application/problem+json;q="0.5"`}, false}, // q must be a token
		// Not a media range of its own, but a parameter's quoted value.
		{[]string{`text/plain; note="a, application/problem+json, b"`}, false},
		{[]string{"application/json"}, false},
		{[]string{"*/*"}, false},
		{[]string{"application/*"}, false},
		{nil, false},
	} {
		var hdr []string
		for _, line := range c.accept {
			hdr = append(hdr, "Accept", line)
		}
		w := get(h, "192.0.2.1:1", hdr...)
		require.Equal(t, http.StatusTooManyRequests, w.Code, "Accept %q: status", c.accept)
		ct := w.Header().Get("Content-Type")
		if !c.problem {
			assert.Equal(t, "text/plain; charset=utf-8", ct, "Accept %q: Content-Type, want the text body", c.accept)
			continue
		}
		assert.Equal(t, "application/problem+json", ct, "Accept %q: Content-Type", c.accept)
		var body struct {
			Type             string   `json:"type"`
			Title            string   `json:"title"`
			Status           int      `json:"status"`
			Detail           string   `json:"detail"`
			ViolatedPolicies []string `json:"violated-policies"`
		}
		dec := json.NewDecoder(w.Body)
		dec.DisallowUnknownFields()
		require.NoError(t, dec.Decode(&body), "Accept %q: body %q", c.accept, w.Body.String())
		assert.Equal(t, "https://iana.org/assignments/http-problem-types#quota-exceeded", body.Type, "Accept %q: type", c.accept)
		assert.NotEmpty(t, body.Title, "Accept %q: title", c.accept)
		assert.Equal(t, 429, body.Status, "Accept %q: status", c.accept)
		assert.Equal(t, "Too many requests: retry after 60 s.", body.Detail, "Accept %q: detail", c.accept)
		assert.Equal(t, []string{"default"}, body.ViolatedPolicies, "Accept %q: violated-policies", c.accept)
		assert.NotEmpty(t, w.Header().Get("Retry-After"), "Accept %q: Retry-After", c.accept)
		assert.NotEmpty(t, w.Header().Get("RateLimit"), "Accept %q: RateLimit", c.accept)
	}
}

// A refused client's Accept header, however long, costs the same few
// allocations as a short one: only its first 4 KiB are read, once, in
// place. The bytes are counted, not timed.
func TestRefusalWithHugeAcceptAllocatesLittle(t *testing.T) {
	// accept returns an Accept line of n bytes or a little more: lead,
	// then pad, media ranges that are not problem details, then tail.
	accept := func(n int, lead, pad, tail string) string {
		return lead + strings.Repeat(pad, n/len(pad)+1) + tail
	}
	const kib, mib = 1 << 10, 1 << 20
	const others = `text/html;level=1;note="a, b", `
	for _, c := range []struct {
		name            string
		lead, pad, tail string
		problem         bool
	}{
		// The parser reads to the cap and finds nothing.
		{"text", "", others, "application/json", false},
		// Past the cap, problem details go unseen; within it, found.
		{"problem details last", "", others, "application/problem+json", false},
		{"problem details first", "application/problem+json;q=0.5, ", others, "application/json", true},
		// Qualities that are no numbers, each one refused.
		{"bad qualities", "", "application/problem+json;q=x, ", "application/json", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			perRequest := map[int]uint64{}
			for _, size := range []int{kib, mib} {
				l := newLimiter(t, 1, time.Minute, ratelimit.KeyByIP(), ratelimit.WithClock(fakeclock.New().Now))
				h := l.Handler(okHandler)
				get(h, "192.0.2.1:1")
				r := httptest.NewRequest("GET", "/", nil)
				r.RemoteAddr = "192.0.2.1:1"
				r.Header.Set("Accept", accept(size, c.lead, c.pad, c.tail))
				w := &headerWriter{h: make(http.Header)}
				serve := func() {
					clear(w.h)
					h.ServeHTTP(w, r)
				}
				serve()
				require.Equal(t, http.StatusTooManyRequests, w.status, "%d bytes of Accept: status", size)
				want := "text/plain; charset=utf-8"
				if c.problem || size == kib && strings.Contains(c.tail, "problem") {
					want = "application/problem+json"
				}
				assert.Equal(t, want, w.h.Get("Content-Type"), "%d bytes of Accept: Content-Type", size)
				perRequest[size] = mwBytesPerRun(20, serve)
				assert.Less(t, perRequest[size], uint64(64*kib), "%d bytes of Accept: bytes allocated per refusal", size)
			}
			if !strings.Contains(c.tail, "problem") { // the same answer to both
				assert.LessOrEqual(t, perRequest[mib], perRequest[kib]+kib,
					"bytes allocated per refusal with 1 MiB of Accept, want no more than with 1 KiB (%d)", perRequest[kib])
			}
		})
	}
}

// The default refusal picks its form, problem details or text, from the
// request's Accept, so it says so in Vary (RFC 9110, section 12.5.5): a
// shared cache must not give one client's form to another. A Vary that a
// middleware in front of the limiter set is kept, and Accept named once.
func TestRefusalVariesByAccept(t *testing.T) {
	l := newLimiter(t, 1, time.Minute, ratelimit.KeyByIP(), ratelimit.WithClock(fakeclock.New().Now))
	h := l.Handler(okHandler)
	get(h, "192.0.2.1:1")
	for _, c := range []struct {
		name   string
		accept []string // Accept lines
		vary   []string // Vary lines set in front of the limiter
		want   []string
	}{
		{"no Accept", nil, nil, []string{"Accept"}},
		{"text", []string{"text/plain"}, nil, []string{"Accept"}},
		{"problem details", []string{"application/problem+json"}, nil, []string{"Accept"}},
		{"text, a Vary set before", []string{"text/plain"}, []string{"Accept-Encoding"}, []string{"Accept-Encoding", "Accept"}},
		{"problem details, a Vary set before", []string{"application/problem+json"}, []string{"Accept-Encoding"}, []string{"Accept-Encoding", "Accept"}},
		{"Accept already named", []string{"text/plain"}, []string{"Origin, accept"}, []string{"Origin, accept"}},
		{"every field", []string{"application/problem+json"}, []string{"*"}, []string{"*"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			vary := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header()["Vary"] = append([]string(nil), c.vary...)
				h.ServeHTTP(w, r)
			})
			var hdr []string
			for _, line := range c.accept {
				hdr = append(hdr, "Accept", line)
			}
			w := get(vary, "192.0.2.1:1", hdr...)
			require.Equal(t, http.StatusTooManyRequests, w.Code, "status")
			assert.Equal(t, c.want, w.Header().Values("Vary"), "Vary")
		})
	}
}

// The default refusal, in either form, with either set of rate-limit
// headers or both, sends at most 8 header fields: a Go map of more leaves
// its one group of 8 for a table, and net/http copies the map as the
// status is written, so that a ninth field doubles what a refusal costs
// (see defaultDenied).
func TestRefusalFitsEightHeaders(t *testing.T) {
	for _, headers := range []ratelimit.HeaderSet{ratelimit.HeadersLegacy | ratelimit.HeadersIETF | ratelimit.HeadersUnixReset, ratelimit.HeadersLegacy, ratelimit.HeadersIETF} {
		for _, accept := range []string{"", "application/problem+json"} {
			l := newLimiter(t, 1, time.Minute, ratelimit.KeyByIP(), ratelimit.WithClock(fakeclock.New().Now), ratelimit.WithHeaders(headers))
			h := l.Handler(okHandler)
			get(h, "192.0.2.1:1")
			w := get(h, "192.0.2.1:1", "Accept", accept)
			require.Equal(t, http.StatusTooManyRequests, w.Code, "status")
			assert.LessOrEqual(t, len(w.Header()), 8, "header fields of a 429 (headers %v, Accept %q): %v", headers, accept, w.Header())
		}
	}
}

// A denied handler of the application's own picks its own form: the
// limiter adds no Vary to its answer.
func TestDeniedHandlerGetsNoVary(t *testing.T) {
	l := newLimiter(t, 1, time.Minute, ratelimit.KeyByIP(), ratelimit.WithClock(fakeclock.New().Now),
		ratelimit.WithDeniedHandler(func(w http.ResponseWriter, _ *http.Request, _ ratelimit.Result) {
			w.WriteHeader(http.StatusTooManyRequests)
		}))
	h := l.Handler(okHandler)
	get(h, "192.0.2.1:1")
	w := get(h, "192.0.2.1:1", "Accept", "application/problem+json")
	require.Equal(t, http.StatusTooManyRequests, w.Code, "status")
	assert.Empty(t, w.Header().Values("Vary"), "Vary")
}

// The Vary a refusal adds Accept to is copied, not appended to in place:
// a handler in front of the limiter that keeps its Vary slice, with room
// to spare, finds it as it left it.
func TestRefusalLeavesAVarySetBeforeUntouched(t *testing.T) {
	l := newLimiter(t, 1, time.Minute, ratelimit.KeyByIP(), ratelimit.WithClock(fakeclock.New().Now))
	inner := l.Handler(okHandler)
	backing := []string{"Origin", "kept"}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header()["Vary"] = backing[:1]
		inner.ServeHTTP(w, r)
	})
	get(h, "192.0.2.1:1")
	w := get(h, "192.0.2.1:1")
	require.Equal(t, http.StatusTooManyRequests, w.Code, "status")
	assert.Equal(t, []string{"Origin", "Accept"}, w.Header().Values("Vary"), "Vary")
	assert.Equal(t, []string{"Origin", "kept"}, backing, "the slice set in front of the limiter")
}
