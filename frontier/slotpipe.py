"""A pipeline that works on one Redis and on Redis Cluster, Lua scripts included.

redis-py's cluster pipeline refuses EVALSHA, but the frontier's scripts each touch one hash
tag, i.e. one slot, i.e. one node. So on a cluster we keep one plain pipeline per node (the
node that serves each call's first key), run them, and hand the replies back in call order.
On a single server it is just one pipeline: one round trip.

Two things keep the command count per page low (issue 7):

* Scripts are sent as raw ``EVALSHA``. redis-py's ``Script`` objects make every pipeline that
  holds one run ``SCRIPT EXISTS`` first (one more command and one more round trip per
  pipeline). Here a script is loaded once per server, in the same round trip as its first use
  (``SCRIPT LOAD`` queued ahead of it), and after that only on ``NOSCRIPT`` (the server was
  restarted or its scripts flushed): the calls that failed are sent again after a load.
* On a single server, adjacent calls of the same script (one per partition: admit, acquire,
  complete, begin, ...) are merged into one ``EVALSHA`` of the script's *batched* variant,
  which runs the script body once per call in order and returns the list of replies. The
  server does the same work, atomically as a bonus; the client sends one command instead of
  one per partition. On a cluster a script may only touch the keys of one slot, so there every
  call stays its own ``EVALSHA``.
"""

from __future__ import annotations

import hashlib
import weakref
from dataclasses import dataclass, field
from typing import Any

import redis
from redis.cluster import RedisCluster

#: Runs a script body once per call: ARGV = per call (n_keys, n_args, args...), KEYS = the
#: calls' keys in order. Returns the list of the calls' replies.
_BATCHED = """local function body(KEYS, ARGV)
%s
end
local out, k, pos = {}, 1, 1
local n = #ARGV
while pos <= n do
  local nk, na = tonumber(ARGV[pos]), tonumber(ARGV[pos + 1])
  local keys, args = {}, {}
  for j = 1, nk do keys[j] = KEYS[k + j - 1] end
  for j = 1, na do args[j] = ARGV[pos + 1 + j] end
  out[#out + 1] = body(keys, args)
  k = k + nk
  pos = pos + 2 + na
end
return out
"""


def _sha(source: str) -> str:
    return hashlib.sha1(source.encode()).hexdigest()


@dataclass(frozen=True, eq=False)
class LuaScript:
    """A script's source and SHA1, and (lazily) its batched variant."""

    name: str
    source: str
    sha: str = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "sha", _sha(self.source))

    @property
    def batched(self) -> LuaScript:
        b = self.__dict__.get("_batched")
        if b is None:
            b = LuaScript(self.name + "[batched]", _BATCHED % self.source)
            object.__setattr__(self, "_batched", b)
        return b


#: Connection pool -> SHA1s known to be loaded on that server (refreshed on NOSCRIPT).
_loaded: weakref.WeakKeyDictionary[Any, set[str]] = weakref.WeakKeyDictionary()


