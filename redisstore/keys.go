package redisstore

import (
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"strings"
	"time"

	"github.com/slidelog/ratelimit"
)

// DefaultPrefix starts every key the store writes unless WithPrefix says
// otherwise.
const DefaultPrefix = "ratelimit:"

// keys returns the Redis key of each policy's log for the client key key.
//
// The client key is hashed so that secrets (API keys, tokens) and odd
// bytes never reach Redis, and every key has the same short length. The
// hash sits in a hash tag so that all of a client's policies share a
// Cluster slot. The window is part of the name so that changing a
// policy's window starts a fresh log instead of reading one kept under
// another window.
func keys(prefix, key string, policies []ratelimit.Policy) []string {
	sum := sha256.Sum256([]byte(key))
	var tag [2*sha256.Size + 3]byte
	tag[0] = '{'
	hex.Encode(tag[1:], sum[:])
	tag[len(tag)-2] = '}'
	tag[len(tag)-1] = ':'
	ks := make([]string, len(policies))
	for i, p := range policies {
		var b strings.Builder
		b.Grow(len(prefix) + len(tag) + len(p.Name) + 24)
		b.WriteString(prefix)
		b.Write(tag[:])
		b.WriteString(p.Name)
		b.WriteByte(':')
		b.WriteString(windowName(p.Window))
		ks[i] = b.String()
	}
	return ks
}

// windowName writes w compactly and exactly in the largest whole unit of
// seconds, milliseconds or microseconds ("60s", "1500ms", "250us"); the
// store counts time in whole microseconds (see micros).
func windowName(w time.Duration) string {
	us := micros(w)
	switch {
	case us%1e6 == 0:
		return strconv.FormatInt(us/1e6, 10) + "s"
	case us%1e3 == 0:
		return strconv.FormatInt(us/1e3, 10) + "ms"
	}
	return strconv.FormatInt(us, 10) + "us"
}

// micros is w in whole microseconds, rounded up so that a window never
// shrinks: Redis's TIME has microsecond resolution.
func micros(w time.Duration) int64 {
	return int64((w + time.Microsecond - 1) / time.Microsecond)
}
