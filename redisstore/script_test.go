package redisstore_test

import (
	"context"
	"fmt"
	"math/big"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/slidelog/ratelimit"
	"github.com/slidelog/ratelimit/redisstore"
	"github.com/slidelog/ratelimit/storetest"
)

// arithmetic runs the library's integer arithmetic in Redis's Lua, as a
// script made of the library's helpers (up to its functions' context):
// for each triple (a, b, c) it returns floor(a*b/c), ceil(a*b/c) and
// floor(a/c), which the library writes out where a < 2^53.
var arithmetic = redis.NewScript(helpers() + `
init()
local out = {}
for i = 5, #ARGV, 3 do
  local a, b, c = tonumber(ARGV[i]), tonumber(ARGV[i + 1]), tonumber(ARGV[i + 2])
  out[#out + 1] = mulDivFloor(a, b, c)
  out[#out + 1] = mulDivCeil(a, b, c)
  out[#out + 1] = floor(a / c)
end
return out
`)

// helpers returns the library's helpers, without its first line, which
// names the library.
func helpers() string {
	lib := redisstore.Library
	lib = lib[strings.IndexByte(lib, '\n')+1:]
	return lib[:strings.Index(lib, "-- A call's context")]
}

// TestArithmetic checks the scripts' multiplication and division against
// math/big where Lua's doubles cannot hold a*b exactly, with the
// quotients the algorithms need (below 2^53), and products one more or
// one less than a multiple of c, where a rounded product would round the
// quotient the wrong way.
func TestArithmetic(t *testing.T) {
	c := sharedClient(t)
	rng := rand.New(rand.NewPCG(5, 8))
	type triple struct{ a, b, c int64 }
	var cases []triple
	for range 300 {
		// A count up to 2^31 and a window up to two years in µs.
		a := 1 + rng.Int64N(1<<31)
		cc := 1 + rng.Int64N(63_072_000_000_000)
		b := rng.Int64N(cc + 1) // b <= c keeps the quotient below a
		cases = append(cases, triple{a, b, cc})
		// b such that a*b is one more or one less than a multiple of c,
		// where the product of doubles rounds to the multiple.
		if inv := new(big.Int).ModInverse(big.NewInt(a), big.NewInt(cc)); inv != nil && cc > 2 {
			cases = append(cases, triple{a, inv.Int64(), cc}, triple{a, cc - inv.Int64(), cc})
		}
		// Small divisors, where remainders of 1 are common.
		cases = append(cases, triple{a, rng.Int64N(1 << 40), 2 + rng.Int64N(3)})
		// Products below 2^53, which are divided as doubles, one more or
		// one less than a multiple of c.
		sa, sc := 1+rng.Int64N(1<<20), 3+rng.Int64N(1<<32)
		if inv := new(big.Int).ModInverse(big.NewInt(sa), big.NewInt(sc)); inv != nil {
			cases = append(cases, triple{sa, inv.Int64(), sc}, triple{sa, sc - inv.Int64(), sc})
		}
	}
	cases = append(cases, triple{0, 5, 7}, triple{5, 0, 7}, triple{1 << 31, 63_072_000_000_000, 63_072_000_000_000},
		triple{999_999, 172_800_000_000 - 1, 172_800_000_000}, triple{(1 << 31) - 1, 63_072_000_000_000 - 1, 3})
	var quotientOK []triple
	for _, x := range cases {
		// The scripts never ask for a quotient of 2^53 or more.
		if new(big.Int).Div(new(big.Int).Mul(big.NewInt(x.a), big.NewInt(x.b)), big.NewInt(x.c)).Cmp(big.NewInt(1<<53)) < 0 {
			quotientOK = append(quotientOK, x)
		}
	}
	args := []any{"", "0", "1", "0"}
	for _, x := range quotientOK {
		args = append(args, x.a, x.b, x.c)
	}
	got, err := arithmetic.Run(context.Background(), c, nil, args...).Int64Slice()
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3*len(quotientOK) {
		t.Fatalf("%d results for %d triples", len(got), len(quotientOK))
	}
	for i, x := range quotientOK {
		p := new(big.Int).Mul(big.NewInt(x.a), big.NewInt(x.b))
		q, r := new(big.Int).QuoRem(p, big.NewInt(x.c), new(big.Int))
		ceil := q.Int64()
		if r.Sign() > 0 {
			ceil++
		}
		var idiv int64
		if x.a < 1<<53 {
			idiv = x.a / x.c
		}
		if got[3*i] != q.Int64() || got[3*i+1] != ceil || got[3*i+2] != idiv {
			t.Errorf("a=%d b=%d c=%d: floor %d, ceil %d, a/c %d; want %d, %d, %d", x.a, x.b, x.c, got[3*i], got[3*i+1], got[3*i+2], q.Int64(), ceil, idiv)
		}
	}
}

