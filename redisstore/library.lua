#!lua name=ratelimit_v2

-- The functions of redisstore, loaded once per server with FUNCTION LOAD
-- and called with FCALL: nothing below is defined again per call. See
-- library.go for the protocol: KEYS, ARGV and replies.

-- The standard libraries are out of reach while a library loads (Redis
-- 7.0): the first call takes what the functions use from them.
local floor, min, max, format, match, spread, tonum
local function init()
  floor, min, max = math.floor, math.min, math.max
  format, match, spread, tonum = string.format, string.match, unpack, tonumber
end
-- Integers below 2^53 are exact, and so is floor(a / b) for integers
-- 0 <= a < 2^53 and b > 0: the rounded quotient never reaches the next
-- integer.
local TWO53 = 9007199254740992
-- TOL: how far ahead of the clock a logged instant may lie and still be
-- the store's own (another server's clock, or a lease's end); further is a
-- clock that stepped back. Replaced by library.go.
local TOL = 150000
-- LEASE: the longest a lease lasts, in µs. Replaced by library.go.
local LEASE = 50000

-- dec prints an integer below 2^53 exactly: tostring keeps 14 digits.
local function dec(x)
  if x < 0 then return '-' .. dec(-x) end
  if x < 1e9 then return format('%d', x) end
  return format('%d%09d', floor(x / 1e9), x % 1e9)
end

-- num returns s as an integer in [0, 2^53), or nil if it is not one.
local function num(s)
  local x = tonum(s)
  if x and x % 1 == 0 and x >= 0 and x < TWO53 then return x end
  return nil
end

-- muldiv returns floor(a*b/c) and a*b mod c for integers a, b >= 0 and
-- c > 0 whose quotient is below 2^53, even where a*b is not: beyond 2^53
-- it multiplies one bit of a at a time, modulo c.
local function muldiv(a, b, c)
  local p = a * b
  if p < TWO53 then
    local q = floor(p / c)
    return q, p - q * c
  end
  local bq = floor(b / c)
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
  local p = a * b
  if p < TWO53 then return floor(p / c) end
  local q = muldiv(a, b, c)
  return q
end

local function mulDivCeil(a, b, c)
  local p = a * b
  if p < TWO53 then return -floor(-p / c) end
  local q, r = muldiv(a, b, c)
  if r > 0 then q = q + 1 end
  return q
end

