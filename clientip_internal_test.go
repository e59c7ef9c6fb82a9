package ratelimit

import (
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// An entry longer than the longest a forwarding header may hold ends the
// walk wherever it stands, even among the entries TrustedHops skips: one
// byte over the bound is as long as a megabyte. The entry is a line of
// its own, so that no comma bounds it, and for Forwarded a well formed
// element (a proxy's element that is not ends the walk at any length).
func TestKeyByIPEntryLengthBound(t *testing.T) {
	const client, peer = "ip:198.51.100.1", "ip:203.0.113.7"
	tests := []struct {
		name   string
		header string
		first  string // the client's entry, left of the long one
		maxLen int
		fill   string // the long entry's first bytes, then x's
	}{
		{"X-Forwarded-For", hdrXFF, "198.51.100.1", maxEntryLen, ""},
		{"Forwarded", hdrForwarded, "for=198.51.100.1", maxElementLen, "x="},
	}
	for _, tt := range tests {
		config := IPConfig{TrustedHops: 2}
		if tt.header == hdrForwarded {
			config.Header = tt.header
		}
		k := KeyByIP(config)
		for _, c := range []struct {
			n    int
			want string
		}{
			{tt.maxLen - 1, client},
			{tt.maxLen, client},
			{tt.maxLen + 1, peer},
			{tt.maxLen + 2, peer},
		} {
			r := httptest.NewRequest("GET", "/", nil)
			r.RemoteAddr = "203.0.113.7:1"
			r.Header[tt.header] = []string{tt.first, tt.fill + strings.Repeat("x", c.n-len(tt.fill))}
			got, err := k.Key(r)
			require.NoError(t, err)
			assert.Equal(t, c.want, got, "%s: a proxy's entry of %d bytes (the longest kept is %d)", tt.name, c.n, tt.maxLen)
		}
	}
}
