"""The Lua scripts of the delivery queue (services/scoring/delivery.py): each one step on one
receiver's keys in one game (one hash tag, so one slot on a cluster), all or nothing."""

from __future__ import annotations

# Shared by the scripts: how far the channel's feed goes (a stream's length, or a number
# kept in a string key such as the score stream's marker), compared with the state's cursor.
_SOURCE = """
local function source_len(key, kind)
  if kind == 'get' then return tonumber(redis.call('GET', key) or '0') or 0 end
  return redis.call('XLEN', key)
end
"""

# KEYS: state, delivery log[, due index (a game on a shard slot)]. ARGV: the state's cursor
# field, the cursor expected, the member in the index, now (ms), n, then n (field, value)
# pairs to set in the state, then (position, entry JSON) per delivery. Returns {'ok'} or
# {'conflict', cursor}: all or nothing, conditional on the cursor the caller started from.
# An entry already there is kept (HSETNX: never twice). The new deliveries are due now: the
# index says so in the same step (the sweep re-sends the deliver task if it was lost).
DISPATCH_LUA = """
local cursor = redis.call('HGET', KEYS[1], ARGV[1]) or '0'
if cursor ~= ARGV[2] then return {'conflict', cursor} end
local n = tonumber(ARGV[5])
for i = 6 + 2 * n, #ARGV, 2 do
  redis.call('HSETNX', KEYS[2], ARGV[i], ARGV[i + 1])
end
for i = 6, 5 + 2 * n, 2 do
  redis.call('HSET', KEYS[1], ARGV[i], ARGV[i + 1])
end
if KEYS[3] then redis.call('ZADD', KEYS[3], ARGV[4], ARGV[3]) end
return {'ok'}
"""

# KEYS: state, delivery log, lease. ARGV: lease token ("" = only look), lease ms.
# Moves the `head` past deliveries that are over, then returns {'due', entry JSON} for the
# first one that is not, {'idle'} if there is none, {'lost'} if the lease is not ours.
NEXT_LUA = """
if ARGV[1] ~= '' then
  if redis.call('GET', KEYS[3]) ~= ARGV[1] then return {'lost'} end
  redis.call('PEXPIRE', KEYS[3], ARGV[2])
end
local head = tonumber(redis.call('HGET', KEYS[1], 'head') or '0')
local progress = tonumber(redis.call('HGET', KEYS[1], 'progress') or '0')
local start, found = head, nil
while head < progress do
  local raw = redis.call('HGET', KEYS[2], tostring(head + 1))
  if raw then
    local outcome = cjson.decode(raw)['outcome']
    if outcome ~= 'delivered' and outcome ~= 'failed' then
      found = raw
      break
    end
  end
  head = head + 1
end
if head ~= start then redis.call('HSET', KEYS[1], 'head', head) end
if found then return {'due', found} end
return {'idle'}
"""

# KEYS: delivery log, state[, feed source, due index (a game on a shard slot)].
# ARGV: position, attempts recorded before this one, new entry JSON, "1" if the delivery is
# now over, the receiver's member in the index, now (ms), the retry's time (ms, when not
# over), the state's cursor field, the source's kind. Returns 'ok', 'stale' (another task
# recorded this attempt) or 'gone'. A delivery that is over at the head moves the head past
# it. In the same step the index says when the receiver next has work: at the retry's time,
# now (the next delivery, or feed to dispatch), or never (removed).
RECORD_LUA = (
    _SOURCE
    + """
local raw = redis.call('HGET', KEYS[1], ARGV[1])
if not raw then return 'gone' end
if tonumber(cjson.decode(raw)['tries']) ~= tonumber(ARGV[2]) then return 'stale' end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[3])
if ARGV[4] == '1' then
  if tonumber(redis.call('HGET', KEYS[2], 'head') or '0') == tonumber(ARGV[1]) - 1 then
    redis.call('HSET', KEYS[2], 'head', ARGV[1])
  end
end
if KEYS[4] then
  local head = tonumber(redis.call('HGET', KEYS[2], 'head') or '0')
  local progress = tonumber(redis.call('HGET', KEYS[2], 'progress') or '0')
  local cursor = tonumber(redis.call('HGET', KEYS[2], ARGV[8]) or '0')
  local behind = cursor < source_len(KEYS[3], ARGV[9])
  if head >= progress and not behind then
    redis.call('ZREM', KEYS[4], ARGV[5])
  elseif ARGV[4] == '1' or behind then
    redis.call('ZADD', KEYS[4], ARGV[6], ARGV[5])
  else
    redis.call('ZADD', KEYS[4], ARGV[7], ARGV[5])
  end
end
return 'ok'
"""
)

# KEYS: state, delivery log, feed source, due index. ARGV: the member in the index, now (ms),
# the state's cursor field, the source's kind. Run by the sweep on a receiver it looked at:
# puts its index entry at the time it next has work (now if it is behind its feed, else its
# head delivery's `next_ms`), or removes it. Returns 'behind', 'due' or 'idle'.
SETTLE_LUA = (
    _SOURCE
    + """
local progress = tonumber(redis.call('HGET', KEYS[1], 'progress') or '0')
local cursor = tonumber(redis.call('HGET', KEYS[1], ARGV[3]) or '0')
if cursor < source_len(KEYS[3], ARGV[4]) then
  redis.call('ZADD', KEYS[4], 'LT', ARGV[2], ARGV[1])
  return 'behind'
end
local head = tonumber(redis.call('HGET', KEYS[1], 'head') or '0')
while head < progress do
  local raw = redis.call('HGET', KEYS[2], tostring(head + 1))
  if raw then
    local entry = cjson.decode(raw)
    if entry['outcome'] ~= 'delivered' and entry['outcome'] ~= 'failed' then
      local at = tonumber(entry['next_ms']) or tonumber(ARGV[2])
      redis.call('ZADD', KEYS[4], at, ARGV[1])
      return 'due'
    end
  end
  head = head + 1
end
redis.call('ZREM', KEYS[4], ARGV[1])
return 'idle'
"""
)

# KEYS: lease. ARGV: token. Deletes the lease only if it is still ours.
RELEASE_LUA = """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
"""

__all__ = ["DISPATCH_LUA", "NEXT_LUA", "RECORD_LUA", "RELEASE_LUA", "SETTLE_LUA"]