// TestClockStepsBack steps the scripts' clock back an hour after a client
// filled its quota, for each algorithm: the window goes on sliding from
// the new time, so the client waits at most about a window, as RetryAfter
// says, not the hour plus a window it took before instants ahead of the
// clock were read as evidence of a step. A day's quota waits for the end
// of the day its count is in, or, after a step back of more than a day,
// of the clock's day: as RetryAfter says. After a step within the
// tolerance, a request is decided at the server's time and logged at the
// newest instant, so that the log stays in order.
func TestClockStepsBack(t *testing.T) {
	c := sharedClient(t)
	T := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	for _, a := range []ratelimit.Algorithm{ratelimit.SlidingLog, ratelimit.SlidingWindowCounter, ratelimit.GCRA} {
		t.Run(a.String(), func(t *testing.T) {
			clk := storetest.Clock{}
			clk.Set(T)
			st, _ := clockedStore(t, c, &clk, redisstore.WithRefusalCache(0))
			set := policySet(t, ratelimit.Policy{Name: "p", Limit: 3, Window: time.Second, Algorithm: a})
			takeOK(t, st, "k", set, 3)
			clk.Set(T.Add(-time.Hour))
			res := takeOK(t, st, "k", set, 1)
			if res.Allowed || res.RetryAfter > 2*time.Second || !res.At.Equal(clk.Now()) {
				t.Fatalf("an hour back: %+v, want refused for at most 2s at the new time %v", res, clk.Now())
			}
			clk.Advance(res.RetryAfter)
			if res := takeOK(t, st, "k", set, 1); !res.Allowed {
				t.Errorf("after the RetryAfter it gave: %+v, want allowed", res)
			}
		})
	}
	// A day's quota spent at noon: stepped back into the day before, the
	// count stands until its own day ends; from further back it moves to
	// the clock's day, which then ends first. Either way the RetryAfter
	// given is when a request fits again.
	for _, tt := range []struct {
		back, wait time.Duration
	}{{13 * time.Hour, 25 * time.Hour}, {37 * time.Hour, time.Hour}} {
		t.Run(fmt.Sprintf("Daily/%v back", tt.back), func(t *testing.T) {
			clk := storetest.Clock{}
			clk.Set(T)
			st, _ := clockedStore(t, c, &clk, redisstore.WithRefusalCache(0))
			set := policySet(t, ratelimit.Policy{Name: "p", Limit: 3, Algorithm: ratelimit.Daily})
			takeOK(t, st, "k", set, 3)
			clk.Set(T.Add(-tt.back))
			res := takeOK(t, st, "k", set, 1)
			if res.Allowed || res.RetryAfter != tt.wait || !res.At.Equal(clk.Now()) {
				t.Fatalf("%v back: %+v, want refused for %v at the new time %v", tt.back, res, tt.wait, clk.Now())
			}
			clk.Advance(res.RetryAfter - time.Microsecond)
			if res := takeOK(t, st, "k", set, 1); res.Allowed {
				t.Errorf("a µs before the RetryAfter it gave: %+v, want refused", res)
			}
			clk.Advance(time.Microsecond)
			if res := takeOK(t, st, "k", set, 1); !res.Allowed {
				t.Errorf("after the RetryAfter it gave: %+v, want allowed", res)
			}
		})
	}
	t.Run("within the tolerance", func(t *testing.T) {
		clk := storetest.Clock{}
		clk.Set(T)
		st, p := clockedStore(t, c, &clk)
		set := policySet(t, ratelimit.Policy{Name: "p", Limit: 3, Window: time.Second})
		takeOK(t, st, "k", set, 1)
		clk.Set(T.Add(-redisstore.StepTolerance))
		if res := takeOK(t, st, "k", set, 1); !res.Allowed || !res.At.Equal(clk.Now()) {
			t.Errorf("%v back: %+v, want allowed at the server's time %v", redisstore.StepTolerance, res, clk.Now())
		}
		got := c.LRange(context.Background(), stateKey(p, "k", set, "p"), 0, -1).Val()
		want := strconv.FormatInt(T.UnixMicro(), 10)
		if !slices.Equal(got, []string{want, want}) {
			t.Errorf("log %v, want [%s %s]", got, want, want)
		}
	})
	t.Run("the log keeps its order", func(t *testing.T) {
		clk := storetest.Clock{}
		clk.Set(T)
		st, p := clockedStore(t, c, &clk)
		set := policySet(t, ratelimit.Policy{Name: "p", Limit: 5, Window: time.Hour})
		takeOK(t, st, "k", set, 1)
		clk.Set(T.Add(time.Second))
		takeOK(t, st, "k", set, 2)
		back := T.Add(-time.Minute)
		clk.Set(back)
		takeOK(t, st, "k", set, 1)
		got := c.LRange(context.Background(), stateKey(p, "k", set, "p"), 0, -1).Val()
		b := strconv.FormatInt(back.UnixMicro(), 10)
		if !slices.Equal(got, []string{b, b, b, b}) {
			t.Errorf("log %v, want the instants ahead rewritten as %s, counted and in order", got, b)
		}
	})
}

