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
//   - Instants are written with string.format('%.0f'): Lua would otherwise
//     turn a number into a string with only 14 significant digits, and a
//     microsecond timestamp has 16.
//   - Eviction finds the instants at or before now - window by galloping
//     from the head and then bisecting, so a key that drains many instants
//     at once costs O(log n) LINDEX calls, and one LTRIM removes them.
//   - Each redis.call costs about a microsecond of the server's time, so
//     the common paths make few: a refusal reads TIME, LLEN and both ends
//     of each log; an admission adds RPUSH and PEXPIRE.
//   - The TTL is set on every write to the time until the newest instant
//     leaves the window; LTRIM keeps it, so no key is ever without one.
const takeScript = `
local t = redis.call('TIME')
local server = tonumber(t[1]) * 1000000 + tonumber(t[2])
local cost = tonumber(ARGV[1])

local function at(k, i)
  return tonumber(redis.call('LINDEX', k, i))
end

-- Read each log's length and ends; now is the newest instant of any.
local now = server
local counts, heads = {}, {}
for i = 1, #KEYS do
  local n = redis.call('LLEN', KEYS[i])
  counts[i] = n
  if n > 0 then
    heads[i] = at(KEYS[i], 0)
    local last = heads[i]
    if n > 1 then last = at(KEYS[i], -1) end
    if last > now then now = last end
  end
end

-- evict drops the instants at or before cut from log i and updates its
-- count and head.
local function evict(i, cut)
  local k, n = KEYS[i], counts[i]
  if n == 0 or heads[i] > cut then
    return
  end
  -- c, the number of instants <= cut, lies in [lo, hi].
  local lo, hi, step = 1, n, 1
  while lo < hi do
    local p = math.min(lo + step, hi)
    if at(k, p - 1) <= cut then
      lo, step = p, step * 2
    else
      hi = p - 1
      break
    end
  end
  while lo < hi do
    local mid = math.floor((lo + hi + 1) / 2)
    if at(k, mid - 1) <= cut then lo = mid else hi = mid - 1 end
  end
  if lo == n then
    redis.call('DEL', k)
    heads[i] = nil
  else
    redis.call('LTRIM', k, lo, -1)
    heads[i] = at(k, 0)
  end
  counts[i] = n - lo
end

local worst, wretry, wrem, wreset = 0, 0, 0, 0
for i = 1, #KEYS do
  local limit, window = tonumber(ARGV[2 * i]), tonumber(ARGV[2 * i + 1])
  evict(i, now - window)
  local n = counts[i]
  if n + cost > limit then
    -- cost <= limit, so n > 0 here and the index lies in [0, n).
    local j = n + cost - limit - 1
    local leave = heads[i]
    if j > 0 then leave = at(KEYS[i], j) end
    local retry = leave + window - now
    if worst == 0 or retry > wretry then
      worst, wretry = i, retry
      wrem, wreset = math.max(limit - n, 0), heads[i] + window - now
    end
  end
end
if worst > 0 then
  return {0, worst - 1, wrem, wretry, wreset}
end

local stamp = string.format('%.0f', now)
local batch = {}
for j = 1, math.min(cost, 1000) do batch[j] = stamp end
local best, brem, breset = 0, 0, 0
for i = 1, #KEYS do
  local k = KEYS[i]
  local limit, window = tonumber(ARGV[2 * i]), tonumber(ARGV[2 * i + 1])
  local left = cost
  while left > 0 do
    local m = math.min(left, #batch)
    redis.call('RPUSH', k, unpack(batch, 1, m))
    left = left - m
  end
  redis.call('PEXPIRE', k, math.ceil((now + window - server) / 1000))
  local rem = limit - counts[i] - cost
  local reset = (heads[i] or now) + window - now
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
