package redisstore

import (
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/slidelog/ratelimit"
)

// The scripts that decide (take), report (peek) and take back (refund)
// for every policy of a set, each in one atomic call. They share a
// prelude (scriptLib) that reads the clock, loads each policy's state and
// holds the algorithms' arithmetic, ported from the memory store's Go
// code (slidinglog.go, gcra.go, windowcounter.go) to microseconds.
//
// KEYS[i] is the state of policy i of the set, in the set's order. ARGV:
//
//	[1] the time in µs to use instead of TIME, or '' (a test hook)
//	[2] milliseconds to add to every expiry (a test hook: an injected
//	    clock does not move with Redis's, so keys must outlive the test)
//	[3] the cost (take, refund)
//	[4] the instant to refund, µs (refund)
//	[5+3(i-1)..] policy i: algorithm ('l' log, 'c' counter, 'g' GCRA),
//	    limit, window in µs
//
// The state of each algorithm:
//   - sliding log: a list of integer µs instants, ascending, oldest at the
//     head; a request of cost n adds n instants.
//   - GCRA: a string, the theoretical arrival time in µs.
//   - window counter: a string "index:current:previous", index being the
//     fixed window's start divided by the window (windows are aligned to
//     multiples of the window since the Unix epoch), and the counts of
//     that window and of the one before it.
//
// Why they are written the way they are:
//   - Numbers are Lua doubles, exact below 2^53: µs since the epoch, sums
//     of them and windows are far below it. A limit times a window is not,
//     so the window counter's weighting multiplies and divides through
//     muldiv, exactly.
//   - Numbers are written with dec: Lua's tostring keeps only 14
//     significant digits, and a number handed to redis.call is exact but
//     formatted by Redis 7.0 with %.17g, which costs more. Constant
//     indexes are string literals ('0', '-1') for the same reason.
//   - A redis.call costs the server several times the Lua around it, so
//     the common paths make few: a log's length and ends (LLEN, LINDEX),
//     one GET for the others; a refusal writes nothing, unless it repairs
//     a key (below), and instants that have left the window are trimmed by
//     the next admission, or expire with the log;
//     an admission adds one write per policy (RPUSH, or SET with its
//     expiry), and PEXPIRE on a log only when the expiry has to move.
//   - Keys are deleted with UNLINK, so that a large one (a foreign value,
//     a long log drained whole) is freed off Redis's main thread.
//   - Eviction finds the instants at or before now - window by galloping
//     from the head and then bisecting, so a key that drains many instants
//     at once costs O(log n) LINDEX calls, and one LTRIM removes them.
//   - A clock that steps back: now is the server's TIME, raised to the
//     newest instant of any of the set's logs when that lies at most
//     stepTolerance ahead (clocks of a failover pair differ by that
//     much), so each log stays sorted. An instant further ahead is
//     evidence that the clock stepped back, not of traffic: it is
//     rewritten as now (take) or read as now (peek), keeping counts and
//     order, so the window slides again at once; a GCRA arrival time more
//     than a whole bucket ahead is read as a full bucket; a counter whose
//     window starts more than the tolerance ahead moves, counts and all,
//     to now's window. Otherwise a key would freeze until the clock caught
//     up with its newest instant.
//   - Keys under the store's prefix are the store's: a value that is not
//     a valid state (another type, a non-number, counts above the limit)
//     is deleted by take and refund and read as empty by peek, so such a
//     key heals at its next decision instead of failing every one. A bad
//     instant inside a log is found when it is read: the decision starts
//     over without that log.
//   - Expiries are relative (PEXPIRE, SET ... PX), counted from the
//     clock reading (TIME, not now raised), to the instant from which the
//     state can no longer affect a decision, rounded up to the
//     millisecond: a log's newest instant + window (in steps, below), a
//     GCRA key's arrival time, a counter's window start + 2 windows. Redis
//     keeps a key through the millisecond its expiry names, so no key
//     expires while it matters, and every write sets an expiry, so no key
//     is ever without one.
//   - A log's expiry moves in steps of a quantum q, a quarter of the
//     window (at least 1µs): a write sets it to (floor(now/q)+1)*q +
//     window, only when the log was empty or its newest instant lies in an
//     earlier quantum than now. A write that skips it adds instants in the
//     quantum of the newest one, which the expiry already covers; LTRIM
//     keeps the expiry and a log drained whole is deleted. An idle log
//     lingers up to a quarter window (and a millisecond) past its window,
//     and a busy one pays a PEXPIRE once a quarter window, not on every
//     write.
var scriptLib = `
local floor, min, max = math.floor, math.min, math.max
local TWO53 = 9007199254740992
local TOL = ` + stepToleranceLua + `

local clock, stamp
if ARGV[1] == '' then
  local t = redis.call('TIME')
  clock = tonumber(t[1]) * 1000000 + tonumber(t[2])
  stamp = t[1] .. string.sub('00000' .. t[2], -6)
else
  clock = tonumber(ARGV[1])
end
local slack = tonumber(ARGV[2])
local now = clock

-- idiv returns floor(a/b) for integers 0 <= a < 2^53 and b > 0. The
-- rounded quotient never reaches the next integer: that would take
-- a/b within a*2^-53/b of it from below, while it is at least 1/b away.
local function idiv(a, b)
  return floor(a / b)
end

-- muldiv returns floor(a*b/c) and a*b mod c for integers a, b >= 0 and
-- c > 0 whose quotient is below 2^53, even where a*b is not: beyond
-- 2^53 it multiplies one bit of a at a time, modulo c.
local function muldiv(a, b, c)
  local p = a * b
  if p < TWO53 then
    local q = idiv(p, c)
    return q, p - q * c
  end
  local bq = idiv(b, c)
  local br = b - bq * c
  local bits = {}
  while a > 0 do
    local h = floor(a / 2)
    bits[#bits + 1] = a - 2 * h
    a = h
  end
  local q, r = 0, 0
  for i = #bits, 1, -1 do
    q, r = 2 * q, 2 * r
    if r >= c then q, r = q + 1, r - c end
    if bits[i] == 1 then
      q, r = q + bq, r + br
      if r >= c then q, r = q + 1, r - c end
    end
  end
  return q, r
end

local function mulDivFloor(a, b, c)
  local q = muldiv(a, b, c)
  return q
end

local function mulDivCeil(a, b, c)
  local q, r = muldiv(a, b, c)
  if r > 0 then q = q + 1 end
  return q
end

-- dec prints an integer below 2^53 exactly.
local function dec(x)
  if x < 0 then return '-' .. dec(-x) end
  if x < 1e9 then return string.format('%d', x) end
  return string.format('%d%09d', floor(x / 1e9), x % 1e9)
end

-- num returns s as an integer in [0, 2^53), or nil if it is not one.
local function num(s)
  local x = tonumber(s)
  if x and x == floor(x) and x >= 0 and x < TWO53 then return x end
  return nil
end

-- ttl returns the milliseconds from the clock reading until deadline,
-- rounded up, as PEXPIRE and SET ... PX take them.
local function ttl(deadline)
  return dec(max(1, floor((deadline - clock + 999) / 1000)) + slack)
end

-- The policies: p[i] = {k, algo, limit, window, ...state}.
local p = {}
for i = 1, #KEYS do
  local j = 5 + 3 * (i - 1)
  p[i] = {k = KEYS[i], algo = ARGV[j], limit = tonumber(ARGV[j + 1]), w = tonumber(ARGV[j + 2])}
end

-- bad holds the keys found holding what is not a valid state; they are
-- read as empty (and deleted, unless the script is read-only).
local bad = {}
local function drop(k)
  bad[k] = true
  if not RO then redis.call('UNLINK', k) end
end

-- at returns instant i of log k, or starts the decision over without k.
local function at(k, i)
  local x = num(redis.call('LINDEX', k, i))
  if not x then error({bad = k}) end
  return x
end

-- inst returns instant i of log q, an instant after now read as now: see
-- the clock stepping back, above.
local function inst(q, i)
  return min(at(q.k, i), now)
end

-- prefix returns how many of the n instants of log q from index off on
-- are at or before x, the first of them being so. It reads them as they
-- are: for an x before now, an instant after now compares as now would.
local function prefix(q, off, n, x)
  local lo, hi, step = 1, n, 1
  while lo < hi do
    local m = min(lo + step, hi)
    if at(q.k, off + m - 1) <= x then
      lo, step = m, step * 2
    else
      hi = m - 1
      break
    end
  end
  while lo < hi do
    local mid = floor((lo + hi + 1) / 2)
    if at(q.k, off + mid - 1) <= x then lo = mid else hi = mid - 1 end
  end
  return lo
end

-- push appends n copies of the instant s to log k, in batches.
local function push(k, s, n)
  if n == 1 then
    redis.call('RPUSH', k, s)
    return
  end
  local batch = {}
  for j = 1, min(n, 1000) do batch[j] = s end
  while n > 0 do
    local m = min(n, #batch)
    redis.call('RPUSH', k, unpack(batch, 1, m))
    n = n - m
  end
end

-- load reads every policy's state and sets now.
local function load()
  now = clock
  for _, q in ipairs(p) do
    local k = q.k
    q.n, q.off, q.head, q.newest, q.tat, q.idx = 0, 0, nil, nil, nil, nil
    if bad[k] then
    elseif q.algo == 'l' then
      local n = redis.pcall('LLEN', k)
      if type(n) ~= 'number' then
        drop(k)
      elseif n > 0 then
        q.n = n
        q.head = at(k, '0')
        q.newest = q.head
        if n > 1 then q.newest = at(k, '-1') end
        if q.newest > now and q.newest - clock <= TOL then now = q.newest end
      end
    else
      local v = redis.pcall('GET', k)
      if type(v) == 'table' then
        drop(k)
      elseif v then
        if q.algo == 'g' then
          q.tat = num(v)
          if not q.tat then drop(k) end
        else
          local a, b, c = string.match(v, '^(%d+):(%d+):(%d+)$')
          a, b, c = num(a), num(b), num(c)
          if a and b and c and b <= q.limit and c <= q.limit then
            q.idx, q.cur, q.prev = a, b, c
          else
            drop(k)
          end
        end
      end
    end
  end
end

-- counterSet writes counter q's state.
local function counterSet(q)
  redis.call('SET', q.k, dec(q.idx) .. ':' .. dec(q.cur) .. ':' .. dec(q.prev), 'PX', ttl(q.idx * q.w + 2 * q.w))
end

-- quantum returns the step in which a log's expiry moves.
local function quantum(q)
  return max(floor(q.w / 4), 1)
end

-- prepare brings every state to now: a log's view skips the instants
-- that have left the window (take rewrites those after now first), a
-- GCRA arrival time is at least now, a counter rolls to now's window.
local function prepare()
  for _, q in ipairs(p) do
    local k, w = q.k, q.w
    if q.algo == 'l' then
      if q.n > 0 and q.newest > now and not RO then
        -- The clock stepped back: rewrite the instants after now as
        -- now, in place, so that the log stays sorted and counted.
        local keep = 0
        if q.head <= now then keep = prefix(q, 0, q.n, now) end
        if keep > 0 then redis.call('LTRIM', k, '0', keep - 1) else redis.call('UNLINK', k) end
        push(k, dec(now), q.n - keep)
        redis.call('PEXPIRE', k, ttl((floor(now / quantum(q)) + 1) * quantum(q) + w))
        q.newest = now
        if keep == 0 then q.head = now end
      end
      if q.n > 0 then
        if q.head > now then q.head = now end
        local cut = now - w
        if q.head <= cut then
          local c = prefix(q, 0, q.n, cut)
          q.off, q.n = c, q.n - c
          if q.n > 0 then q.head = inst(q, c) else q.head = nil end
        end
        -- The store never logs more than the limit.
        if q.n > q.limit then error({bad = k}) end
      end
    elseif q.algo == 'g' then
      q.t = idiv(w + q.limit - 1, q.limit)
      q.depth = q.limit * q.t
      q.tat = max(q.tat or now, now)
      if q.tat > now + q.depth then
        -- The clock stepped back: the bucket is at most empty.
        q.tat = now + q.depth
        if not RO then redis.call('SET', k, dec(q.tat), 'PX', ttl(q.tat)) end
      end
    else
      local widx = idiv(now, w)
      if q.idx == nil or q.idx < widx - 1 then
        q.idx, q.cur, q.prev = widx, 0, 0
      elseif q.idx == widx - 1 then
        q.idx, q.cur, q.prev = widx, 0, q.cur
      elseif q.idx > widx and q.idx * w - now > TOL then
        -- The clock stepped back: move the counts to now's window.
        q.idx = widx
        if not RO then counterSet(q) end
      end
      q.start = q.idx * w
    end
  end
end

local function gcraReset(q, tat)
  if tat <= now then return 0 end
  local r = idiv(now + q.depth - tat, q.t)
  return tat - q.depth + (r + 1) * q.t - now
end

-- used returns a counter's estimate of the rolling window's count.
local function used(q)
  local e = min(max(now - q.start, 0), q.w)
  return q.cur + mulDivCeil(q.prev, q.w - e, q.w)
end

-- counterReset returns how long until a counter's estimate drops by one.
local function counterReset(q)
  local w, e = q.w, now - q.start
  local x = mulDivCeil(q.prev, w - e, w)
  if x > 0 then return w - e - mulDivFloor(x - 1, w, q.prev) end
  if q.cur == 0 then return 0 end
  return w - e + max(1, w - mulDivFloor(q.cur - 1, w, q.cur))
end

-- decide reports whether cost more requests fit policy q at now, without
-- recording them: ok, remaining, retry (until they fit) and reset.
local function decide(q, cost)
  local limit, w = q.limit, q.w
  if q.algo == 'l' then
    local n = q.n
    if n + cost <= limit then return true, limit - n - cost, 0, 0 end
    -- The request fits once the oldest n+cost-limit instants have left.
    local j = n + cost - limit - 1
    local leave = q.head
    if j > 0 then leave = inst(q, q.off + j) end
    return false, limit - n, leave + w - now, q.head + w - now
  elseif q.algo == 'g' then
    local nxt = q.tat + cost * q.t
    local rem = idiv(now + q.depth - q.tat, q.t)
    if nxt - q.depth > now then
      return false, rem, nxt - q.depth - now, gcraReset(q, q.tat)
    end
    return true, rem - cost, 0, 0
  end
  local u = used(q)
  if u + cost <= limit then return true, limit - u - cost, 0, 0 end
  local e = now - q.start
  local k = limit - q.cur - cost
  local retry
  if k >= 0 then
    -- Fits in this window once the previous window's weight has
    -- decayed to k.
    retry = w - e - mulDivFloor(k, w, q.prev)
  else
    -- Fits only in the next window, once this window's count, then the
    -- previous one, has decayed to limit-cost.
    retry = w - e + max(0, w - mulDivFloor(limit - cost, w, q.cur))
  end
  return false, max(limit - u, 0), retry, counterReset(q)
end

-- run runs fn, starting over without any log found holding a bad instant.
local function run(fn)
  while true do
    local ok, res = pcall(fn)
    if ok then return res end
    if type(res) ~= 'table' or not res.bad then error(res) end
    drop(res.bad)
  end
end
`

