package redisstore

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"

	"github.com/slidelog/ratelimit"
)

// DefaultPrefix starts every key the store writes unless WithPrefix says
// otherwise.
const DefaultPrefix = "ratelimit:"

// keys returns the Redis key of each policy's state, in the set's order,
// for the client key key:
//
//	<prefix>{<hex SHA-256 of key>}:<hex of the first 8 bytes of SHA-256 of set.ID()>:<policy name>
//
// The client key is hashed so that secrets (API keys, tokens) and odd
// bytes never reach Redis, and every key has the same short length. The
// hash sits in a hash tag so that all of a client's keys share a Cluster
// slot, whatever the set. The set's digest keeps sets apart, as the
// Store contract asks: a count belongs to a key, a set and one of its
// policies, so two sets that share a policy (or a set whose limit, window
// or algorithm changed) never read each other's state. The policy's name
// is unique within its set.
//
// With marker set, one more key follows: <prefix>{<hash>}:<set digest>,
// which holds the instant of the client's latest Reset under the set
// (policy names are never empty, so it is no policy's key).
func keys(prefix, key string, set ratelimit.PolicySet, marker bool) []string {
	sum := sha256.Sum256([]byte(key))
	id := sha256.Sum256([]byte(set.ID()))
	// {hash}:digest:
	var mid [1 + 2*sha256.Size + 2 + 2*setDigestBytes + 1]byte
	mid[0] = '{'
	hex.Encode(mid[1:], sum[:])
	mid[1+2*sha256.Size] = '}'
	mid[2+2*sha256.Size] = ':'
	hex.Encode(mid[3+2*sha256.Size:], id[:setDigestBytes])
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

// setDigestBytes is how much of a set's digest names its keys: 64 bits,
// so that two sets used with one client key collide with a chance of
// about one in 10^19.
const setDigestBytes = 8
