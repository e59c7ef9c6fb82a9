package redisstore_test

import (
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/slidelog/ratelimit"
	"github.com/slidelog/ratelimit/redisstore"
)

// TestNewErrors checks that New reports every bad option, all at once.
// It needs no Redis: go-redis connects only on first use.
func TestNewErrors(t *testing.T) {
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	defer c.Close()
	ms, err := ratelimit.NewMemoryStore()
	if err != nil {
		t.Fatal(err)
	}
	defer ms.Close()
	tests := []struct {
		name   string
		client redis.UniversalClient
		opts   []redisstore.Option
		want   []string // substrings of the error; none for success
	}{
		{name: "defaults", client: c},
		{name: "all set", client: c, opts: []redisstore.Option{
			redisstore.WithPrefix("app:"), redisstore.WithTimeout(time.Second),
			redisstore.WithFailurePolicy(redisstore.FailLocal), redisstore.WithFallback(ms),
			redisstore.WithFailureHook(func(error) {}),
		}},
		{name: "nil client", want: []string{"nil client"}},
		{name: "nil option", client: c, opts: []redisstore.Option{nil}, want: []string{"nil option"}},
		{name: "brace in prefix", client: c, opts: []redisstore.Option{redisstore.WithPrefix("a{b}:")}, want: []string{"hash tag"}},
		{name: "zero timeout", client: c, opts: []redisstore.Option{redisstore.WithTimeout(0)}, want: []string{"WithTimeout(0s)"}},
		{name: "unknown policy", client: c, opts: []redisstore.Option{redisstore.WithFailurePolicy(9)}, want: []string{"unknown policy 9"}},
		{name: "fallback without FailLocal", client: c, opts: []redisstore.Option{redisstore.WithFallback(ms)}, want: []string{"needs WithFailurePolicy(FailLocal)"}},
		{name: "nil fallback and hook", client: c, opts: []redisstore.Option{
			redisstore.WithFailurePolicy(redisstore.FailLocal), redisstore.WithFallback(nil), redisstore.WithFailureHook(nil),
		}, want: []string{"nil store", "nil func"}},
		{name: "several at once", client: c, opts: []redisstore.Option{redisstore.WithTimeout(-1), redisstore.WithPrefix("}")},
			want: []string{"WithTimeout(-1ns)", "hash tag"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st, err := redisstore.New(tt.client, tt.opts...)
			if len(tt.want) == 0 {
				if err != nil {
					t.Fatalf("error %v, want none", err)
				}
				st.Close()
				return
			}
			if err == nil {
				t.Fatalf("no error, want one mentioning %q", tt.want)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) || !strings.HasPrefix(err.Error(), "ratelimit: redisstore: ") {
					t.Errorf("error %q, want it prefixed \"ratelimit: redisstore: \" and mentioning %q", err, w)
				}
			}
		})
	}
}

// TestFailOpenResult checks what a request let through by FailOpen
// reports: the tightest policy as if the key were fresh.
func TestFailOpenResult(t *testing.T) {
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1})
	defer c.Close()
	st, err := redisstore.New(c, redisstore.WithFailurePolicy(redisstore.FailOpen))
	if err != nil {
		t.Fatal(err)
	}
	pol := []ratelimit.Policy{
		{Name: "default", Limit: 300, Window: time.Minute},
		{Name: "burst", Limit: 10, Window: time.Second},
		{Name: "slow", Limit: 10, Window: time.Hour},
	}
	res, err := st.Take(t.Context(), "k", pol, 2)
	want := ratelimit.Result{Allowed: true, Limit: 10, Remaining: 8, Policy: "slow"}
	if err != nil || res != want {
		t.Errorf("got %+v, %v; want %+v, nil", res, err, want)
	}
	if st.Failures() != 1 {
		t.Errorf("Failures() = %d, want 1", st.Failures())
	}
}

// TestTakeErrors checks the arguments Take refuses before asking Redis.
func TestTakeErrors(t *testing.T) {
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	defer c.Close()
	st, err := redisstore.New(c)
	if err != nil {
		t.Fatal(err)
	}
	pol := []ratelimit.Policy{{Name: "default", Limit: 3, Window: time.Minute}}
	tests := []struct {
		name     string
		policies []ratelimit.Policy
		cost     int
		want     string
	}{
		{"no policies", nil, 1, "no policies"},
		{"zero cost", pol, 0, "cost must be at least 1"},
		{"cost over limit", pol, 4, ratelimit.ErrCostExceedsLimit.Error()},
		{"sub-microsecond window", []ratelimit.Policy{{Name: "x", Limit: 1, Window: time.Nanosecond}}, 1, "window >= 1µs"},
		{"name used twice", append(pol, ratelimit.Policy{Name: "default", Limit: 9, Window: time.Hour}), 1, `"default" used twice`},
	}
	for _, tt := range tests {
		_, err := st.Take(t.Context(), "k", tt.policies, tt.cost)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: error %v, want one mentioning %q", tt.name, err, tt.want)
		}
	}
	if st.Failures() != 0 {
		t.Errorf("Failures() = %d, want 0: bad arguments are not Redis failures", st.Failures())
	}
}
