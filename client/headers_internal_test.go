package client

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// now is the instant responses are received at in these tests.
var now = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func ietf(name string, remaining int64, reset time.Duration) figure {
	return figure{key: quotaKey{name: name, src: srcIETF}, remaining: remaining, reset: reset}
}

func legacy(remaining int64, reset time.Duration) figure {
	return figure{key: quotaKey{src: srcLegacy}, remaining: remaining, reset: reset}
}

func retry(after time.Duration) figure {
	return figure{key: quotaKey{src: srcRetryAfter}, reset: after}
}

func TestReadReport(t *testing.T) {
	unix := func(d time.Duration) string { return itoa(now.Add(d).Unix()) }
	date := now.Format(http.TimeFormat)
	const sec = time.Second
	for _, tt := range []struct {
		name   string
		status int // 200 if 0
		h      http.Header
		want   []figure
		retry  *time.Duration // want retryAfter; nil for none
	}{
		{name: "nothing", h: http.Header{}},
		{name: "this library's fields", h: http.Header{
			hdrPolicy:    {`"default";q=300;w=60, "burst";q=10;w=1`},
			hdrRateLimit: {`"default";r=299;t=60`},
		}, want: []figure{ietf("default", 299, 60*sec)}},
		{name: "partition key", h: http.Header{hdrRateLimit: {`"default";r=5;t=2;pk=:cHsdsRa894==:`}},
			want: []figure{{key: quotaKey{name: "default", pk: "cHsdsRa894==", src: srcIETF}, remaining: 5, reset: 2 * sec}}},
		{name: "items over two lines and one", h: http.Header{hdrRateLimit: {`"a";r=1;t=1, "b";r=2;t=2`, `"c";r=3;t=3`}},
			want: []figure{ietf("a", 1, sec), ietf("b", 2, 2*sec), ietf("c", 3, 3*sec)}},
		{name: "an empty line adds nothing", h: http.Header{hdrRateLimit: {"", `"a";r=1;t=1`}},
			want: []figure{ietf("a", 1, sec)}},
		{name: "no t: the policy's window", h: http.Header{hdrRateLimit: {`"a";r=7`}, hdrPolicy: {`"a";q=10;w=30`}},
			want: []figure{ietf("a", 7, 30*sec)}},
		{name: "no t, no window: skipped", h: http.Header{hdrRateLimit: {`"a";r=7, "b";r=1;t=4`}, hdrPolicy: {`"a";q=10`}},
			want: []figure{ietf("b", 1, 4*sec)}},
		{name: "r above q: capped", h: http.Header{hdrRateLimit: {`"a";r=70;t=1`}, hdrPolicy: {`"a";q=10;w=30`}},
			want: []figure{ietf("a", 10, sec)}},
		{name: "policy of another partition key: not the item's", h: http.Header{
			hdrRateLimit: {`"a";r=70;t=1;pk=:AAAA:`}, hdrPolicy: {`"a";q=10;w=30;pk=:BBBB:`}},
			want: []figure{{key: quotaKey{name: "a", pk: "AAAA", src: srcIETF}, remaining: 70, reset: sec}}},
		{name: "policy without pk: the item's with one", h: http.Header{
			hdrRateLimit: {`"a";r=70;t=1;pk=:AAAA:`}, hdrPolicy: {`"a";q=10;w=30`}},
			want: []figure{{key: quotaKey{name: "a", pk: "AAAA", src: srcIETF}, remaining: 10, reset: sec}}},
		{name: "policy with pk: the item's without one", h: http.Header{
			hdrRateLimit: {`"a";r=70;t=1`}, hdrPolicy: {`"a";q=10;w=30;pk=:AAAA:`}},
			want: []figure{ietf("a", 10, sec)}},
		{name: "t=0 with a policy: 0, not the window", h: http.Header{hdrRateLimit: {`"a";r=7;t=0`}, hdrPolicy: {`"a";q=10;w=30`}},
			want: []figure{ietf("a", 7, 0)}},
		{name: "q=0: r capped at 0", h: http.Header{hdrRateLimit: {`"a";r=7;t=5`}, hdrPolicy: {`"a";q=0;w=30`}},
			want: []figure{ietf("a", 0, 5*sec)}},
		{name: "negative t: skipped, not the window", h: http.Header{hdrRateLimit: {`"a";r=1;t=-1`}, hdrPolicy: {`"a";q=10;w=30`}}},
		{name: "quota in bytes: skipped", h: http.Header{
			hdrRateLimit: {`"bytes";r=65000;t=10, "req";r=3;t=10`},
			hdrPolicy:    {`"bytes";q=65535;qu="content-bytes";w=10, "req";q=5;qu="requests";w=10`}},
			want: []figure{ietf("req", 3, 10*sec)}},
		{name: "malformed policy field: ignored, the item kept", h: http.Header{hdrRateLimit: {`"a";r=70;t=1`}, hdrPolicy: {`"a";q=10;w=30,`}},
			want: []figure{ietf("a", 70, sec)}},
		{name: "a parameter given twice: the last", h: http.Header{hdrRateLimit: {`"a";r=9;r=4;t=1`}},
			want: []figure{ietf("a", 4, sec)}},
		{name: "unknown parameters and other items skipped", h: http.Header{
			hdrRateLimit: {`tok;r=1;t=1, ("x" "y");r=1, "a";r=2;t=3;acme-x=?1;z=@12;d=%"caf%c3%a9";f=1.5;b=:AA==:;s="x\"y"`}},
			want: []figure{ietf("a", 2, 3*sec)}},
		{name: "items with bad values skipped", h: http.Header{
			hdrRateLimit: {`"dec";r=1.5;t=1, "neg";r=-1;t=1, "str";r="1";t=1, "tdec";r=1;t=0.5, "pk";r=1;t=1;pk="x", "nor";t=1, "ok";r=0;t=0`}},
			want: []figure{ietf("ok", 0, 0)}},
		{name: "escaped name kept as sent", h: http.Header{hdrRateLimit: {`"a\"b";r=1;t=1`}},
			want: []figure{ietf(`a\"b`, 1, sec)}},
		{name: "t beyond a year: capped", h: http.Header{hdrRateLimit: {`"a";r=0;t=999999999999999`}},
			want: []figure{ietf("a", 0, maxDelay)}},
		{name: "malformed RateLimit: the legacy fields instead", h: http.Header{
			hdrRateLimit: {`"a";r=1;t=1,`}, hdrRemaining: {"4"}, hdrReset: {"30"}},
			want: []figure{legacy(4, 30*sec)}},
		{name: "RateLimit and the legacy fields: RateLimit only", h: http.Header{
			hdrRateLimit: {`"default";r=9;t=5`}, hdrLimit: {"10"}, hdrRemaining: {"9"}, hdrReset: {"5"}},
			want: []figure{ietf("default", 9, 5*sec)}},
		{name: "field too long: ignored", h: http.Header{hdrRateLimit: {`"a";r=1;t=1,` + strings.Repeat(" ", maxFieldBytes) + `"b";r=1;t=1`}}},
		{name: "field of exactly 4 KiB: read", h: http.Header{hdrRateLimit: {`"a";r=1;t=1` + strings.Repeat(" ", maxFieldBytes-24) + `, "b";r=2;t=2`}},
			want: []figure{ietf("a", 1, sec), ietf("b", 2, 2*sec)}},
		{name: "too many lines: ignored", h: http.Header{hdrRateLimit: strings.Split(strings.Repeat(`"a";r=1;t=1,`, maxLines), ",")}},
		{name: "more than 16 items: the first 16", h: http.Header{hdrRateLimit: {strings.Repeat(`"a";r=1;t=1, `, 20) + `"b";r=1;t=1`}},
			want: func() []figure {
				var f []figure
				for range maxItems {
					f = append(f, ietf("a", 1, sec))
				}
				return f
			}()},

		{name: "legacy, reset in seconds", h: http.Header{hdrLimit: {"60"}, hdrRemaining: {"59"}, hdrReset: {"42"}},
			want: []figure{legacy(59, 42*sec)}},
		{name: "legacy, reset in fractional seconds", h: http.Header{hdrRemaining: {" 3 "}, hdrReset: {"1.25"}},
			want: []figure{legacy(3, 1250*time.Millisecond)}},
		{name: "legacy, Unix reset from now", h: http.Header{hdrRemaining: {"0"}, hdrReset: {unix(42 * sec)}},
			want: []figure{legacy(0, 42*sec)}},
		{name: "legacy, Unix reset from Date, on a server's clock a day ahead", h: http.Header{
			hdrRemaining: {"0"}, hdrReset: {unix(24*time.Hour + 42*sec)}, hdrDate: {now.Add(24 * time.Hour).Format(http.TimeFormat)}},
			want: []figure{legacy(0, 42*sec)}},
		{name: "legacy, Unix reset just past", h: http.Header{hdrRemaining: {"5"}, hdrReset: {unix(-3 * sec)}, hdrDate: {date}},
			want: []figure{legacy(5, 0)}},
		{name: "legacy, Unix reset a day before Date", h: http.Header{hdrRemaining: {"5"}, hdrReset: {unix(-24 * time.Hour)}, hdrDate: {date}},
			want: []figure{legacy(5, 0)}},
		{name: "legacy, Unix reset a year after Date", h: http.Header{hdrRemaining: {"0"}, hdrReset: {unix(maxDelay)}, hdrDate: {date}},
			want: []figure{legacy(0, maxDelay)}},
		{name: "legacy, remaining above the limit: capped", h: http.Header{hdrLimit: {"10"}, hdrRemaining: {"50"}, hdrReset: {"1"}},
			want: []figure{legacy(10, sec)}},
		{name: "legacy, reset in milliseconds: ignored", h: http.Header{hdrRemaining: {"1"}, hdrReset: {itoa(now.UnixMilli())}}},
		{name: "legacy, reset years away: ignored", h: http.Header{hdrRemaining: {"1"}, hdrReset: {unix(5 * 366 * 24 * time.Hour)}}},
		{name: "legacy, no reset: ignored", h: http.Header{hdrLimit: {"10"}, hdrRemaining: {"5"}}},
		{name: "legacy, garbage: ignored", h: http.Header{hdrRemaining: {"5x"}, hdrReset: {"1"}}},
		{name: "legacy, negative: ignored", h: http.Header{hdrRemaining: {"-5"}, hdrReset: {"1"}}},
		{name: "legacy, bad fraction: ignored", h: http.Header{hdrRemaining: {"5"}, hdrReset: {"1."}}},

		{name: "Retry-After on 200: ignored", h: http.Header{hdrRetryAfter: {"5"}}},
		{name: "Retry-After seconds on 429", status: 429, h: http.Header{hdrRetryAfter: {"5"}},
			want: []figure{retry(5 * sec)}, retry: after(5 * sec)},
		{name: "Retry-After date on 503, from Date", status: 503, h: http.Header{
			hdrRetryAfter: {now.Add(time.Hour + 90*sec).Format(http.TimeFormat)}, hdrDate: {now.Add(time.Hour).Format(http.TimeFormat)}},
			want: []figure{retry(90 * sec)}, retry: after(90 * sec)},
		{name: "Retry-After date in the past", status: 429, h: http.Header{hdrRetryAfter: {now.Add(-time.Minute).Format(http.TimeFormat)}},
			want: []figure{retry(0)}, retry: after(0)},
		{name: "Retry-After on 403, over a spent quota's reset", status: 403, h: http.Header{
			hdrRemaining: {"0"}, hdrReset: {"3600"}, hdrRetryAfter: {"60"}},
			want: []figure{legacy(0, 60*sec), retry(60 * sec)}, retry: after(60 * sec)},
		{name: "Retry-After leaves a quota with some left", status: 429, h: http.Header{
			hdrRateLimit: {`"a";r=0;t=100, "b";r=5;t=100`}, hdrRetryAfter: {"7"}},
			want: []figure{ietf("a", 0, 7*sec), ietf("b", 5, 100*sec), retry(7 * sec)}, retry: after(7 * sec)},
		{name: "Retry-After seconds beyond a year: capped", status: 429, h: http.Header{hdrRetryAfter: {"999999999999999"}},
			want: []figure{retry(maxDelay)}, retry: after(maxDelay)},
		{name: "Retry-After date beyond a year: capped", status: 503, h: http.Header{
			hdrRetryAfter: {now.Add(2 * maxDelay).Format(http.TimeFormat)}, hdrDate: {date}},
			want: []figure{retry(maxDelay)}, retry: after(maxDelay)},
		{name: "Retry-After garbage", status: 429, h: http.Header{hdrRetryAfter: {"soon"}}},
		{name: "Retry-After negative", status: 429, h: http.Header{hdrRetryAfter: {"-5"}}},

		{name: "from a cache: ignored", status: 429, h: http.Header{hdrAge: {"12"}, hdrRateLimit: {`"a";r=0;t=1`}, hdrRetryAfter: {"5"}}},
		{name: "Age 0: read", h: http.Header{hdrAge: {"0"}, hdrRateLimit: {`"a";r=0;t=1`}},
			want: []figure{ietf("a", 0, sec)}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			status := tt.status
			if status == 0 {
				status = http.StatusOK
			}
			var r report
			readReport(&r, status, tt.h, now)
			assert.Equal(t, tt.want, figs(&r), "figures")
			wantRetry := time.Duration(-1)
			if tt.retry != nil {
				wantRetry = *tt.retry
			}
			assert.Equal(t, wantRetry, r.retryAfter, "Retry-After")
		})
	}
}

