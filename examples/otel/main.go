// Command otel exports the limiter's decisions and its store's counters
// as OpenTelemetry metrics: requests allowed, limited and failed, by the
// policy reported (WithHooks), and the store's states, evictions,
// rejected keys and cached refusals (l.Stats, read at each collection).
//
//	go -C examples run ./otel
//	curl -s localhost:8080/api/hello; curl -s localhost:8080/metrics
//
// The metrics go through the OpenTelemetry metrics API
// (go.opentelemetry.io/otel/metric) to the SDK's meter provider, here with
// a manual reader that /metrics collects on demand and prints a data
// point a line; in production give the provider a periodic reader with
// an OTLP exporter instead, and nothing else changes.
//
// Instruments, with attributes that are the policy's name or the
// limiter's, never the client's key (keys are unbounded and may be
// secrets):
//
//	ratelimit.requests              counter {request}  ratelimit.limiter; ratelimit.outcome: allowed, limited or failed;
//	                                                   ratelimit.policy (allowed, limited) or error.type: key or store (failed)
//	ratelimit.store.states          gauge   {state}    ratelimit.limiter; one per key and policy
//	ratelimit.store.evictions       counter {state}    ratelimit.limiter
//	ratelimit.store.rejected_keys   counter {key}      ratelimit.limiter
//	ratelimit.store.cached_refusals counter {request}  ratelimit.limiter
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"net/http"
	"slices"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/slidelog/ratelimit"
	"github.com/slidelog/ratelimit/examples/internal/serve"
)

// meterName names the instrumentation scope of the metrics.
const meterName = "github.com/slidelog/ratelimit/examples/otel"

func main() {
	addr := flag.String("addr", "127.0.0.1:8080", "listen address")
	flag.Parse()

	reader := sdkmetric.NewManualReader()
	provider := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer provider.Shutdown(context.Background())

	m, err := newMetrics(provider.Meter(meterName))
	if err != nil {
		log.Fatal(err)
	}
	l, err := ratelimit.New(5, 10*time.Second, ratelimit.KeyByIP(), ratelimit.WithName("api"),
		ratelimit.WithPolicies(ratelimit.Policy{Name: "burst", Limit: 2, Window: time.Second}),
		ratelimit.WithHooks(m.hooks("api")))
	if err != nil {
		log.Fatal(err)
	}
	defer l.Close()
	reg, err := m.observeStore("api", l)
	if err != nil {
		log.Fatal(err)
	}
	defer reg.Unregister()

	if err := serve.Run(*addr, newMux(l, reader)); err != nil {
		log.Fatal(err)
	}
}

// newMux limits the API; the metrics endpoint itself is not limited.
func newMux(l *ratelimit.Limiter, reader *sdkmetric.ManualReader) *http.ServeMux {
	mux := http.NewServeMux()
	mux.Handle("GET /api/", l.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintln(w, "hello")
	})))
	mux.HandleFunc("GET /metrics", func(w http.ResponseWriter, r *http.Request) {
		points, err := collect(r.Context(), reader)
		if err != nil {
			http.Error(w, "collecting metrics failed", http.StatusInternalServerError)
			return
		}
		for _, p := range points {
			fmt.Fprintln(w, p)
		}
	})
	return mux
}

// The attributes of the instruments.
const (
	outcomeKey = attribute.Key("ratelimit.outcome")
	policyKey  = attribute.Key("ratelimit.policy")
	errorKey   = attribute.Key("error.type") // as OpenTelemetry's semantic conventions name it
	limiterKey = attribute.Key("ratelimit.limiter")
)

// metrics are the limiter's instruments, from one meter.
type metrics struct {
	meter    metric.Meter
	requests metric.Int64Counter
}

func newMetrics(meter metric.Meter) (*metrics, error) {
	requests, err := meter.Int64Counter("ratelimit.requests",
		metric.WithDescription("Requests decided by the rate limiter, by outcome, and by the policy reported or what failed."),
		metric.WithUnit("{request}"))
	if err != nil {
		return nil, err
	}
	return &metrics{meter: meter, requests: requests}, nil
}