// takeBody decides cost more requests for every policy and records them
// in all of them if all allow it. The reply is {now, allowed (0 or 1),
// r1, then for each policy ok, remaining, retry and reset}, durations in
// µs. Remaining and reset are those after the request when it is allowed,
// those before it when not. r1 is 0 unless the set refuses and would
// refuse a request of cost 1 now too; it is then the time until a
// request of cost 1 would fit, for the refusal cache.
const takeBody = `
local cost = tonumber(ARGV[3])
return run(function()
  load()
  prepare()
  local out, allowed = {now, 1, 0}, true
  for i, q in ipairs(p) do
    local ok, rem, retry, reset = decide(q, cost)
    if not ok then allowed = false end
    local b = 4 * i
    out[b], out[b + 1], out[b + 2], out[b + 3] = ok and 1 or 0, rem, retry, reset
  end
  if not allowed then
    out[2] = 0
    local r1 = 0
    for i, q in ipairs(p) do
      local ok, retry = out[4 * i] == 1, out[4 * i + 2]
      if cost > 1 then
        local o, _, r = decide(q, 1)
        ok, retry = o, r
      end
      if not ok then r1 = max(r1, retry) end
    end
    out[3] = r1
    return out
  end
  local s = stamp
  if now ~= clock or not s then s = dec(now) end
  for i, q in ipairs(p) do
    local k, limit, w, b = q.k, q.limit, q.w, 4 * i
    if q.algo == 'l' then
      if q.n == 0 and q.off > 0 then
        redis.call('UNLINK', k)
      elseif q.off > 0 then
        redis.call('LTRIM', k, q.off, '-1')
      end
      push(k, s, cost)
      local qt = quantum(q)
      local b0 = floor(now / qt)
      if q.n == 0 or floor(q.newest / qt) < b0 then
        redis.call('PEXPIRE', k, ttl((b0 + 1) * qt + w))
      end
      out[b + 1] = limit - q.n - cost
      out[b + 3] = (q.head or now) + w - now
    elseif q.algo == 'g' then
      local tat = q.tat + cost * q.t
      redis.call('SET', k, dec(tat), 'PX', ttl(tat))
      out[b + 1] = idiv(now + q.depth - tat, q.t)
      out[b + 3] = gcraReset(q, tat)
    else
      q.cur = q.cur + cost
      counterSet(q)
      out[b + 1] = max(limit - used(q), 0)
      out[b + 3] = counterReset(q)
    end
  end
  return out
end)
`