// TestForeignValues puts values the store never writes at its keys, for
// each algorithm: each call heals the key instead of failing (a permanent
// 503, or no limit under fail-open), a Take replacing the value with a
// valid state, with a TTL, and a Peek reading it as empty without
// touching it.
func TestForeignValues(t *testing.T) {
	c := sharedClient(t)
	ctx := context.Background()
	T := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	now := strconv.FormatInt(T.UnixMicro(), 10)
	recent := strconv.FormatInt(T.UnixMicro()-1000, 10)
	old := strconv.FormatInt(T.Add(-time.Hour).UnixMicro(), 10)
	type value struct {
		name string
		put  func(k string) error
	}
	str := func(v string) func(string) error {
		return func(k string) error { return c.Set(ctx, k, v, 0).Err() }
	}
	list := func(vs ...any) func(string) error {
		return func(k string) error { return c.RPush(ctx, k, vs...).Err() }
	}
	hash := func(k string) error { return c.HSet(ctx, k, "f", "v").Err() }
	tests := []struct {
		algo   ratelimit.Algorithm
		values []value
	}{
		{ratelimit.SlidingLog, []value{
			{"a string", str("hello")},
			{"a number", str("12")},
			{"a hash", hash},
			{"a list of a word", list("x")},
			{"a list ending in a word", list(recent, "x")},
			{"a list with a word inside", list(old, "x", recent)},
			{"a list of nan", list("nan")},
			{"a list of inf", list("inf")},
			{"a list of a fraction", list(recent, "1.5")},
			{"a list of a negative", list("-5", recent)},
		}},
		{ratelimit.GCRA, []value{
			{"a word", str("hello")},
			{"a fraction", str("1.5")},
			{"a list", list(now)},
			{"a hash", hash},
		}},
		{ratelimit.SlidingWindowCounter, []value{
			{"a word", str("hello")},
			{"two fields", str("1:2")},
			{"a negative count", str(strconv.FormatInt(T.Unix(), 10) + ":-1:0")},
			{"a list", list(now)},
			{"a hash", hash},
		}},
	}
	for _, tt := range tests {
		for _, v := range tt.values {
			t.Run(tt.algo.String()+"/"+v.name, func(t *testing.T) {
				clk := storetest.Clock{}
				clk.Set(T)
				st, p := clockedStore(t, c, &clk)
				set := policySet(t, ratelimit.Policy{Name: "p", Limit: 3, Window: time.Second, Algorithm: tt.algo})
				k := stateKey(p, "k", set, "p")
				if err := v.put(k); err != nil {
					t.Fatal(err)
				}
				before, _ := c.Dump(ctx, k).Result()
				res, err := st.Peek(ctx, "k", set)
				if err != nil || !res.Allowed || res.Remaining != 3 {
					t.Errorf("Peek: %+v, %v; want the full quota", res, err)
				}
				if after, _ := c.Dump(ctx, k).Result(); after != before {
					t.Error("Peek changed the foreign value")
				}
				for i := range 2 {
					res, err := st.Take(ctx, "k", set, 1)
					if err != nil || !res.Allowed || res.Remaining != 2-i {
						t.Fatalf("Take %d: %+v, %v; want allowed with %d remaining", i, res, err, 2-i)
					}
				}
				if ttl := c.PTTL(ctx, k).Val(); ttl <= 0 {
					t.Errorf("PTTL %v after the Takes, want a TTL", ttl)
				}
				if f := st.Failures(); f != 0 {
					t.Errorf("Failures() = %d, want 0", f)
				}
			})
		}
	}
}

// TestTakeReplyLength pins the take function's short reply: an admission
// under one policy with no lease is {now, remaining, reset}, three
// elements where the full reply has nine, since a reply costs the server
// per element; a refusal, and an admission under a set of two, are full.
func TestTakeReplyLength(t *testing.T) {
	ctx := context.Background()
	c := sharedClient(t)
	st, p := newStore(t, c)
	for _, code := range []string{"g", "l", "c"} {
		set := policySet(t, ratelimit.Policy{Name: "m", Limit: 1, Window: time.Minute})
		takeOK(t, st, "warm", set, 1) // loads the library
		key := stateKey(p, "k"+code, set, "m")
		lens := make([]int, 2)
		for i := range lens {
			r, err := c.FCall(ctx, redisstore.FnTake, []string{key}, 1, 0, code, 1, 60_000_000).Int64Slice()
			if err != nil {
				t.Fatal(err)
			}
			lens[i] = len(r)
		}
		if lens[0] != 3 || lens[1] != 9 {
			t.Errorf("%s: admitted then refused: replies of %v elements, want [3 9]", code, lens)
		}
	}
	two := policySet(t, ratelimit.Policy{Name: "a", Limit: 5, Window: time.Minute}, ratelimit.Policy{Name: "b", Limit: 9, Window: time.Hour, Algorithm: ratelimit.GCRA})
	r, err := c.FCall(ctx, redisstore.FnTake, []string{stateKey(p, "two", two, "a"), stateKey(p, "two", two, "b")},
		1, 0, "l", 5, 60_000_000, "g", 9, 3_600_000_000).Int64Slice()
	if err != nil {
		t.Fatal(err)
	}
	if len(r) != 9 || r[1] != 1 {
		t.Errorf("a set of two admitted: %v, want the full reply of 9 elements, allowed", r)
	}
}
