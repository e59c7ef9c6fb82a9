package redisstore_test

import (
	"testing"

	"github.com/slidelog/ratelimit/redisstore"
)

// The decision benchmark, which compares the store with a bare PING and
// with github.com/go-redis/redis_rate, lives in the benchmarks module
// (BenchmarkRedisDecision in benchmarks/redis_test.go), so that
// redis_rate never enters this module's go.mod.

// BenchmarkMemoryUsage reports MEMORY USAGE of one client's log under the
// default prefix, at 1 and 300 requests, for the store and for a sorted
// set; ns/op means nothing here.
func BenchmarkMemoryUsage(b *testing.B) {
	c := sharedClient(b)
	list, zset := keyBytes(b, c, redisstore.DefaultPrefix)
	for b.Loop() {
	}
	b.ReportMetric(float64(list[0]), "list-B@1")
	b.ReportMetric(float64(list[1]), "list-B@300")
	b.ReportMetric(float64(zset[0]), "zset-B@1")
	b.ReportMetric(float64(zset[1]), "zset-B@300")
}