// peekBody reports, for each policy, whether one more request would fit
// now, without writing anything: the reply is {now, then for each policy
// ok, remaining, retry and reset}, as ratelimit.Peeker describes them.
const peekBody = `
return run(function()
  load()
  prepare()
  local out = {now}
  for i, q in ipairs(p) do
    local ok, rem, retry, reset
    if q.algo == 'g' then
      rem = idiv(now + q.depth - q.tat, q.t)
      reset = gcraReset(q, q.tat)
      retry = q.tat + q.t - q.depth - now
      ok = retry <= 0
      if ok then retry = 0 end
    else
      ok, rem, retry, reset = decide(q, 1)
      if ok then
        rem = rem + 1
        if q.algo == 'c' then
          reset = counterReset(q)
        elseif q.n > 0 then
          reset = q.head + q.w - now
        end
      end
    end
    local b = 4 * i - 2
    out[b], out[b + 1], out[b + 2], out[b + 3] = ok and 1 or 0, rem, retry, reset
  end
  return out
end)
`

// refundBody takes back cost requests counted at the instant ARGV[4]
// from every policy whose window still holds that instant: the log
// removes that many of those very instants, newest first (LREM with a
// negative count); GCRA moves its arrival time back by their share; the
// counter takes them off the count of the window the instant fell in.
// The reply is {now}.
const refundBody = `
local cost, t = tonumber(ARGV[3]), tonumber(ARGV[4])
return run(function()
  load()
  prepare()
  for _, q in ipairs(p) do
    local k, w = q.k, q.w
    if t > now - w and t <= now then
      if q.algo == 'l' then
        if q.n > 0 then redis.call('LREM', k, -cost, dec(t)) end
      elseif q.algo == 'g' then
        if q.tat > now then
          local tat = q.tat - cost * q.t
          if tat > now then
            redis.call('SET', k, dec(tat), 'PX', ttl(tat))
          else
            redis.call('UNLINK', k)
          end
        end
      else
        if t >= q.start then
          q.cur = q.cur - min(cost, q.cur)
        elseif t >= q.start - w then
          q.prev = q.prev - min(cost, q.prev)
        end
        if q.cur == 0 and q.prev == 0 then
          redis.call('UNLINK', k)
        else
          counterSet(q)
        end
      end
    end
  end
  return {now}
end)
`

