// Command prometheus exports the limiter's decisions as Prometheus
// metrics through its hooks: requests allowed, limited and failed, by
// policy, and the keys the store tracks.
//
//	go -C examples run ./prometheus
//	curl -s localhost:8080/metrics | grep ratelimit_
package main

import (
	"flag"
	"fmt"
	"log"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/slidelog/ratelimit"
	"github.com/slidelog/ratelimit/examples/internal/serve"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:8080", "listen address")
	flag.Parse()

	reg := prometheus.NewRegistry()
	m := newMetrics(reg)
	l, err := ratelimit.New(5, 10*time.Second, ratelimit.KeyByIP(), ratelimit.WithName("api"),
		ratelimit.WithPolicies(ratelimit.Policy{Name: "burst", Limit: 2, Window: time.Second}),
		ratelimit.WithHooks(m.hooks()))
	if err != nil {
		log.Fatal(err)
	}
	defer l.Close()
	m.trackKeys(reg, "api", l)

	if err := serve.Run(*addr, newMux(l, reg)); err != nil {
		log.Fatal(err)
	}
}

// newMux limits the API; the metrics endpoint itself is not limited.
func newMux(l *ratelimit.Limiter, reg *prometheus.Registry) *http.ServeMux {
	mux := http.NewServeMux()
	mux.Handle("GET /api/", l.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintln(w, "hello")
	})))
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	return mux
}

// metrics are the limiter's counters. Labels are the policy's name, never
// the key: keys are unbounded and may be secrets.
type metrics struct {
	decisions *prometheus.CounterVec
	errors    prometheus.Counter
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		decisions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ratelimit_requests_total",
			Help: "Requests decided by the rate limiter, by outcome and by the policy reported.",
		}, []string{"outcome", "policy"}),
		errors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "ratelimit_errors_total",
			Help: "Requests the rate limiter could not decide (no key, store failure).",
		}),
	}
	reg.MustRegister(m.decisions, m.errors)
	return m
}

func (m *metrics) hooks() ratelimit.Hooks {
	return ratelimit.Hooks{
		OnAllow: func(_ *http.Request, res ratelimit.Result) {
			m.decisions.WithLabelValues("allowed", res.Policy).Inc()
		},
		OnLimit: func(_ *http.Request, res ratelimit.Result) {
			m.decisions.WithLabelValues("limited", res.Policy).Inc()
		},
		OnError: func(*http.Request, error) { m.errors.Inc() },
	}
}

// trackKeys exports the store's key count, eviction counters and the
// refusals it answered from memory (a flood being absorbed), read at
// scrape time.
func (m *metrics) trackKeys(reg prometheus.Registerer, limiter string, l *ratelimit.Limiter) {
	labels := prometheus.Labels{"limiter": limiter}
	reg.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "ratelimit_tracked_keys", Help: "States the limiter's memory store tracks now: one per key and policy.", ConstLabels: labels,
		}, func() float64 { return float64(l.Stats().Keys) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "ratelimit_evicted_keys_total", Help: "Live states evicted to make room (MemoryConfig.MaxKeys, EvictLeastRecent).", ConstLabels: labels,
		}, func() float64 { return float64(l.Stats().Evicted) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "ratelimit_rejected_keys_total", Help: "New keys refused because the store was full (MemoryConfig.MaxKeys).", ConstLabels: labels,
		}, func() float64 { return float64(l.Stats().Rejected) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "ratelimit_cached_refusals_total", Help: "Refusals redisstore answered from its cache, without a round trip to Redis.", ConstLabels: labels,
		}, func() float64 { return float64(l.Stats().CachedRefusals) }),
	)
}
