"""spec.config's grammar: which redis.conf directives a Redis may set, and
which words their values may hold, so that the arguments a pod gets are read
by redis-server as exactly the directives written, and nothing more.

Why a grammar and not a filter: redis-server 7 joins its command-line options
back into configuration text (``--name`` starts a line; each other argument
is appended quoted), then parses that text as redis.conf. So an argument
that starts with ``--`` starts a new directive (``maxmemory 1mb --port
7000``), a name alone makes the next argument, even ``--requirepass``, its
value (``#comment``, ``appendonly``), a lone ``-`` at either end reads
configuration from standard input, and the kubelet expands ``$(VAR)`` and
``$$`` in any argument before the server sees it. Filtering out a few names
left all of that open; only a directive on `ALLOWED`, with words of `WORD`,
reaches the server.

The CRD says the same with `PATTERN` and `refused_rule`; the unit tests hold
the CRD equal to these, and the accepted directives are run against a real
redis-server (tests/unit/kinds/redis/test_server_real.py).
"""

from __future__ import annotations

from collections.abc import Mapping

from reconciler.kinds.redis.placement import quoted

# Directives that change neither who may connect, what runs, nor where data
# and logs go: memory and eviction, persistence schedules, timeouts, event
# notification, the slow and latency logs, encodings and the housekeeping
# of redis 7's redis.conf. Lowercase, as redis.conf writes them.
ALLOWED: frozenset[str] = frozenset(
    {
        # memory and eviction
        "maxmemory",
        "maxmemory-policy",
        "maxmemory-samples",
        "maxmemory-eviction-tenacity",
        "maxmemory-clients",
        "lfu-log-factor",
        "lfu-decay-time",
        "lazyfree-lazy-eviction",
        "lazyfree-lazy-expire",
        "lazyfree-lazy-server-del",
        "lazyfree-lazy-user-del",
        "lazyfree-lazy-user-flush",
        "activedefrag",
        "active-defrag-ignore-bytes",
        "active-defrag-threshold-lower",
        "active-defrag-threshold-upper",
        "active-defrag-cycle-min",
        "active-defrag-cycle-max",
        "active-defrag-max-scan-fields",
        "jemalloc-bg-thread",
        # persistence schedules (the files stay in the working directory)
        "save",
        "stop-writes-on-bgsave-error",
        "rdbcompression",
        "rdbchecksum",
        "rdb-save-incremental-fsync",
        "appendonly",
        "appendfsync",
        "no-appendfsync-on-rewrite",
        "auto-aof-rewrite-percentage",
        "auto-aof-rewrite-min-size",
        "aof-load-truncated",
        "aof-use-rdb-preamble",
        "aof-rewrite-incremental-fsync",
        "aof-timestamp-enabled",
        "shutdown-timeout",
        # clients, timeouts and keepalive
        "maxclients",
        "timeout",
        "tcp-keepalive",
        "client-output-buffer-limit",
        "client-query-buffer-limit",
        "proto-max-bulk-len",
        "busy-reply-threshold",
        "lua-time-limit",
        "tracking-table-max-keys",
        "databases",
        # events, slow log, latency, log level (the log stays on stdout)
        "notify-keyspace-events",
        "slowlog-log-slower-than",
        "slowlog-max-len",
        "latency-monitor-threshold",
        "latency-tracking",
        "latency-tracking-info-percentiles",
        "loglevel",
        "acllog-max-len",
        # encodings and housekeeping
        "hash-max-listpack-entries",
        "hash-max-listpack-value",
        "hash-max-ziplist-entries",
        "hash-max-ziplist-value",
        "list-max-listpack-size",
        "list-max-ziplist-size",
        "list-compress-depth",
        "set-max-intset-entries",
        "zset-max-listpack-entries",
        "zset-max-listpack-value",
        "zset-max-ziplist-entries",
        "zset-max-ziplist-value",
        "hll-sparse-max-bytes",
        "stream-node-max-bytes",
        "stream-node-max-entries",
        "activerehashing",
        "hz",
        "dynamic-hz",
        "io-threads",
        "io-threads-do-reads",
    }
)