// stepTolerance is how far ahead of the server's clock a logged instant
// may lie and still be taken for the clock of another server (a failover
// pair's differ by a few milliseconds), raising now to it; an instant
// further ahead is taken for a clock that stepped back. A step back of at
// most this much holds a key's window still for at most this long.
const stepTolerance = 100 * time.Millisecond

var stepToleranceLua = strconv.FormatInt(stepTolerance.Microseconds(), 10)

// The scripts, run by SHA1 with EVALSHA (peek with EVALSHA_RO) and re-sent
// whole when the server does not know them. RO tells the prelude whether
// it may write.
var (
	takeScript   = redis.NewScript("local RO = false\n" + scriptLib + takeBody)
	peekScript   = redis.NewScript("local RO = true\n" + scriptLib + peekBody)
	refundScript = redis.NewScript("local RO = false\n" + scriptLib + refundBody)
)

// algoCode names an algorithm in the scripts' ARGV.
func algoCode(a ratelimit.Algorithm) string {
	switch a {
	case ratelimit.SlidingWindowCounter:
		return "c"
	case ratelimit.GCRA:
		return "g"
	}
	return "l"
}

// micros is w in whole microseconds, rounded up so that a window never
// shrinks: Redis's TIME has microsecond resolution.
func micros(w time.Duration) int64 {
	return int64((w + time.Microsecond - 1) / time.Microsecond)
}