func after(d time.Duration) *time.Duration { return &d }

func figs(r *report) []figure {
	if r.n == 0 {
		return nil
	}
	return append([]figure(nil), r.figs[:r.n]...)
}

func itoa(n int64) string {
	var b [20]byte
	i := len(b)
	for {
		i--
		b[i] = byte('0' + n%10)
		n /= 10
		if n == 0 {
			return string(b[i:])
		}
	}
}

// TestReadReportFullWithRetryAfter fills the report with items: the
// Retry-After must still find room, in place of the last of them.
func TestReadReportFullWithRetryAfter(t *testing.T) {
	h := http.Header{hdrRateLimit: {strings.Repeat(`"a";r=0;t=1, `, maxItems-1) + `"b";r=0;t=1`}, hdrRetryAfter: {"9"}}
	var r report
	readReport(&r, http.StatusTooManyRequests, h, now)
	require.Equal(t, maxItems, r.n, "figures")
	assert.Equal(t, retry(9*time.Second), r.figs[maxItems-1], "the last figure")
	assert.Equal(t, ietf("a", 0, 9*time.Second), r.figs[maxItems-2], "the one before")
}

// TestParseList checks the Structured Field List grammar (RFC 9651) on
// what it accepts and what it refuses whole.
func TestParseList(t *testing.T) {
	for _, tt := range []struct {
		in    string
		ok    bool
		names []string // of the String members
	}{
		{``, true, nil},
		{`   `, true, nil},
		{`"a"`, true, []string{"a"}},
		{`  "a" ,	"b"  `, true, []string{"a", "b"}},
		{`"a",`, false, nil},
		{`,"a"`, false, nil},
		{`"a" "b"`, false, nil},
		{`"a";`, false, nil},
		{`"a"; q=1`, true, []string{"a"}},
		{`"a";Q=1`, false, nil},
		{`"a";*x-1.y_z=1`, true, []string{"a"}},
		{`"a";q=`, false, nil},
		{`"a";flag, "b"`, true, []string{"a", "b"}},
		{`"unterminated`, false, nil},
		{`"bad\escape"`, false, nil},
		{`"a\\b", "c\"d"`, true, []string{`a\\b`, `c\"d`}},
		{"\"del\x7f\"", false, nil},
		{`"tab	inside"`, false, nil},
		{"\"non-ascii \xc3\xa9\"", false, nil},
		{`tok/en:x*, "a"`, true, []string{"a"}},
		{`1234567890123456`, false, nil},
		{`123456789012345, -1, 1.123, 123456789012.1`, true, nil},
		{`1.1234`, false, nil},
		{`1234567890123.1`, false, nil},
		{`1.`, false, nil},
		{`-`, false, nil},
		{`?1, ?0`, true, nil},
		{`?2`, false, nil},
		{`:YWJj:, ::`, true, nil},
		{`:a-b:`, false, nil},
		{`:abc`, false, nil},
		{`@1700000000, @-1`, true, nil},
		{`@1.5`, false, nil},
		{`%"caf%c3%a9"`, true, nil},
		{`%"caf%C3%A9"`, false, nil},
		{`%"caf%c"`, false, nil},
		{`%caf`, false, nil},
		{`%"caf%c`, false, nil},
		{`%"caf%`, false, nil},
		{`("a" "b";x=1);y=2, "c"`, true, []string{"c"}},
		{`("a""b")`, false, nil},
		{`("a" "b"`, false, nil},
		{`()`, true, nil},
		{`#`, false, nil},
	} {
		var ms [maxItems]member
		n, ok := parseList([]string{tt.in}, &ms)
		if !assert.Equal(t, tt.ok, ok, "parseList(%q): ok", tt.in) || !ok {
			continue
		}
		var names []string
		for _, m := range ms[:n] {
			if m.isString {
				names = append(names, m.name)
			}
		}
		assert.Equal(t, tt.names, names, "parseList(%q): String members", tt.in)
	}
}

// "Resets and waits are capped at a year": an X-RateLimit-Reset of a
// year of seconds and a fraction is no exception (the invariant
// FuzzReadReport checks: a reset from 0 to maxDelay).
func TestLegacyResetCapped(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	h := http.Header{hdrRemaining: {"0"}, hdrReset: {"31622400.5"}}
	var r report
	readReport(&r, http.StatusOK, h, now)
	require.Equal(t, 1, r.n, "figures")
	assert.LessOrEqual(t, r.figs[0].reset, maxDelay, "reset")
}

// "Parsing ... allocates nothing for a field sent in one line": neither
// RateLimit nor RateLimit-Policy, each in one line, costs an allocation.
func TestReadReportOneLineAllocatesNothing(t *testing.T) {
	h := http.Header{
		hdrPolicy:    {`"default";q=300;w=60, "burst";q=10;w=1;pk=:AAAA:`},
		hdrRateLimit: {`"default";r=299;t=60, "burst";r=9;pk=:AAAA:`},
	}
	var r report
	allocs := testing.AllocsPerRun(100, func() { readReport(&r, http.StatusOK, h, now) })
	require.Equal(t, 2, r.n, "figures")
	assert.Zero(t, allocs, "allocations per readReport")
}