_OWN = "is set by {}, not spec.config"
_CONNECT = "is refused: it changes who may connect ({})"
_RUNS = "is refused: it changes what the server runs ({})"
_WHERE = "is refused: it moves {} ({})"
# A directive spec.config never takes -> why, named in the message (and in
# the CRD's, held equal by a unit test).
REFUSED: Mapping[str, str] = {
    "port": _OWN.format("spec.port"),
    "requirepass": _OWN.format("spec.auth.passwordSecret"),
    "dir": _OWN.format("spec.storage (its claim is mounted at /data)"),
    "daemonize": _OWN.format("the pod (the server must stay in the foreground)"),
    "masterauth": _CONNECT.format("a password sent to another server"),
    "masteruser": _CONNECT.format("a user sent to another server"),
    "user": _CONNECT.format("ACL users; spec.auth.passwordSecret sets the password"),
    "aclfile": _CONNECT.format("ACL users read from a file in the pod"),
    "bind": _CONNECT.format("addresses; spec.networkPolicy says who may connect"),
    "protected-mode": _CONNECT.format("spec.networkPolicy says who may connect"),
    "unixsocket": _CONNECT.format("a socket file in the pod"),
    "tls-port": _CONNECT.format("a second port"),
    "replicaof": _RUNS.format("it copies another server's data"),
    "slaveof": _RUNS.format("it copies another server's data"),
    "include": _RUNS.format("it reads a file of the pod, which then reaches the logs"),
    "loadmodule": _RUNS.format("it loads code"),
    "rename-command": _RUNS.format("it renames commands"),
    "enable-debug-command": _RUNS.format("it opens DEBUG"),
    "enable-module-command": _RUNS.format("it opens MODULE LOAD"),
    "enable-protected-configs": _RUNS.format("it lets clients change dir and the like"),
    "dbfilename": _WHERE.format("the data files", "spec.storage keeps them at /data"),
    "appendfilename": _WHERE.format("the data files", "spec.storage keeps them at /data"),
    "appenddirname": _WHERE.format("the data files", "spec.storage keeps them at /data"),
    "logfile": _WHERE.format("the logs", "the pod logs standard output"),
    "pidfile": _WHERE.format("the pid file", "a file in the pod"),
}
NOT_ALLOWED = "is not a directive spec.config allows; see docs/pass.md"

# The characters of a word: printable ASCII but for the quotes, '#', '\'
# (all of which redis.conf would read) and '$' (which the kubelet reads).
_PLAIN = frozenset(chr(c) for c in range(0x21, 0x7F)) - set("\"#$'\\")
EMPTY = '""'  # the one quoted word: an empty value (``save ""``)

# RE2 (the CRD's CEL ``matches``) and Python alike. C: a plain character;
# D: one that may follow '$' (not '(', so ``$(VAR)`` never forms, nor '$');
# a word is optionally one '-' (never two: '--' starts a directive) then
# plain characters and '$'+D, ending in at most one '$'.
_C = r"[!%&(-\[\]-~]"
_C_NOT_DASH = r"[!%&(-,.-\[\]-~]"
_D = r"[!%&)-\[\]-~]"
WORD = rf'(?:""|-?(?:(?:{_C_NOT_DASH}|\${_D})(?:{_C}|\${_D})*\$?|\$))'
_NAMES = "|".join(sorted(ALLOWED, key=lambda n: (-len(n), n)))
GRAMMAR = rf"^ *(?:{_NAMES})(?: +{WORD})+ *$"


def _folded(name: str) -> str:
    """``port`` as ``[pP][oO][rR][tT]``: ASCII case alone, as redis-server
    folds a name (RE2's ``(?i)`` would also take the Kelvin sign for k)."""
    return "".join(f"[{c}{c.upper()}]" if c.isalpha() else c for c in name)


def refused_pattern(name: str) -> str:
    """A directive naming ``name`` in any ASCII case."""
    return rf"^ *{_folded(name)}( |$)"


def refused_rule(name: str) -> tuple[str, str]:
    """The CRD's rule and message refusing ``name``."""
    return f"!self.matches(r'{refused_pattern(name)}')", f"directive {name} {REFUSED[name]}"


ANY_REFUSED = rf"^ *(?:{'|'.join(_folded(n) for n in sorted(REFUSED))})( |$)"
# The CRD's pattern for each item: the grammar, or a refused name, which its
# own rule then says. A pattern, not a CEL rule: CEL's matches() on 100
# items of 1024 characters cost the apiserver's budget 2.7 times over.
PATTERN = rf"^ *(?:{'|'.join(_folded(n) for n in sorted(REFUSED))})(?: .*)?$|{GRAMMAR}"


def word_error(word: str) -> str | None:
    """Why a word of a directive's value cannot reach the server as written."""
    if word == EMPTY:
        return None
    if word == "-" or word.startswith("--"):
        return "must not be '-' or start with '--' (the server would read it as an option)"
    if not set(word) <= _PLAIN | {"$"}:
        return "must be printable ASCII without quotes, '#' or '\\' (\"\" alone is empty)"
    if "$(" in word or "$$" in word:
        return "must not hold '$(' or '$$' (the kubelet would expand them)"
    return None


def split(directive: str) -> list[str]:
    """The words of a directive, between spaces (not tabs, not quotes)."""
    return [w for w in directive.split(" ") if w]


def error(directive: str) -> str | None:
    """Why ``directive`` is not in the grammar, or None."""
    words = split(directive)
    if not words:
        return "must be a directive and its values, got nothing"
    name, *values = words
    folded = name.lower() if name.isascii() else name
    if folded in REFUSED:
        return f"directive {folded} {REFUSED[folded]}"
    if name not in ALLOWED:
        return f"{quoted(name)} {NOT_ALLOWED}"
    if not values:
        return f"directive {name} needs a value"
    for i, word in enumerate(values, 1):
        why = word_error(word)
        if why is not None:
            return f"directive {name}: value {i} {quoted(word)} {why}"
    return None


def arguments(words: tuple[str, ...]) -> list[str]:
    """A directive that `error` passed, as the server's options."""
    name, *values = words
    return [f"--{name}", *("" if v == EMPTY else v for v in values)]
