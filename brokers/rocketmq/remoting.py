"""A minimal client for RocketMQ's remoting protocol, for administration only.

Creating topics and consumer groups and reading broker settings back does not go through
the gRPC proxy (which only serves producers and consumers) but through the name server
and brokers' remoting port, the same requests ``mqadmin`` sends. The frame is
``total length | header length (serialize type 0 = JSON in the high byte) | JSON header |
body``; a response carries the request's ``opaque`` and ``code`` 0 on success.

Only the standard library is used, so this module imports without any client package.
"""

from __future__ import annotations

import itertools
import json
import re
import socket
import struct
from dataclasses import dataclass
from typing import Any

from brokers.connection import split_host_port
from brokers.errors import BrokerConnectionError, BrokerError

UPDATE_AND_CREATE_TOPIC = 17
GET_BROKER_CONFIG = 26
GET_BROKER_RUNTIME_INFO = 28
GET_BROKER_CLUSTER_INFO = 106
GET_BROKER_HA_STATUS = 907
UPDATE_AND_CREATE_SUBSCRIPTIONGROUP = 200

_RESPONSE_FLAG = 1
_opaque = itertools.count(1)


@dataclass(frozen=True, slots=True)
class Response:
    code: int
    remark: str
    ext: dict[str, str]
    body: bytes


def call(
    address: str,
    code: int,
    ext: dict[str, str] | None = None,
    body: bytes = b"",
    timeout: float = 10.0,
) -> Response:
    """Send one request to ``host:port`` and return its response (raises on failure codes)."""
    opaque = next(_opaque)
    header = json.dumps(
        {
            "code": code,
            "language": "PYTHON",
            "version": 0,
            "opaque": opaque,
            "flag": 0,
            "extFields": {k: str(v) for k, v in (ext or {}).items()},
        }
    ).encode()
    frame = struct.pack(">ii", 4 + len(header) + len(body), len(header)) + header + body
    host, port = split_host_port(address)
    try:
        with socket.create_connection((host, port), timeout=timeout) as sock:
            sock.sendall(frame)
            while True:
                (length,) = struct.unpack(">i", _read(sock, 4))
                payload = _read(sock, length)
                response = _decode(payload)
                if response is not None and response[0] == opaque:
                    break
    except OSError as exc:
        raise BrokerConnectionError(f"RocketMQ at {address} is unreachable: {exc}") from None
    _, result = response
    if result.code != 0:
        raise BrokerError(
            f"RocketMQ at {address}: request {code} failed with code {result.code}: "
            f"{result.remark or 'no detail'}"
        )
    return result


def _read(sock: socket.socket, n: int) -> bytes:
    chunks = bytearray()
    while len(chunks) < n:
        chunk = sock.recv(n - len(chunks))
        if not chunk:
            raise ConnectionError("connection closed by the server")
        chunks += chunk
    return bytes(chunks)


def _decode(payload: bytes) -> tuple[int, Response] | None:
    (mark,) = struct.unpack(">i", payload[:4])
    if mark >> 24 != 0:
        raise BrokerError("RocketMQ answered in its binary (ROCKETMQ) serialisation; expected JSON")
    header_length = mark & 0xFFFFFF
    header = json.loads(payload[4 : 4 + header_length])
    if not header.get("flag", 0) & _RESPONSE_FLAG:
        return None  # a request from the server (e.g. a notification), not our answer
    return header["opaque"], Response(
        code=int(header.get("code", -1)),
        remark=str(header.get("remark") or ""),
        ext={str(k): str(v) for k, v in (header.get("extFields") or {}).items()},
        body=payload[4 + header_length :],
    )


def lenient_json(body: bytes) -> Any:
    """Parse fastjson output, which writes integer map keys without quotes."""
    text = body.decode("utf-8")
    return json.loads(re.sub(r'([{,])\s*(-?\d+)\s*:(?=[^"]|")', r'\1"\2":', text))


def cluster_info(namesrv: str) -> dict[str, dict[int, str]]:
    """Broker name → {broker id → address} (id 0 is the master) as the name server knows it."""
    data = lenient_json(call(namesrv, GET_BROKER_CLUSTER_INFO).body)
    return {
        name: {int(i): addr for i, addr in entry.get("brokerAddrs", {}).items()}
        for name, entry in data.get("brokerAddrTable", {}).items()
    }


def broker_config(address: str) -> dict[str, str]:
    """The broker's effective configuration (``key=value`` lines in the body)."""
    text = call(address, GET_BROKER_CONFIG).body.decode("utf-8", errors="replace")
    config: dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep:
            config[key.strip()] = value.strip()
    return config


def broker_runtime(address: str) -> dict[str, str]:
    """Runtime facts such as ``brokerVersionDesc`` and the slave's replication lag."""
    data = lenient_json(call(address, GET_BROKER_RUNTIME_INFO).body)
    return {str(k): str(v) for k, v in data.get("table", {}).items()}


def ha_status(address: str) -> dict[str, Any]:
    """Replication state: on a master ``inSyncSlaveNums`` and one entry per slave connection."""
    return dict(lenient_json(call(address, GET_BROKER_HA_STATUS).body))


def create_topic(address: str, topic: str, queues: int, fifo: bool = False) -> None:
    """Create (or update) a topic with ``queues`` read and write queues: of normal messages,
    or (``fifo``) of FIFO messages, whose message groups are each kept in order."""
    call(
        address,
        UPDATE_AND_CREATE_TOPIC,
        {
            "topic": topic,
            "defaultTopic": "TBW102",
            "readQueueNums": str(queues),
            "writeQueueNums": str(queues),
            "perm": "6",
            "topicFilterType": "SINGLE_TAG",
            "topicSysFlag": "0",
            "order": "true" if fifo else "false",
            "attributes": f"+message.type={'FIFO' if fifo else 'NORMAL'}",
        },
    )


def create_consumer_group(
    address: str, group: str, max_retries: int = 16, orderly: bool = False
) -> None:
    """Create a consumer group that consumes in clustering mode (not broadcast); ``orderly``:
    a FIFO group, which hands out a message group's next message only once the one before
    it was acknowledged."""
    config = {
        "groupName": group,
        "consumeEnable": True,
        "consumeFromMinEnable": True,
        "consumeBroadcastEnable": False,
        "consumeMessageOrderly": orderly,
        "retryQueueNums": 1,
        "retryMaxTimes": max_retries,
        "brokerId": 0,
        "whichBrokerWhenConsumeSlowly": 1,
        "notifyConsumerIdsChangedEnable": True,
        "groupSysFlag": 0,
        "consumeTimeoutMinute": 15,
    }
    call(address, UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, body=json.dumps(config).encode())
