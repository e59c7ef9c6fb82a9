package redisstore

import (
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/slidelog/ratelimit"
)

// takeScript decides and records one request for every policy of a key.
//
// KEYS[i] is the log of policy i: a list of integer microsecond instants,
// ascending, oldest at the head. ARGV[1] is the cost; ARGV[2i] and
// ARGV[2i+1] are policy i's limit and window in microseconds. The reply is
// {allowed (0 or 1), index of the policy reported (0-based), remaining,
// retry-after, reset}, durations in microseconds; see ratelimit.Store for
// which policy is reported.
//
// Why it is written the way it is:
//   - now is the server's TIME, raised to the newest instant already
//     logged for the key, so each log stays sorted even if the server's
//     clock steps back (or a failover lands on a server whose clock lags);
//     eviction from the head and the O(1) ends of a list rely on it.
//   - The instant written is TIME's own digits when now is the server's
//     time, and otherwise, like the expiry, printed by dec in two halves
//     with '%d': Lua's tostring keeps only 14 significant digits, its '%d'
//     takes a C long (32 bits on some builds), and a number handed to
//     redis.call is exact but formatted by Redis 7.0 with %.17g, which
//     costs about twice as much. For the same reason constant indexes are
//     string literals ('0', '-1').
//   - Eviction finds the instants at or before now - window by galloping
//     from the head and then bisecting, so a key that drains many instants
//     at once costs O(log n) LINDEX calls, and one LTRIM removes them.
//   - A redis.call costs the server several times the Lua around it (the
//     arguments made into objects, the command looked up and checked, the
//     reply turned back into Lua values; TIME alone about twice LLEN), so
//     the common paths make few: a refusal reads TIME, LLEN and the ends
//     of each log (one LINDEX when it holds one instant); an admission
//     adds RPUSH, and PEXPIREAT only when the expiry has to move (below).
//     Reading a short log whole with one LRANGE instead was measured: each
//     element returned costs about half a call, so it saves a little on
//     two or three instants and costs more on an empty or a long log. The
//     cost is compared as the string '1' to skip a tonumber in the common
//     case.
//   - The expiry is absolute (PEXPIREAT), in steps of a quantum q, a
//     quarter of the window (at least 1µs): a write sets it to
//     (floor(now/q)+1)*q + window, rounded up to the millisecond, only
//     when the log was empty (a new key) or its newest instant lies in an
//     earlier quantum than now. Every log then keeps an expiry at or after
//     its newest instant + window: it holds where the expiry is set, since
//     now < (floor(now/q)+1)*q; a write that skips it adds an instant in
//     the quantum of the newest one, which the expiry already covers;
//     LTRIM keeps the expiry and a log drained whole is deleted. So no key
//     is ever without a TTL and none expires while it holds a live
//     instant. The price: an idle key lingers up to a quarter window (and
//     a millisecond) longer than the window, and a busy key pays a
//     PEXPIREAT once a quarter window instead of on every write. The
//     argument needs every writer of a log to follow the same rule: a
//     script that set the expiry to exactly the window (before this rule)
//     can leave a key that this one then lets expire early, so do not run
//     the two against one Redis at once (see the README).
const takeScript = `
local floor = math.floor
local t = redis.call('TIME')
local server = tonumber(t[1]) * 1000000 + tonumber(t[2])
local cost = 1
if ARGV[1] ~= '1' then cost = tonumber(ARGV[1]) end

local function at(k, i)
  return tonumber(redis.call('LINDEX', k, i))
end

-- Read each log's length and ends; now is the newest instant of any.
-- p[i] is {limit, window, count, head, newest} for policy i.
local now = server
local p = {}
for i = 1, #KEYS do
  local k = KEYS[i]
  local n, head, newest = redis.call('LLEN', k), nil, nil
  if n > 0 then
    head = tonumber(redis.call('LINDEX', k, '0'))
    newest = head
    if n > 1 then newest = tonumber(redis.call('LINDEX', k, '-1')) end
    if newest > now then now = newest end
  end
  p[i] = {tonumber(ARGV[2 * i]), tonumber(ARGV[2 * i + 1]), n, head, newest}
end

local worst, wretry, wrem, wreset = 0, 0, 0, 0
for i = 1, #KEYS do
  local k, q = KEYS[i], p[i]
  local limit, window, n, head = q[1], q[2], q[3], q[4]
  local cut = now - window
  if n > 0 and head <= cut then
    -- Evict: c, the number of instants <= cut, lies in [lo, hi].
    local lo, hi, step = 1, n, 1
    while lo < hi do
      local m = math.min(lo + step, hi)
      if at(k, m - 1) <= cut then
        lo, step = m, step * 2
      else
        hi = m - 1
        break
      end
    end
    while lo < hi do
      local mid = floor((lo + hi + 1) / 2)
      if at(k, mid - 1) <= cut then lo = mid else hi = mid - 1 end
    end
    if lo == n then
      redis.call('DEL', k)
      head = nil
    else
      redis.call('LTRIM', k, lo, '-1')
      head = at(k, '0')
    end
    n = n - lo
    q[3], q[4] = n, head
  end
  if n + cost > limit then
    -- cost <= limit, so n > 0 here and the index lies in [0, n).
    local j = n + cost - limit - 1
    local leave = head
    if j > 0 then leave = at(k, j) end
    local retry = leave + window - now
    if worst == 0 or retry > wretry then
      worst, wretry = i, retry
      wrem, wreset = math.max(limit - n, 0), head + window - now
    end
  end
end
if worst > 0 then
  return {0, worst - 1, wrem, wretry, wreset}
end

-- dec prints an integer below 2^53 exactly: see the comment above.
local function dec(x)
  if x < 1e9 then return string.format('%d', x) end
  return string.format('%d%09d', floor(x / 1e9), x % 1e9)
end

local stamp
if now == server then
  stamp = t[1] .. string.sub('00000' .. t[2], -6)
else
  stamp = dec(now)
end
local batch
local best, brem, breset = 0, 0, 0
for i = 1, #KEYS do
  local k, q = KEYS[i], p[i]
  local limit, window, n, head, newest = q[1], q[2], q[3], q[4], q[5]
  if cost == 1 then
    redis.call('RPUSH', k, stamp)
  else
    if batch == nil then
      batch = {}
      for j = 1, math.min(cost, 1000) do batch[j] = stamp end
    end
    local left = cost
    while left > 0 do
      local m = math.min(left, #batch)
      redis.call('RPUSH', k, unpack(batch, 1, m))
      left = left - m
    end
  end
  -- The expiry: see the comment above.
  local quantum = math.max(floor(window / 4), 1)
  local b = floor(now / quantum)
  if n == 0 or floor(newest / quantum) < b then
    redis.call('PEXPIREAT', k, dec(math.ceil(((b + 1) * quantum + window) / 1000)))
  end
  local rem = limit - n - cost
  local reset = (head or now) + window - now
  if best == 0 or rem < brem or (rem == brem and reset > breset) then
    best, brem, breset = i, rem, reset
  end
end
return {1, best - 1, brem, 0, breset}
`

// take is takeScript, run by SHA1 with EVALSHA and re-sent with EVAL when
// the server does not know it.
var take = redis.NewScript(takeScript)

// args returns the script's ARGV for policies and cost.
func args(policies []ratelimit.Policy, cost int) []any {
	a := make([]any, 1, 1+2*len(policies))
	a[0] = cost
	for _, p := range policies {
		a = append(a, p.Limit, micros(p.Window))
	}
	return a
}

// result turns the script's reply into a Result.
func result(policies []ratelimit.Policy, reply []int64) (ratelimit.Result, bool) {
	if len(reply) != 5 || reply[1] < 0 || reply[1] >= int64(len(policies)) {
		return ratelimit.Result{}, false
	}
	p := policies[reply[1]]
	return ratelimit.Result{
		Allowed:    reply[0] == 1,
		Limit:      p.Limit,
		Remaining:  int(reply[2]),
		RetryAfter: time.Duration(reply[3]) * time.Microsecond,
		Reset:      time.Duration(reply[4]) * time.Microsecond,
		Policy:     p.Name,
	}, true
}