class SlotPipeline:
    def __init__(self, client: redis.Redis) -> None:
        self.client = client
        self.cluster = isinstance(client, RedisCluster)
        #: node name -> (connection, [call, ...]); a call is ("s", script, keys, args, i) or
        #: ("c", name, key, args, i) with i its index in call order.
        self._nodes: dict[str, tuple[Any, list[tuple[Any, ...]]]] = {}
        self._n = 0

    def _node(self, key: str) -> list[tuple[Any, ...]]:
        if not self.cluster:
            name, conn = "_", self.client
        else:
            node = self.client.get_node_from_key(key)  # type: ignore[attr-defined]
            name = node.name
            if name in self._nodes:
                return self._nodes[name][1]
            conn = self.client.get_redis_connection(node)  # type: ignore[attr-defined]
        if name not in self._nodes:
            self._nodes[name] = (conn, [])
        return self._nodes[name][1]

    def script(self, script: LuaScript, keys: list[str], args: list[Any]) -> None:
        self._node(keys[0]).append(("s", script, keys, args, self._n))
        self._n += 1

    def command(self, name: str, key: str, *args: Any) -> None:
        """A redis-py pipeline method (``"hincrby"``), or a raw command when upper case
        (``"ZADD", key, "LT", ...``)."""
        self._node(key).append(("c", name, key, args, self._n))
        self._n += 1

    def __len__(self) -> int:
        return self._n

    def execute(self) -> list[Any]:
        out: list[Any] = [None] * self._n
        try:
            for conn, calls in self._nodes.values():
                self._run_node(conn, calls, out)
        finally:
            self._nodes.clear()
            self._n = 0
        return out

    # -- one node ---------------------------------------------------------------------------
    def _groups(self, calls: list[tuple[Any, ...]]) -> list[list[tuple[Any, ...]]]:
        """Adjacent calls of one script form a group (single server only)."""
        groups: list[list[tuple[Any, ...]]] = []
        for call in calls:
            if (not self.cluster and call[0] == "s" and groups and groups[-1][0][0] == "s"
                    and groups[-1][0][1].sha == call[1].sha):
                groups[-1].append(call)
            else:
                groups.append([call])
        return groups

    def _run_node(self, conn: Any, calls: list[tuple[Any, ...]], out: list[Any]) -> None:
        pool = conn.connection_pool
        loaded = _loaded.setdefault(pool, set())
        groups = self._groups(calls)
        pipe = conn.pipeline(transaction=False)
        queued: list[list[tuple[Any, ...]] | None] = []  # None: a SCRIPT LOAD we added
        pending: dict[str, LuaScript] = {}
        for group in groups:
            if group[0][0] == "s":
                script = _effective(group)
                if script.sha not in loaded and script.sha not in pending:
                    pending[script.sha] = script
                    pipe.execute_command("SCRIPT LOAD", script.source)
                    queued.append(None)
            _queue(pipe, group)
            queued.append(group)
        replies = pipe.execute(raise_on_error=False)
        loaded.update(pending)
        retry: list[list[tuple[Any, ...]]] = []
        error: Exception | None = None
        for group, reply in zip(queued, replies, strict=True):
            if group is None:
                if isinstance(reply, Exception) and error is None:
                    error = reply
                continue
            if isinstance(reply, redis.exceptions.NoScriptError):
                retry.append(group)
                continue
            if isinstance(reply, Exception) and error is None:
                error = reply
            _store(group, reply, out)
        if retry:
            # The server lost its scripts (restart, SCRIPT FLUSH): load and send those again.
            # (They run after the rest of this pipeline: only ever after a restart.)
            loaded.clear()
            pipe = conn.pipeline(transaction=False)
            scripts = {_effective(g).sha: _effective(g) for g in retry}
            for script in scripts.values():
                pipe.execute_command("SCRIPT LOAD", script.source)
            for group in retry:
                _queue(pipe, group)
            replies = pipe.execute(raise_on_error=False)
            loaded.update(scripts)
            for reply in replies[:len(scripts)]:
                if isinstance(reply, Exception) and error is None:
                    error = reply
            for group, reply in zip(retry, replies[len(scripts):], strict=True):
                if isinstance(reply, Exception) and error is None:
                    error = reply
                _store(group, reply, out)
        if error is not None:
            raise error


def _effective(group: list[tuple[Any, ...]]) -> LuaScript:
    script: LuaScript = group[0][1]
    return script.batched if len(group) > 1 else script


def _queue(pipe: Any, group: list[tuple[Any, ...]]) -> None:
    call = group[0]
    if call[0] == "c" and call[1].isupper():
        pipe.execute_command(call[1], call[2], *call[3])
    elif call[0] == "c":
        getattr(pipe, call[1])(call[2], *call[3])
    elif len(group) == 1:
        pipe.execute_command("EVALSHA", call[1].sha, len(call[2]), *call[2], *call[3])
    else:
        keys: list[Any] = []
        args: list[Any] = []
        for c in group:
            keys.extend(c[2])
            args.append(len(c[2]))
            args.append(len(c[3]))
            args.extend(c[3])
        pipe.execute_command("EVALSHA", group[0][1].batched.sha, len(keys), *keys, *args)


def _store(group: list[tuple[Any, ...]], reply: Any, out: list[Any]) -> None:
    if len(group) == 1:
        out[group[0][4]] = reply
    elif isinstance(reply, Exception):
        for c in group:
            out[c[4]] = reply
    else:
        for c, r in zip(group, reply, strict=True):
            out[c[4]] = r
