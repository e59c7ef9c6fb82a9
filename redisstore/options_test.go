package redisstore_test

import (
	"errors"
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
	ms, err := ratelimit.NewMemoryStore(ratelimit.MemoryConfig{})
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
			redisstore.WithFailureHook(func(error) {}), redisstore.WithRefusalCache(0),
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
		{name: "client holding a nil pointer", client: (*redis.Client)(nil), want: []string{"nil client"}},
		{name: "fallback holding a nil pointer", client: c, opts: []redisstore.Option{
			redisstore.WithFailurePolicy(redisstore.FailLocal), redisstore.WithFallback((*redisstore.Store)(nil)),
		}, want: []string{"nil store"}},
		{name: "negative refusal cache", client: c, opts: []redisstore.Option{redisstore.WithRefusalCache(-1)}, want: []string{"WithRefusalCache(-1)"}},
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
// reports: the tightest policy when each has its full quota less
// the cost and nothing counted (no Reset), at the local clock's time.
func TestFailOpenResult(t *testing.T) {
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1, DialerRetries: 1})
	defer c.Close()
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	st, err := redisstore.New(c, redisstore.WithFailurePolicy(redisstore.FailOpen), redisstore.WithLocalClock(func() time.Time { return now }))
	if err != nil {
		t.Fatal(err)
	}
	set := policySet(t,
		ratelimit.Policy{Name: "default", Limit: 300, Window: time.Minute},
		ratelimit.Policy{Name: "slow", Limit: 10, Window: time.Hour},
		ratelimit.Policy{Name: "burst", Limit: 10, Window: time.Second},
	)
	res, err := st.Take(t.Context(), "k", set, 2)
	// burst and slow tie: the first in the set's order, burst.
	want := ratelimit.Result{Allowed: true, Limit: 10, Remaining: 8, Policy: "burst", Window: time.Second, At: now}
	if err != nil || res != want {
		t.Errorf("got %+v, %v; want %+v, nil", res, err, want)
	}
	if st.Failures() != 1 {
		t.Errorf("Failures() = %d, want 1", st.Failures())
	}
}

// TestArgumentErrors checks the arguments the store refuses before asking
// Redis, with the errors of the Store contract, counting no failure.
func TestArgumentErrors(t *testing.T) {
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	defer c.Close()
	st, err := redisstore.New(c)
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	set := policySet(t, ratelimit.Policy{Name: "default", Limit: 3, Window: time.Minute})
	empty := ratelimit.PolicySet{}
	at := time.Now()
	tests := []struct {
		name string
		err  error
		want error
	}{
		{"Take, empty set", take(st.Take(ctx, "k", empty, 1)), nil},
		{"Take, cost 0", take(st.Take(ctx, "k", set, 0)), ratelimit.ErrInvalidCost},
		{"Take, cost over the limit", take(st.Take(ctx, "k", set, 4)), ratelimit.ErrInvalidCost},
		{"Peek, empty set", take(st.Peek(ctx, "k", empty)), nil},
		{"Reset, empty set", st.Reset(ctx, "k", empty), nil},
		{"Refund, empty set", st.Refund(ctx, "k", empty, 1, at), nil},
		{"Refund, cost -1", st.Refund(ctx, "k", set, -1, at), ratelimit.ErrInvalidCost},
		{"Refund, cost over the limit", st.Refund(ctx, "k", set, 4, at), ratelimit.ErrInvalidCost},
	}
	for _, tt := range tests {
		if tt.err == nil || tt.want != nil && !errors.Is(tt.err, tt.want) {
			t.Errorf("%s: error %v, want one matching %v", tt.name, tt.err, tt.want)
		}
	}
	if st.Failures() != 0 {
		t.Errorf("Failures() = %d, want 0: bad arguments are not Redis failures", st.Failures())
	}
}

// take returns the error of a call that returns a Result too.
func take(_ ratelimit.Result, err error) error { return err }