-- A call's context: the clock and the policies. KEYS: each policy's
-- state, then (reset, refund, release) the marker. ARGV:
--   [1] cost
--   [2] take: extra slots wanted for a lease; refund: the instant (µs);
--       release: the lease's grant instant (µs)
--   [3..] policies, 3 arguments each: algorithm ('l' log, 'c' counter,
--       'g' GCRA, 'p' calendar period), limit, window in µs (for 'p',
--       the period's bounds: "start,end" around the caller's clock, after
--       the previous period's start and before the next one's end, as
--       "prev,start,end,next")
--   release only, after the policies: the lease's unused slots, then
--       each policy's mark for the lease
--   then, only from a test: the time in µs to use instead of TIME, and
--       milliseconds to add to every expiry. Every argument costs each
--       call the making of a Lua string, so a call carries none it does
--       not need.
-- count reads a small count: most are '0' or '1', which need no
-- tonumber (a strtod in Redis's Lua).
local function count(s)
  if s == '0' then return 0 elseif s == '1' then return 1 end
  return tonum(s)
end

-- clock returns the time in µs and the expiry slack in ms: a test's, in
-- the arguments after the n a call has, or the server's TIME and 0.
-- Arithmetic converts TIME's strings itself, exactly, without a call.
local function clock(args, n)
  if args[n + 1] then return tonum(args[n + 1]), count(args[n + 2]) end
  local t = redis.call('TIME')
  return t[1] * 1000000 + t[2], 0
end

-- context reads a call's arguments, n of them before a test's clock.
local function context(keys, args, ro, np, n)
  local now, slack = clock(args, n)
  local c = {ro = ro, now = now, slack = slack, cost = count(args[1]), x = tonum(args[2]), p = {}, marker = keys[np + 1]}
  for i = 1, np do
    local j = 3 * i
    local q = {k = keys[i], algo = args[j], limit = tonum(args[j + 1])}
    if q.algo == 'p' then
      local p, a, b, n = match(args[j + 2], '^(%d+),(%d+),(%d+),(%d+)$')
      q.pprev, q.pstart, q.pend, q.pnext = tonum(p), tonum(a), tonum(b), tonum(n)
    else
      q.w = tonum(args[j + 2])
    end
    c.p[i] = q
  end
  return c
end

-- px returns the milliseconds from now until deadline, rounded up, as
-- PEXPIRE and SET ... PX take them, plus slack.
local function px(now, slack, deadline)
  return dec(max(1, floor((deadline - now + 999) / 1000)) + slack)
end

local function ttl(c, deadline) return px(c.now, c.slack, deadline) end

-- drop marks a key found holding what is not a valid state: it is read as
-- empty, and deleted unless the call is read-only.
local function drop(c, k)
  c.bad = c.bad or {}
  c.bad[k] = true
  if not c.ro then redis.call('UNLINK', k) end
end

-- at returns instant i of log k, or starts the call over without k.
local function at(k, i)
  local x = num(redis.call('LINDEX', k, i))
  if not x then error({bad = k}) end
  return x
end

-- upto returns how many of the n instants of log k from index off on are
-- at or before x, the first being so: galloping, then bisecting, so that
-- a log that drains many instants at once costs O(log n) LINDEX calls.
local function upto(k, off, n, x)
  local lo, hi, step = 1, n, 1
  while lo < hi do
    local m = min(lo + step, hi)
    if at(k, off + m - 1) <= x then
      lo, step = m, step * 2
    else
      hi = m - 1
      break
    end
  end
  while lo < hi do
    local mid = floor((lo + hi + 1) / 2)
    if at(k, off + mid - 1) <= x then lo = mid else hi = mid - 1 end
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
    redis.call('RPUSH', k, spread(batch, 1, m))
    n = n - m
  end
end

-- The algorithms. Each has load (read the state), prepare (bring it to
-- now), decide (does cost fit: ok, remaining, retry, as the memory
-- store's algorithms answer, and room, how many more would fit), reset
-- (the Reset of the memory store's answer, apart because an admission
-- reports record's instead), and record (count n at now, with a lease of extra ending at lend; returns
-- remaining, reset and the lease's mark). The states:
--   log: a list of integer µs instants, ascending; RPUSH adds, LTRIM drops
--     the head that left the window (a lease's slots are written with a
--     leading '0': see LEASEND).
--   GCRA: a string, the theoretical arrival time in µs.
--   counter: a string "index:current:previous", index being the fixed
--     window's start over the window.
--   period: a string "start:count", start being the calendar period's.
local A = {}

-- The log's expiry moves in steps of a quarter window, so that a busy log
-- pays a PEXPIRE once a quarter window, not on every write.
local function quantum(w) return max(floor(w / 4), 1) end

-- The log on plain values, shared by A.l and takeLog: n instants from
-- index off of list k, head the oldest and newest the newest.

-- logLoad returns the length of log k, its oldest and newest instants,
-- and whether k holds what is no log.
local function logLoad(k)
  local n = redis.pcall('LLEN', k)
  if type(n) ~= 'number' then return 0, nil, nil, true end
  if n == 0 then return 0, nil, nil, false end
  local head = at(k, '0')
  local newest = head
  if n > 1 then newest = at(k, '-1') end
  return n, head, newest, false
end

-- logPrepare brings log k to now: off, n and head once what has left the
-- window is passed over (record trims it), and rec, the instant a request
-- is recorded at. Unless ro, a clock that stepped back has the instants
-- ahead of it rewritten as now, keeping counts and order, so that the
-- window slides at once.
local function logPrepare(k, n, head, newest, now, w, slack, ro)
  if n > 0 and newest > now + TOL and not ro then
    local keep = 0
    if head <= now then keep = upto(k, 0, n, now) end
    if keep > 0 then redis.call('LTRIM', k, '0', keep - 1) else redis.call('UNLINK', k) end
    push(k, dec(now), n - keep)
    redis.call('PEXPIRE', k, px(now, slack, (floor(now / quantum(w)) + 1) * quantum(w) + w))
    newest = now
    if keep == 0 then head = now end
  end
  local off, cut = 0, now - w
  if n > 0 and head <= cut then
    off = upto(k, 0, n, cut)
    n = n - off
    if n > 0 then head = at(k, off) end
  end
  -- An instant recorded now is never before the newest: the log stays
  -- sorted, and a request recorded late only counts longer.
  local rec = now
  if n > 0 then rec = max(now, min(newest, now + TOL)) end
  return off, n, head, newest, rec
end

local function logDecide(k, off, n, head, limit, w, now, cost)
  local room = limit - n - cost
  if room >= 0 then return true, limit - n, 0, room end
  -- The request fits once the oldest n+cost-limit instants have left.
  local j = n + cost - limit - 1
  local leave = head
  if j > 0 then leave = min(at(k, off + j), now + TOL) end
  return false, max(limit - n, 0), leave + w - now, room
end

local function logReset(k, off, n, head, limit, w, now)
  -- A lowered limit may leave more instants than it: one more fits
  -- once the n-limit+1 oldest have left.
  if n > limit then return min(at(k, off + n - limit), now + TOL) + w - now end
  if n > 0 then return head + w - now end
  return 0
end

-- LEASEND is how a lease's slots are written in a log: their instant
-- with a leading '0', the same number, a string no request's instant is,
-- so that a refund or a lease's return that looks for lease slots never
-- takes a request logged at that instant for one.
local function LEASEND(x) return '0' .. dec(x) end

-- logRecord logs cnt requests at rec and a lease's extra slots at lend:
-- remaining, reset and the lease's mark.
local function logRecord(k, off, n, head, newest, rec, limit, w, now, slack, cnt, extra, lend)
  if off > 0 and n == 0 then
    redis.call('UNLINK', k)
  elseif off > 0 then
    redis.call('LTRIM', k, off, '-1')
  end
  if extra > 0 and rec > now then
    -- Logged ahead of now, the request goes with the lease's slots, where
    -- a refund at now looks for a request of the lease: logged at rec, its
    -- refund would take a slot of the lease's end, and a request the lease
    -- admits after rec would then count in no window past rec's.
    extra, cnt = extra + cnt, 0
  end
  push(k, dec(rec), cnt)
  local last, mark = rec, nil
  if extra > 0 then
    last = max(lend, rec)
    mark = last
    push(k, LEASEND(last), extra)
  end
  local qt = quantum(w)
  local b0 = floor(last / qt)
  if n == 0 or floor(newest / qt) < b0 then
    redis.call('PEXPIRE', k, px(now, slack, (b0 + 1) * qt + w))
  end
  if n == 0 then head = rec end
  return limit - n - cnt - extra, head + w - now, mark
end

A.l = {
  load = function(c, q)
    local bad
    q.n, q.head, q.newest, bad = logLoad(q.k)
    q.off = 0
    if bad then drop(c, q.k) end
  end,
  prepare = function(c, q)
    q.off, q.n, q.head, q.newest, q.rec = logPrepare(q.k, q.n, q.head, q.newest, c.now, q.w, c.slack, c.ro)
  end,
  decide = function(c, q, cost)
    return logDecide(q.k, q.off, q.n, q.head, q.limit, q.w, c.now, cost)
  end,
  reset = function(c, q)
    return logReset(q.k, q.off, q.n, q.head, q.limit, q.w, c.now)
  end,
  record = function(c, q, n, extra, lend)
    return logRecord(q.k, q.off, q.n, q.head, q.newest, q.rec, q.limit, q.w, c.now, c.slack, n, extra, lend)
  end,
  -- refund removes cost instants equal to t, the newest first: the very
  -- ones counted at t; then, for requests a lease granted at t admitted,
  -- lease slots at t + LEASE, where the lease's slots are. A request
  -- logged later than it was decided otherwise (at the newest instant,
  -- ahead of the clock) is not found, and stays counted, which never frees
  -- a slot too soon.
  refund = function(c, q, cost, t)
    if q.n == 0 then return end
    local n = 0 -- instants at t that have left the window are not its
    if t > c.now - q.w then n = redis.call('LREM', q.k, -cost, dec(t)) end
    if n < cost then redis.call('LREM', q.k, n - cost, LEASEND(t + LEASE)) end
  end,
  release = function(c, q, unused)
    if q.mark and q.mark > c.now - q.w then redis.call('LREM', q.k, -unused, LEASEND(q.mark)) end
  end,
}

-- GCRA: t is the emission interval, depth the bucket's (limit * t), tat
-- the arrival time. takeGCRA writes the same steps out for a set of one
-- policy.
local function gcraParams(limit, w)
  local t = floor((w + limit - 1) / limit)
  return t, limit * t
end

-- gcraSet passes tat and the expiry to SET as numbers, which Redis
-- prints exactly below 2^53: no string is made in Lua. The state expires
-- when the bucket is full again; tat is ahead of now wherever it is set.
local function gcraSet(k, tat, now, slack)
  redis.call('SET', k, tat, 'PX', floor((tat - now + 999) / 1000) + slack)
end

local function gcraReset(now, tat, t, depth)
  if tat <= now then return 0 end
  -- The bucket holds less than nothing when the limit was lowered.
  local r = max(floor((now + depth - tat) / t), 0)
  return tat - depth + (r + 1) * t - now
end

A.g = {
  load = function(c, q)
    local v = redis.pcall('GET', q.k)
    q.tat = type(v) == 'string' and num(v) or nil
    if v and not q.tat then drop(c, q.k) end
  end,
  prepare = function(c, q)
    q.t, q.depth = gcraParams(q.limit, q.w)
    q.tat = max(q.tat or c.now, c.now)
    if q.tat > c.now + q.depth + TOL then
      -- The clock stepped back: the bucket is at most empty.
      q.tat = c.now + q.depth
      if not c.ro then gcraSet(q.k, q.tat, c.now, c.slack) end
    end
  end,
  decide = function(c, q, cost)
    local rem = max(floor((c.now + q.depth - q.tat) / q.t), 0)
    local over = q.tat + cost * q.t - q.depth - c.now
    if over > 0 then return false, rem, over, -1 end
    return true, rem, 0, rem - cost
  end,
  reset = function(c, q)
    return gcraReset(c.now, q.tat, q.t, q.depth)
  end,
  record = function(c, q, n, extra)
    local tat = q.tat + (n + extra) * q.t
    gcraSet(q.k, tat, c.now, c.slack)
    local mark = nil
    if extra > 0 then mark = tat end
    return floor((c.now + q.depth - tat) / q.t), gcraReset(c.now, tat, q.t, q.depth), mark
  end,
  -- refund gives back what of the requests' share has not refilled since
  -- t, at most: the share began at t or later.
  refund = function(c, q, cost, t)
    local give = min(cost * q.t, t + cost * q.t - c.now)
    if q.tat > c.now and give > 0 then
      local tat = q.tat - give
      if tat > c.now then gcraSet(q.k, tat, c.now, c.slack) else redis.call('UNLINK', q.k) end
    end
  end,
  -- release gives back the unused slots of a lease, the last of its
  -- shares, which end at the mark: what of them has not refilled.
  release = function(c, q, unused)
    if q.mark then A.g.refund(c, q, unused, q.mark - unused * q.t) end
  end,
}

-- The window counter on plain values, shared by A.c and takeCounter: idx
-- is the fixed window's start over the window w, cur its count and prev
-- the previous window's.
local function counterSet(k, idx, cur, prev, w, now, slack)
  redis.call('SET', k, dec(idx) .. ':' .. dec(cur) .. ':' .. dec(prev), 'PX', px(now, slack, idx * w + 2 * w))
end

-- counterLoad returns the window and counts k holds (nil for none), and
-- whether k holds what is no valid state.
local function counterLoad(k)
  local v = redis.pcall('GET', k)
  if type(v) == 'table' then return nil, 0, 0, true end
  if not v then return nil, 0, 0, false end
  local a, b, d = match(v, '^(%d+):(%d+):(%d+)$')
  if not a then return nil, 0, 0, true end
  a, b, d = tonum(a), tonum(b), tonum(d) -- digits: integers, and >= 0
  if a < TWO53 and b < TWO53 and d < TWO53 then return a, b, d, false end
  return nil, 0, 0, true
end

-- counterRoll moves the counts to now's fixed window; moved reports a
-- clock that stepped back past the window's start, whose counts all move
-- to now's window and are to be written: both windows' counts, since the
-- previous window is now's or later, so that nothing counted is lost, as
-- the log rewrites the instants ahead of the clock as now.
local function counterRoll(idx, cur, prev, w, now)
  local widx = floor(now / w)
  if idx == nil or idx < widx - 1 then return widx, 0, 0, false end
  if idx == widx - 1 then return widx, 0, cur, false end
  if idx > widx and idx * w - now > TOL then return widx, cur + prev, 0, true end
  return idx, cur, prev, false
end

-- used returns a counter's estimate of the rolling window's count, the
-- fixed window having begun at start.
local function used(now, start, w, cur, prev)
  local e = min(max(now - start, 0), w)
  return cur + mulDivCeil(prev, w - e, w)
end

-- counterWait returns how long until cost more requests fit a counter
-- under limit; they do not now.
local function counterWait(now, start, w, cur, prev, limit, cost)
  local e = now - start
  local k = limit - cur - cost
  if k >= 0 then return w - e - mulDivFloor(k, w, prev) end
  return w - e + max(0, w - mulDivFloor(limit - cost, w, cur))
end

-- counterReset returns how long until one more request fits a counter
-- than fits now, u being its estimate: until the estimate drops by one,
-- or, above the limit (the limit was lowered), to one below it.
local function counterReset(now, start, w, cur, prev, limit, u)
  if u == 0 then return 0 end
  return counterWait(now, start, w, cur, prev, min(u, limit), 1)
end

local function counterDecide(now, start, w, cur, prev, limit, cost)
  local u = used(now, start, w, cur, prev)
  if u + cost <= limit then return true, max(limit - u, 0), 0, limit - u - cost end
  return false, max(limit - u, 0), counterWait(now, start, w, cur, prev, limit, cost), -1
end

A.c = {
  load = function(c, q)
    local bad
    q.idx, q.cur, q.prev, bad = counterLoad(q.k)
    if bad then drop(c, q.k) end
  end,
  prepare = function(c, q)
    local moved
    q.idx, q.cur, q.prev, moved = counterRoll(q.idx, q.cur, q.prev, q.w, c.now)
    if moved and not c.ro then counterSet(q.k, q.idx, q.cur, q.prev, q.w, c.now, c.slack) end
    q.start = q.idx * q.w
    q.lend = q.start + q.w -- a lease ends with the window it counts in
  end,
  decide = function(c, q, cost)
    return counterDecide(c.now, q.start, q.w, q.cur, q.prev, q.limit, cost)
  end,
  reset = function(c, q)
    local u = used(c.now, q.start, q.w, q.cur, q.prev)
    return counterReset(c.now, q.start, q.w, q.cur, q.prev, q.limit, u)
  end,
  record = function(c, q, n, extra)
    q.cur = q.cur + n + extra
    counterSet(q.k, q.idx, q.cur, q.prev, q.w, c.now, c.slack)
    local mark = nil
    if extra > 0 then mark = q.idx end
    local u = used(c.now, q.start, q.w, q.cur, q.prev)
    return max(q.limit - u, 0), counterReset(c.now, q.start, q.w, q.cur, q.prev, q.limit, u), mark
  end,
  refund = function(c, q, cost, t)
    if t >= q.start then
      q.cur = q.cur - min(cost, q.cur)
    elseif t >= q.start - q.w then
      q.prev = q.prev - min(cost, q.prev)
    else
      return
    end
    if q.cur == 0 and q.prev == 0 then redis.call('UNLINK', q.k) else counterSet(q.k, q.idx, q.cur, q.prev, q.w, c.now, c.slack) end
  end,
  release = function(c, q, unused)
    if q.mark then A.c.refund(c, q, unused, q.mark * q.w) end
  end,
}

-- A calendar period's bounds come from the caller, who knows the time
-- zone: the period around its clock and the next. The server's clock
-- picks one: the next period once it has begun.
A.p = {
  load = function(c, q)
    local v = redis.pcall('GET', q.k)
    if type(v) == 'table' then drop(c, q.k) elseif v then
      local a, b = match(v, '^(%d+):(%d+)$')
      q.start, q.n = num(a), num(b)
      if not (q.start and q.n) then q.start, q.n = nil, nil; drop(c, q.k) end
    end
  end,
  prepare = function(c, q)
    -- The server's clock picks the period, of the caller's or either
    -- side of it, whichever way the two clocks disagree at a boundary;
    -- after is the end of the period after it, if the caller sent it. A
    -- caller whose clock is further off knows none of the server's
    -- period: its call fails before it moves the count to another.
    if c.now < q.pprev or c.now >= q.pnext then
      error({err = 'ratelimit: the caller\'s clock is more than a calendar period off the server\'s'})
    end
    local s, e, after = q.pstart, q.pend, q.pnext
    if c.now >= e then s, e, after = e, q.pnext, nil elseif c.now < s then s, e, after = q.pprev, s, q.pend end
    if q.start == nil or q.start < s then
      q.start, q.n = s, 0
    elseif q.start == e and after then
      -- The clock stepped back into the period before the count's: the
      -- count stands until its own period ends, since the clock comes
      -- back to that period before any other.
      e = after
    elseif q.start > s then
      -- Further back: the count moves to now's period, as the log
      -- rewrites the instants ahead of the clock as now.
      q.start = s
      if not c.ro then redis.call('SET', q.k, dec(s) .. ':' .. dec(q.n), 'PX', ttl(c, e)) end
    end
    q.pend = e
    q.lend = e
    q.w = e - q.start
  end,
  decide = function(c, q, cost)
    local limit = q.limit
    if q.n + cost <= limit then return true, limit - q.n, 0, limit - q.n - cost end
    return false, max(limit - q.n, 0), q.pend - c.now, -1
  end,
  reset = function(c, q)
    if q.n > 0 then return q.pend - c.now end
    return 0
  end,
  record = function(c, q, n, extra)
    q.n = q.n + n + extra
    redis.call('SET', q.k, dec(q.start) .. ':' .. dec(q.n), 'PX', ttl(c, q.pend))
    local mark = nil
    if extra > 0 then mark = q.start end
    return max(q.limit - q.n, 0), q.pend - c.now, mark
  end,
  refund = function(c, q, cost, t)
    if t < q.start or q.n == 0 then return end
    q.n = q.n - min(cost, q.n)
    if q.n == 0 then redis.call('UNLINK', q.k) else redis.call('SET', q.k, dec(q.start) .. ':' .. dec(q.n), 'PX', ttl(c, q.pend)) end
  end,
  release = function(c, q, unused)
    if q.mark and q.mark == q.start then A.p.refund(c, q, unused, q.start) end
  end,
}

-- prepared, run's protected body, loads and prepares every policy of c,
-- then returns fn(c).
local function prepared(c, fn)
  for _, q in ipairs(c.p) do
    if c.bad and c.bad[q.k] then q.n, q.off, q.tat, q.idx, q.start = 0, 0, nil, nil, nil else A[q.algo].load(c, q) end
    A[q.algo].prepare(c, q)
  end
  return fn(c)
end

-- run runs fn on c prepared, starting over without any log found holding
-- a bad instant (which is dropped).
local function run(c, fn)
  while true do
    local ok, res = pcall(prepared, c, fn)
    if ok then return res end
    if type(res) ~= 'table' or not res.bad then error(res) end
    drop(c, res.bad)
  end
end

-- lease returns the extra slots and the end of a lease for a request
-- that leaves room more, want at most: at most an eighth of room, so
-- that near the limit it shrinks to nothing; lend, the end, is in time
-- for every window the lease counts in, and exactly now + LEASE if exact
-- (a set with a log). No lease is worth less. Without one, the second
-- value is 0, or lend when it is a window's end too near to lease up to:
-- the caller asks for no lease until then, not for a whole lease period
-- as after a refusal for room, so that crossing a window's end costs
-- round trips only until it.
local function lease(want, room, now, lend, exact)
  local extra = min(want, floor(room / 8))
  if extra < 2 then return 0, 0 end
  if lend - now < LEASE / 2 or exact and lend ~= now + LEASE then
    if lend <= now then return 0, 0 end
    return 0, lend
  end
  return extra, lend
end

-- take decides cost more requests for every policy and records them in
-- all of them if all allow it, with a lease of up to ARGV[2] more slots
-- when every policy has room for it. Reply: {now, allowed, r1, policy,
-- remaining, retry, reset, lease slots, lease end (without a lease, 0 or
-- when to ask again: see lease), then each policy's lease mark, when
-- there is a lease}: policy is the index (from 1) of the
-- one reported, the tightest, as ratelimit.Store describes it; r1 is 0
-- unless the set refuses and would refuse a request of cost 1 now too:
-- then the time until one would fit, for the refusal cache.
-- The one-policy paths below (takeGCRA, takeCounter, takeLog) answer an
-- admission with no lease and no time to ask again, the most common
-- reply, {now, remaining, reset} instead: a reply costs the server per
-- element.
local function takeAll(c)
  local cost, allowed, room = c.cost, true, nil
  for _, q in ipairs(c.p) do
    local r
    q.ok, q.rem, q.retry, r = A[q.algo].decide(c, q, cost)
    if not q.ok then allowed = false end
    room = min(room or r, r)
  end
  if not allowed then
    local best, r1 = nil, 0
    for i, q in ipairs(c.p) do
      if not q.ok and (best == nil or q.retry > c.p[best].retry) then best = i end
      local ok, retry = q.ok, q.retry
      if cost > 1 then
        local _
        ok, _, retry = A[q.algo].decide(c, q, 1)
      end
      if not ok then r1 = max(r1, retry) end
    end
    local b = c.p[best]
    return {c.now, 0, r1, best, b.rem, b.retry, A[b.algo].reset(c, b), 0, 0}
  end
  -- A log records a lease's slots at exactly now + LEASE, so that a refund
  -- of a request the lease admitted, which reports now, knows where they
  -- are: with a log in the set, a lease that cannot end then is none.
  local lend, log = c.now + LEASE, false
  for _, q in ipairs(c.p) do
    if q.lend then lend = min(lend, q.lend) end
    if q.algo == 'l' then
      log = true
      if q.rec > c.now + LEASE then lend = c.now end
    end
  end
  local extra
  extra, lend = lease(c.x, room, c.now, lend, log)
  local out = {c.now, 1, 0, 0, 0, 0, 0, extra, lend}
  local best
  for i, q in ipairs(c.p) do
    local rem, reset, mark = A[q.algo].record(c, q, cost, extra, lend)
    if best == nil or rem < out[5] or (rem == out[5] and reset > out[7]) then
      best, out[5], out[7] = i, rem, reset
    end
    if extra > 0 then out[9 + i] = mark or 0 end
  end
  out[4] = best
  return out
end

-- takeGCRA is take for a set of one GCRA policy, the common case, written
-- out on locals: the steps, state and reply (or the short one: see
-- takeAll) of A.g on the general path, with the few Lua calls an allowed
-- request needs. Every call costs the server about 50 ns, and the general
-- path makes some twenty: written out, one GCRA policy costs the server
-- about what redis_rate's script does. The conformance suite runs both:
-- one policy here, sets on run.
local function takeGCRA(keys, args)
  local now, slack = clock(args, 5)
  local cost, want, k, limit, w = count(args[1]), count(args[2]), keys[1], tonum(args[4]), tonum(args[5])
  local t, depth = gcraParams(limit, w)
  local tat = now
  local v = redis.pcall('GET', k)
  if v then
    local x = type(v) == 'string' and num(v)
    if not x then
      redis.call('UNLINK', k)
    elseif x > now + depth + TOL then -- the clock stepped back
      tat = now + depth
      gcraSet(k, tat, now, slack)
    elseif x > now then
      tat = x
    end
  end
  local over = tat + cost * t - depth - now
  if over > 0 then
    local r1 = over
    if cost > 1 then r1 = max(tat + t - depth - now, 0) end -- cost 1 may fit
    local rem = max(floor((now + depth - tat) / t), 0)
    return {now, 0, r1, 1, rem, over, gcraReset(now, tat, t, depth), 0, 0}
  end
  local extra, lend = 0, 0
  if want > 0 then extra, lend = lease(want, floor((now + depth - tat) / t) - cost, now, now + LEASE) end
  tat = tat + (cost + extra) * t
  gcraSet(k, tat, now, slack)
  -- gcraReset written out: tat is ahead of now, and rem is not negative.
  local rem = floor((now + depth - tat) / t)
  local reset = tat - depth + (rem + 1) * t - now
  if extra == 0 then return {now, rem, reset} end
  return {now, 1, 0, 1, rem, 0, reset, extra, lend, tat}
end

-- takeCounter is take for a set of one window counter, written out on
-- locals as takeGCRA is.
local function takeCounter(keys, args)
  local now, slack = clock(args, 5)
  local cost, want, k, limit, w = count(args[1]), count(args[2]), keys[1], tonum(args[4]), tonum(args[5])
  local idx, cur, prev, bad = counterLoad(k)
  if bad then redis.call('UNLINK', k) end
  local moved
  idx, cur, prev, moved = counterRoll(idx, cur, prev, w, now)
  if moved then counterSet(k, idx, cur, prev, w, now, slack) end
  local start = idx * w
  local u = used(now, start, w, cur, prev)
  if u + cost > limit then
    local r1 = 0 -- a request of cost 1 may fit where cost do not
    if u + 1 > limit then r1 = counterWait(now, start, w, cur, prev, limit, 1) end
    local retry = counterWait(now, start, w, cur, prev, limit, cost)
    return {now, 0, r1, 1, max(limit - u, 0), retry, counterReset(now, start, w, cur, prev, limit, u), 0, 0}
  end
  local extra, lend = 0, 0
  if want > 0 then extra, lend = lease(want, limit - u - cost, now, min(now + LEASE, start + w)) end
  -- The estimate counts the current window's requests in full.
  cur, u = cur + cost + extra, u + cost + extra
  counterSet(k, idx, cur, prev, w, now, slack)
  local rem, reset = max(limit - u, 0), counterReset(now, start, w, cur, prev, limit, u)
  if extra == 0 and lend == 0 then return {now, rem, reset} end
  if extra == 0 then return {now, 1, 0, 1, rem, 0, reset, 0, lend} end
  return {now, 1, 0, 1, rem, 0, reset, extra, lend, idx}
end

-- takeLog is take for a set of one sliding log, on locals as takeGCRA;
-- takeLogOnce raises {bad = k} where run would start over.
local function takeLogOnce(keys, args)
  local now, slack = clock(args, 5)
  local cost, want, k, limit, w = count(args[1]), count(args[2]), keys[1], tonum(args[4]), tonum(args[5])
  local n, head, newest, bad = logLoad(k)
  if bad then redis.call('UNLINK', k) end
  local off, rec
  off, n, head, newest, rec = logPrepare(k, n, head, newest, now, w, slack, false)
  local ok, rem, retry, room = logDecide(k, off, n, head, limit, w, now, cost)
  if not ok then
    local r1 = retry
    if cost > 1 then -- a request of cost 1 may fit where cost do not
      local _, _, retry1 = logDecide(k, off, n, head, limit, w, now, 1)
      r1 = retry1
    end
    return {now, 0, r1, 1, rem, retry, logReset(k, off, n, head, limit, w, now), 0, 0}
  end
  -- A lease's slots are logged at exactly now + LEASE (see takeAll).
  local lend = now + LEASE
  if rec > lend then lend = now end
  local extra = 0
  if want > 0 then extra, lend = lease(want, room, now, lend) end
  local reset, mark
  rem, reset, mark = logRecord(k, off, n, head, newest, rec, limit, w, now, slack, cost, extra, lend)
  if extra == 0 then return {now, rem, reset} end
  return {now, 1, 0, 1, rem, 0, reset, extra, lend, mark}
end

local function takeLog(keys, args)
  local ok, res = pcall(takeLogOnce, keys, args)
  if ok then return res end
  if type(res) ~= 'table' or not res.bad then error(res) end
  redis.call('UNLINK', res.bad) -- a log holding a bad instant is dropped
  return takeLogOnce(keys, args)
end

local function take(keys, args)
  if not floor then init() end
  if #keys == 1 and args[3] == 'l' then return takeLog(keys, args) end
  if #keys == 1 and args[3] == 'g' then return takeGCRA(keys, args) end
  if #keys == 1 and args[3] == 'c' then return takeCounter(keys, args) end
  return run(context(keys, args, false, #keys, 2 + 3 * #keys), takeAll)
end

-- peek reports, without writing anything, whether one more request would
-- fit now: {now, allowed, policy, remaining, retry, reset}.
local function peekAll(c)
  local best, bok, brem, bretry, breset
  for i, q in ipairs(c.p) do
    local ok, rem, retry = A[q.algo].decide(c, q, 1)
    local reset = A[q.algo].reset(c, q)
    local tighter = best == nil
    if not tighter then
      if ok ~= bok then tighter = not ok
      elseif not ok then tighter = retry > bretry
      elseif rem ~= brem then tighter = rem < brem
      else tighter = reset > breset end
    end
    if tighter then best, bok, brem, bretry, breset = i, ok, rem, retry, reset end
  end
  return {c.now, bok and 1 or 0, best, brem, bretry, breset}
end

local function peek(keys, args)
  if not floor then init() end
  return run(context(keys, args, true, #keys, 2 + 3 * #keys), peekAll)
end

-- since reports whether requests counted at t may still be taken back: no
-- Reset of the client's set has come since (the marker holds the instant
-- of the latest).
local function since(c, t)
  local m = redis.pcall('GET', c.marker)
  local reset = type(m) == 'string' and tonum(m)
  return not reset or t > reset
end

-- refund takes back cost requests counted at the instant ARGV[2] from
-- every policy whose window still holds it, unless the client was Reset
-- since. Reply: {now}.
-- A lease's requests are logged at its end, LEASE after their instant t:
-- the log looks for them while that is in the window.
local function refundAll(c)
  local t = c.x
  for _, q in ipairs(c.p) do
    local late = q.algo == 'l' and LEASE or 0
    if t <= c.now and (q.algo == 'p' or t + late > c.now - q.w) then A[q.algo].refund(c, q, c.cost, t) end
  end
  return {c.now}
end

local function refund(keys, args)
  if not floor then init() end
  local c = context(keys, args, false, #keys - 1, 2 + 3 * (#keys - 1))
  if not since(c, c.x) then return {c.now} end
  return run(c, refundAll)
end

-- release gives back the unused slots of a lease granted at ARGV[2], by
-- each policy's mark, unless the client was Reset since. Reply: {now}.
local function releaseAll(c)
  for _, q in ipairs(c.p) do A[q.algo].release(c, q, c.unused) end
  return {c.now}
end

local function release(keys, args)
  if not floor then init() end
  local np = #keys - 1
  local c = context(keys, args, false, np, 3 + 4 * np)
  if not since(c, c.x) then return {c.now} end
  local tail = 3 + 3 * np
  c.unused = tonum(args[tail])
  for i, q in ipairs(c.p) do q.mark = num(args[tail + i]) end
  return run(c, releaseAll)
end

-- reset forgets the client's state under every policy of the set and
-- notes the instant in the marker key, which outlives every window of the
-- set and a second more: a refund of a request counted until then, or the
-- return of a lease granted until then, changes nothing. A lease's return
-- comes within two LEASEs of its grant, on a process that keeps up, and
-- the second covers one that does not, even when a window is shorter.
-- Reply: {now}.
local function reset(keys, args)
  if not floor then init() end
  local c = context(keys, args, false, #keys - 1, 2 + 3 * (#keys - 1))
  local keep = 0
  for _, q in ipairs(c.p) do
    redis.call('UNLINK', q.k)
    local w = q.w or (q.pnext - q.pstart)
    local _, depth = gcraParams(q.limit, w) -- GCRA's state lasts its depth
    keep = max(keep, w, depth)
  end
  redis.call('SET', c.marker, dec(c.now), 'PX', ttl(c, c.now + keep + 1000000))
  return {c.now}
end

redis.register_function('ratelimit_take_v2', take)
redis.register_function{function_name = 'ratelimit_peek_v2', callback = peek, flags = {'no-writes'}}
redis.register_function('ratelimit_refund_v2', refund)
redis.register_function('ratelimit_release_v2', release)
redis.register_function('ratelimit_reset_v2', reset)