// hooks count every decision of the limiter called name. r is nil for
// l.Allow, which has no request and so no context of its own.
func (m *metrics) hooks(name string) ratelimit.Hooks {
	limiter := limiterKey.String(name)
	count := func(r *http.Request, attrs ...attribute.KeyValue) {
		ctx := context.Background()
		if r != nil {
			ctx = r.Context()
		}
		m.requests.Add(ctx, 1, metric.WithAttributes(append(attrs, limiter)...))
	}
	return ratelimit.Hooks{
		OnAllow: func(r *http.Request, res ratelimit.Result) {
			count(r, outcomeKey.String("allowed"), policyKey.String(res.Policy))
		},
		OnLimit: func(r *http.Request, res ratelimit.Result) {
			count(r, outcomeKey.String("limited"), policyKey.String(res.Policy))
		},
		OnError: func(r *http.Request, err error) {
			count(r, outcomeKey.String("failed"), errorKey.String(failure(err)))
		},
	}
}

// failure names what failed: "key" when the request cannot be counted as
// sent (no usable key, an invalid cost: the client's fault, answered with
// a 4xx), otherwise "store" (the store failed or is full: a 503, or a
// request WithFailOpen served).
func failure(err error) string {
	var ke *ratelimit.KeyError
	if errors.As(err, &ke) || errors.Is(err, ratelimit.ErrNoKey) || errors.Is(err, ratelimit.ErrInvalidCost) {
		return "key"
	}
	return "store"
}

// observeStore reports l's store counters under the limiter's name, read
// with one l.Stats() at each collection. The caller unregisters the
// callback when l is closed.
func (m *metrics) observeStore(name string, l *ratelimit.Limiter) (metric.Registration, error) {
	states, err1 := m.meter.Int64ObservableGauge("ratelimit.store.states",
		metric.WithDescription("States the limiter's memory store tracks now: one per key and policy."),
		metric.WithUnit("{state}"))
	evictions, err2 := m.meter.Int64ObservableCounter("ratelimit.store.evictions",
		metric.WithDescription("Live states evicted to make room (MemoryConfig.MaxKeys, EvictLeastRecent)."),
		metric.WithUnit("{state}"))
	rejected, err3 := m.meter.Int64ObservableCounter("ratelimit.store.rejected_keys",
		metric.WithDescription("New keys refused because the store was full (MemoryConfig.MaxKeys)."),
		metric.WithUnit("{key}"))
	cached, err4 := m.meter.Int64ObservableCounter("ratelimit.store.cached_refusals",
		metric.WithDescription("Refusals redisstore answered from its cache, without a round trip to Redis."),
		metric.WithUnit("{request}"))
	if err := errors.Join(err1, err2, err3, err4); err != nil {
		return nil, err
	}
	attrs := metric.WithAttributeSet(attribute.NewSet(limiterKey.String(name)))
	return m.meter.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		s := l.Stats()
		o.ObserveInt64(states, int64(s.Keys), attrs)
		o.ObserveInt64(evictions, int64(s.Evicted), attrs)
		o.ObserveInt64(rejected, int64(s.Rejected), attrs)
		o.ObserveInt64(cached, int64(s.CachedRefusals), attrs)
		return nil
	}, states, evictions, rejected, cached)
}

// collect reads every int64 data point from reader as
// "name{attribute=value,...} value", sorted.
func collect(ctx context.Context, reader *sdkmetric.ManualReader) ([]string, error) {
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(ctx, &rm); err != nil {
		return nil, err
	}
	var points []string
	add := func(name string, dps []metricdata.DataPoint[int64]) {
		for _, dp := range dps {
			points = append(points, fmt.Sprintf("%s{%s} %d", name, dp.Attributes.Encoded(attribute.DefaultEncoder()), dp.Value))
		}
	}
	for _, sm := range rm.ScopeMetrics {
		for _, mt := range sm.Metrics {
			switch data := mt.Data.(type) {
			case metricdata.Sum[int64]:
				add(mt.Name, data.DataPoints)
			case metricdata.Gauge[int64]:
				add(mt.Name, data.DataPoints)
			}
		}
	}
	slices.Sort(points)
	return points, nil
}
