package client

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// FuzzParseList checks that parseList never panics, keeps at most
// maxItems members whose names and partition keys are as the grammar
// allows, and reads two lines as it reads them joined by a comma (RFC
// 9651's rule for a field sent in several lines), for lines that are not
// blank.
func FuzzParseList(f *testing.F) {
	for _, s := range [][2]string{
		{`"default";q=300;w=60, "burst";q=10;w=1`, `"default";r=299;t=60`},
		{`"peruser";q=65535;qu="content-bytes";w=10;pk=:sdfjLJUOUH==:`, `"a\"b";r=1`},
		{`("a" "b";x=1);y=2, tok/en:x, ?1, @-12, %"caf%c3%a9", 1.125, -7`, `"x";flag;*k=:AA==:`},
		{`"a",`, `, "b"`},
		{`"a" ,	"b"  `, `   "c"`},
	} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, a, b string) {
		var ms [maxItems]member
		n, ok := parseList([]string{a, b}, &ms)
		require.True(t, n >= 0 && n <= maxItems, "members kept: %d", n)
		if !ok {
			require.Zero(t, n, "members of a malformed field")
		}
		for _, m := range ms[:n] {
			for i := 0; i < len(m.name); i++ {
				require.True(t, m.name[i] >= 0x20 && m.name[i] <= 0x7e, "name %q: byte %d", m.name, i)
			}
			require.True(t, strings.Trim(m.pk, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/=") == "" || m.pkBad,
				"pk %q", m.pk)
		}
		if strings.TrimSpace(a) == "" || strings.TrimSpace(b) == "" || len(a)+len(b)+2 > maxFieldBytes {
			return
		}
		var joined [maxItems]member
		jn, jok := parseList([]string{a + ", " + b}, &joined)
		require.Equal(t, jok, ok, "ok of %q and %q, and of them joined", a, b)
		require.Equal(t, joined[:jn], ms[:n], "members of %q and %q, and of them joined", a, b)
	})
}

// FuzzReadReport checks that readReport never panics, whatever the
// headers, and that every figure it returns is one the Transport can
// wait on: a count of at least 0, a reset from 0 to maxDelay, and a
// Retry-After, if any, last.
func FuzzReadReport(f *testing.F) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	date := now.Format(http.TimeFormat)
	f.Add(200, `"default";q=300;w=60, "burst";q=10;w=1`, `"default";r=299;t=60`, "", "", "", "", "", "")
	f.Add(429, `"a";q=10;w=30`, `"a";r=0`, "10", "0", "1772366442", "30", date, "")
	f.Add(403, "", "", "5000", "0", "1772366442.5", now.Add(time.Minute).Format(http.TimeFormat), date, "")
	f.Add(503, `"a";q=1;qu="requests"`, `"a";r=0;t=5;pk=:AA==:`, "", "", "", "Wed, 21 Oct 2015 07:28:00 GMT", "garbage", "0")
	f.Add(429, "", "", "1", "1", "99999999999999", "999999999999999", "", "3")
	f.Fuzz(func(t *testing.T, status int, policy, ratelimit, limit, remaining, reset, retry, dateHdr, age string) {
		h := http.Header{}
		for k, v := range map[string]string{hdrPolicy: policy, hdrRateLimit: ratelimit, hdrLimit: limit,
			hdrRemaining: remaining, hdrReset: reset, hdrRetryAfter: retry, hdrDate: dateHdr, hdrAge: age} {
			if v != "" {
				h[k] = strings.Split(v, "\n")
			}
		}
		var r report
		readReport(&r, status, h, now)
		require.True(t, r.n >= 0 && r.n <= maxItems, "figures: %d", r.n)
		for i, fig := range r.figs[:r.n] {
			assert.GreaterOrEqual(t, fig.remaining, int64(0), "figure %d: remaining", i)
			assert.True(t, fig.reset >= 0 && fig.reset <= maxDelay, "figure %d: reset %v", i, fig.reset)
			if fig.key.src == srcRetryAfter {
				assert.Equal(t, r.n-1, i, "Retry-After's figure, not last")
				assert.Equal(t, r.retryAfter, fig.reset, "Retry-After's figure")
			}
		}
		assert.True(t, r.retryAfter == -1 || r.retryAfter >= 0 && r.retryAfter <= maxDelay, "Retry-After %v", r.retryAfter)
	})
}
