"""The moving windows of the rate limits and failure counts (``plumbing.ratelimit``), timed by Redis's clock.

``limits``' Redis storage stamps each counted request with the asking host's ``time.time()``
and judges the window by it. Web hosts' clocks disagree, and NTP steps a drifted one: a host
whose clock ran a minute ahead saw every other host's stamps as out of the window and let a
service through its whole limit again, and its own stamps, from the future, then counted
against every other host for a minute too long. Here both scripts read the time from Redis
(``TIME``), the one clock every web process asking shares, and the window a host is told
(for Retry-After) is translated into its own clock's seconds, as ``limits`` tells it.

The scripts are ``limits``' own (5.8: ``acquire_moving_window.lua``, ``moving_window.lua``),
but for where the time comes from.
"""

import time
from typing import cast

from limits.errors import StorageError
from limits.storage import RedisStorage
from redis import Redis

# Before the first write: Redis before 5 replicates a script as its text, and refuses a
# write after a command whose answer differs on a replica (TIME) unless told to replicate
# the script's effects instead. From 5 on that is what it does anyway, and 7 deprecates the
# call: made only where it exists, a server that drops it still counts.
_SERVER_NOW = """
if redis.replicate_commands then redis.replicate_commands() end
local clock = redis.call('TIME')
local now = tonumber(clock[1]) + tonumber(clock[2]) / 1000000
"""

ACQUIRE = (
    _SERVER_NOW
    + """
local limit = tonumber(ARGV[1])
local expiry = tonumber(ARGV[2])
local amount = tonumber(ARGV[3])

if amount > limit then
    return false
end

-- Newest first: the entry a request this size would push out of the limit.
local entry = redis.call('lindex', KEYS[1], limit - amount)
if entry and tonumber(entry) >= now - expiry then
    return false
end
local entries = {}
for i = 1, amount do
    entries[i] = now
end
for i = 1, #entries, 5000 do
    redis.call('lpush', KEYS[1], unpack(entries, i, math.min(i + 4999, #entries)))
end
redis.call('ltrim', KEYS[1], 0, limit - 1)
redis.call('expire', KEYS[1], expiry)
return true
"""
)

WINDOW = (
    _SERVER_NOW
    + """
local expiry = tonumber(ARGV[1])
local len = tonumber(ARGV[2])
local target = now - expiry

-- Binary search, newest first, for the oldest entry still in the window.
local low, high, found = 0, len - 1, nil
while low <= high do
    local mid = math.floor((low + high) / 2)
    local value = tonumber(redis.call('lindex', KEYS[1], mid))
    if value and value >= target then
        found = mid
        low = mid + 1
    else
        high = mid - 1
    end
end

if found then
    return {tostring(now), redis.call('lindex', KEYS[1], found), found + 1}
end
return {tostring(now)}
"""
)


class ServerClockRedisStorage(RedisStorage):
    """``limits``' Redis storage, its moving window timed by the Redis server's clock.

    No ``STORAGE_SCHEME`` of its own: ``limits`` registers a class that names one as the
    storage for those URIs everywhere; this one is made by name (``plumbing.ratelimit.limiter_for``).
    """

    def initialize_storage(self, _uri: str) -> None:
        super().initialize_storage(_uri)
        self.lua_acquire_by_server_clock = self.get_connection().register_script(ACQUIRE.encode())
        self.lua_window_by_server_clock = self.get_connection().register_script(WINDOW.encode())

    def acquire_entry(self, key: str, limit: int, expiry: int, amount: int = 1) -> bool:
        return bool(self.lua_acquire_by_server_clock([self.prefixed_key(key)], [limit, expiry, amount]))

    def remove_newest_entry(self, key: str) -> None:
        """Uncount the newest request counted under ``key``: the head of its list, newest first."""
        try:
            # limits types its connection by the few commands it uses itself; it is redis-py's client.
            cast(Redis, self.get_connection()).lpop(self.prefixed_key(key))
        except self.base_exceptions as error:
            # Wrapped as limits wraps its own methods' errors (RedisStorage's wrap_exceptions).
            if self.wrap_exceptions:
                raise StorageError(error) from error
            raise

    def get_moving_window(self, key: str, limit: int, expiry: int) -> tuple[float, int]:
        """The window's oldest counted request, in this host's seconds, and how many it counts."""
        server_now, *window = self.lua_window_by_server_clock([self.prefixed_key(key)], [expiry, limit])
        # The caller adds the expiry to the start it is given and subtracts its own time.time()
        # (limits' get_window_stats, then PerService.wait): moved by the clocks' difference, the
        # wait it reads is the server's, whatever this host's clock says.
        host_now = time.time()
        if not window:
            return host_now, 0
        oldest, count = window
        return float(oldest) - float(server_now) + host_now, int(count)
