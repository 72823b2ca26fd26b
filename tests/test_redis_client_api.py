"""The client libraries' API the Redis adapter is built on, checked on the installed
versions with no server: hiredis's ``Reader`` as :mod:`brokers.redis.resp` calls it, and
every name of redis-py the adapter and its tests reach, by signature. A release that drops
or changes one of them fails here with a message naming it, before any Redis run does.

And that nothing under ``brokers/redis/`` reaches into either library's private parts
(issue #43: a private parser and socket of redis-py's broke with its releases).
"""

from __future__ import annotations

import ast
import inspect
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import hiredis
import pytest
import redis
import redis.cluster
import redis.connection

from brokers.redis.resp import ProtocolError, ReplyError

ROOT = Path(__file__).resolve().parents[1]
REDIS_DIR = ROOT / "brokers" / "redis"
#: Files whose ``redis.…`` names are checked to exist and be public.
USERS = [*sorted(REDIS_DIR.glob("*.py")), *sorted((ROOT / "tests").glob("test_redis*.py"))]


def reader() -> Any:
    """A reader as :class:`~brokers.redis.resp.RespConnection` makes one."""
    try:
        return hiredis.Reader(protocolError=ProtocolError, replyError=ReplyError)
    except (AttributeError, TypeError) as exc:
        pytest.fail(
            "hiredis.Reader(protocolError=..., replyError=...) no longer works "
            f"({type(exc).__name__}: {exc}); brokers/redis/resp.py parses replies with it"
        )


def fed(*chunks: bytes | bytearray) -> list[Any]:
    """What ``gets`` returns after each chunk is fed (``feed(buffer, offset, length)``, as
    the connection feeds its receive buffer)."""
    parser, got = reader(), []
    for chunk in chunks:
        buffer = bytearray(chunk) + b"padding that is not fed"
        parser.feed(buffer, 0, len(chunk))
        got.append(parser.gets())
    return got


def test_hiredis_reader_parses_resp2_as_the_connection_expects() -> None:
    what = "hiredis.Reader.gets (brokers/redis/resp.py's read_reply relies on it)"
    assert fed(b"$5\r\nhel", b"lo\r\n") == [False, b"hello"], (
        f"{what}: False while a reply is incomplete, then the bulk string as bytes"
    )
    assert fed(b"*3\r\n$1\r\na\r\n:7\r\n*-1\r\n") == [[b"a", 7, None]], f"{what}: arrays"
    assert fed(b"+PONG\r\n", b"$-1\r\n", b":-3\r\n") == [b"PONG", None, -3], f"{what}: scalars"
    parser = reader()
    parser.feed(b"-WRONGTYPE Operation against a key\r\n:1\r\n")
    error = parser.gets()
    assert isinstance(error, ReplyError) and str(error).startswith("WRONGTYPE"), (
        f"{what}: an error reply is returned as an instance of replyError, not raised"
    )
    assert parser.gets() == 1 and parser.gets() is False, f"{what}: the reply after an error"


def test_hiredis_reader_raises_the_protocol_error_it_is_given() -> None:
    parser = reader()
    parser.feed(b"?not RESP\r\n")
    with pytest.raises(ProtocolError):
        parser.gets()


def redis_names(path: Path) -> Iterator[tuple[str, int]]:
    """Every dotted name ``redis.…`` in ``path`` (the longest chain), with its line."""
    tree = ast.parse(path.read_text())
    inner = {id(node.value) for node in ast.walk(tree) if isinstance(node, ast.Attribute)}
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and id(node) not in inner:
            parts: list[str] = []
            value: ast.expr = node
            while isinstance(value, ast.Attribute):
                parts.insert(0, value.attr)
                value = value.value
            if isinstance(value, ast.Name) and value.id == "redis":
                yield ".".join(["redis", *parts]), node.lineno


def test_every_redis_py_name_we_use_exists_and_is_public() -> None:
    problems = []
    for path in USERS:
        for name, line in redis_names(path):
            where = f"{path.relative_to(ROOT)}:{line} {name}"
            if any(re.match(r"_(?!_)", part) for part in name.split(".")):
                problems.append(f"{where}: private")
                continue
            found: Any = redis
            for part in name.split(".")[1:]:
                if not hasattr(found, part):
                    problems.append(f"{where}: redis-py {redis.__version__} has no {part!r}")
                    break
                found = getattr(found, part)
    assert not problems, "\n".join(problems)


