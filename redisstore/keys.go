package redisstore

import (
	"crypto/sha256"
	"encoding/base64"
	"strings"

	"github.com/slidelog/ratelimit"
)

// DefaultPrefix starts every key the store writes unless WithPrefix says
// otherwise.
const DefaultPrefix = "ratelimit:"

// keys returns the Redis key of each policy's state, in the set's order,
// for the client key key:
//
//	<prefix>{<digest of key>}:<digest of set.ID()>:<policy name>
//
// each digest the first bytes of a SHA-256 in unpadded base64url: 16 bytes
// (22 characters) of the client key's, 8 (11 characters) of the set's.
// The client key is hashed so that secrets (API keys, tokens) and odd
// bytes never reach Redis, and every key has the same short length: the
// server hashes and compares every key of every call, so a short key is
// a cheaper call. 128 bits keep clients apart with a chance of collision
// below one in 10^20 for a billion of them. The digest sits in a hash tag
// so that all of a client's keys share a Cluster slot, whatever the set
// (base64url has no brace). The set's digest keeps sets apart, as the
// Store contract asks: a count belongs to a key, a set and one of its
// policies, so two sets that share a policy (or a set whose limit, window
// or algorithm changed) never read each other's state. The policy's name
// is unique within its set.
//
// With marker set, one more key follows: <prefix>{<digest>}:<set digest>,
// which holds the instant of the client's latest Reset under the set
// (policy names are never empty, so it is no policy's key).
func keys(prefix, key string, set ratelimit.PolicySet, marker bool) []string {
	sum := sha256.Sum256([]byte(key))
	id := sha256.Sum256([]byte(set.ID()))
	b64 := base64.RawURLEncoding
	// {digest}:digest:
	var mid [1 + keyDigestLen + 2 + setDigestLen + 1]byte
	mid[0] = '{'
	b64.Encode(mid[1:], sum[:keyDigestBytes])
	mid[1+keyDigestLen] = '}'
	mid[2+keyDigestLen] = ':'
	b64.Encode(mid[3+keyDigestLen:], id[:setDigestBytes])
	mid[len(mid)-1] = ':'
	n := set.Len()
	ks := make([]string, n, n+1)
	if marker {
		ks = append(ks, prefix+string(mid[:len(mid)-1]))
	}
	for i := range n {
		name := set.At(i).Name
		var b strings.Builder
		b.Grow(len(prefix) + len(mid) + len(name))
		b.WriteString(prefix)
		b.Write(mid[:])
		b.WriteString(name)
		ks[i] = b.String()
	}
	return ks
}

// How much of each digest names a key, in bytes and in base64url
// characters.
const (
	keyDigestBytes = 16
	keyDigestLen   = (keyDigestBytes*8 + 5) / 6
	setDigestBytes = 8
	setDigestLen   = (setDigestBytes*8 + 5) / 6
)