#: The redis-py calls of the adapter (prepare, describe, Redis Cluster), the local start-up
#: and the tests, as they call them: (what, callable, positional and keyword arguments) —
#: bound to each one's signature (``None`` stands for ``self``).
CALLS: list[tuple[str, Callable[..., Any], tuple[Any, ...], dict[str, Any]]] = [
    (
        "redis.Redis",
        redis.Redis,
        ("h", 1),
        {
            "protocol": 2,
            "socket_connect_timeout": 10,
            "socket_timeout": 30.0,
            "username": None,
            "password": None,
            "retry": None,
        },
    ),
    ("redis.cluster.ClusterNode", redis.cluster.ClusterNode, ("h", 1), {}),
    (
        "redis.cluster.RedisCluster",
        redis.cluster.RedisCluster,
        (),
        {"startup_nodes": [], "socket_connect_timeout": 10, "socket_timeout": 30.0},
    ),
    ("Redis.ping", redis.Redis.ping, (None,), {}),
    ("Redis.delete", redis.Redis.delete, (None, "k"), {}),
    ("Redis.set", redis.Redis.set, (None, "k", "v"), {}),
    (
        "Redis.xgroup_create",
        redis.Redis.xgroup_create,
        (None, "k", b"g"),
        {"id": "0", "mkstream": True},
    ),
    ("Redis.info", redis.Redis.info, (None, "server"), {}),
    ("Redis.config_get", redis.Redis.config_get, (None, "append*"), {}),
    ("Redis.cluster", redis.Redis.cluster, (None, "nodes"), {}),
    ("Redis.client_list", redis.Redis.client_list, (None,), {}),
    ("Redis.xrange", redis.Redis.xrange, (None, "k"), {}),
    ("Redis.xinfo_stream", redis.Redis.xinfo_stream, (None, "k"), {}),
    ("Redis.close", redis.Redis.close, (None,), {}),
    ("RedisCluster.pipeline", redis.cluster.RedisCluster.pipeline, (None,), {"transaction": False}),
    ("ClusterPipeline.xadd", redis.cluster.ClusterPipeline.xadd, (None, "k", {b"m": b"x"}), {}),
    ("ClusterPipeline.xack", redis.cluster.ClusterPipeline.xack, (None, "k", b"g", b"1-0"), {}),
    ("ClusterPipeline.xdel", redis.cluster.ClusterPipeline.xdel, (None, "k", b"1-0"), {}),
    ("ClusterPipeline.execute", redis.cluster.ClusterPipeline.execute, (None,), {}),
    (
        "RedisCluster.xreadgroup",
        redis.cluster.RedisCluster.xreadgroup,
        (None, b"g", b"c", {"k": ">"}),
        {"count": 10},
    ),
    (
        "RedisCluster.xautoclaim",
        redis.cluster.RedisCluster.xautoclaim,
        (None, "k", b"g", b"c", 1000),
        {"start_id": "0-0", "count": 10},
    ),
    (
        "Connection.pack_commands",
        redis.connection.Connection.pack_commands,
        (None, [(b"PING",)]),
        {},
    ),
]


@pytest.mark.parametrize(
    ("what", "function", "args", "kwargs"), CALLS, ids=[call[0] for call in CALLS]
)
def test_redis_py_takes_the_arguments_we_pass(
    what: str, function: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]
) -> None:
    signature = inspect.signature(function)
    try:
        signature.bind(*args, **kwargs)
    except TypeError as exc:
        pytest.fail(f"redis-py {redis.__version__}: {what}{signature} refuses our call: {exc}")


def own_names(tree: ast.AST) -> set[str]:
    """The names a module defines itself: functions, classes, and attributes it assigns."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
            names.add(node.attr)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
    return names


def private_uses(paths: list[Path]) -> list[str]:
    """Each import of a private module or name of redis-py or hiredis, and each private
    attribute (``._x``) that these files do not define themselves."""
    trees = {path: ast.parse(path.read_text()) for path in paths}
    ours = set().union(*(own_names(tree) for tree in trees.values()))
    found = []
    for path, tree in trees.items():
        shown = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path
        for node in ast.walk(tree):
            modules: list[str] = []
            if isinstance(node, ast.Import):
                modules = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                modules = [f"{node.module}.{alias.name}" for alias in node.names]
            for module in modules:
                parts = module.split(".")
                if parts[0] in ("redis", "hiredis") and any(p.startswith("_") for p in parts):
                    found.append(f"{shown}:{node.lineno} imports {module}")
            private = isinstance(node, ast.Attribute) and re.match(r"_(?!_)", node.attr)
            if private and node.attr not in ours:
                found.append(f"{shown}:{node.lineno} uses .{node.attr}")
    return found


def test_nothing_under_brokers_redis_reaches_into_a_librarys_private_parts() -> None:
    found = private_uses(sorted(REDIS_DIR.glob("*.py")))
    assert not found, "private parts of redis-py or hiredis:\n" + "\n".join(found)
    for path in sorted((ROOT / "brokers").rglob("*.py")):
        text = path.read_text()
        assert not re.search(r"redis\._|\._sock|\._parser", text), path


def test_the_private_check_catches_what_the_old_code_did(tmp_path: Path) -> None:
    old = tmp_path / "old.py"
    old.write_text(
        "from redis._parsers.hiredis import _HiredisParser\n"
        "class Channel:\n"
        "    def __init__(self, connection):\n"
        "        self._mine = connection\n"
        "    def read(self):\n"
        "        return self._mine._parser._reader, self._mine\n"
    )
    assert private_uses([old]) == [
        f"{old}:1 imports redis._parsers.hiredis._HiredisParser",
        f"{old}:6 uses ._reader",
        f"{old}:6 uses ._parser",
    ]
