"""One run's prefix in the results bucket, as every machine of a stack reads and writes it:
client machines (:mod:`workload.engine.aws.agent`, which upload their run directory with an
:class:`Uploader`) and the fault agents of broker machines (:mod:`workload.engine.aws.fault_agent`).

Standard library only (the S3 client is passed in): a broker machine runs it with the
system's Python straight from the uploaded wheel, without installing the project.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, TypeVar

from workload.model.layout import LAYOUT

T = TypeVar("T")
Log = Callable[[str], None]


def now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


class ObjectStore(Protocol):
    """The few S3 operations the agent needs (a boto3 S3 client provides them)."""

    def put_object(self, **kwargs: Any) -> Any: ...
    def get_object(self, **kwargs: Any) -> Any: ...
    def upload_file(self, Filename: str, Bucket: str, Key: str) -> Any: ...
    def list_objects_v2(self, **kwargs: Any) -> Any: ...


class StoreDenied(Exception):
    """S3 refused a request of this machine's role: one line naming the permission and the
    object (or the listed prefix)."""


@dataclass
class RunStore:
    """One run's prefix in the results bucket.

    Whether a key exists is asked with a listing of exactly that key (``s3:ListBucket``,
    which the stack grants for prefixes under the run), never by reading it: S3 answers a
    GetObject of a missing key 404 only to a caller that may list the bucket *for that
    request*, and the stack grants ListBucket only under an ``s3:prefix`` condition, which
    a GetObject does not carry — so S3 answers it 403, as for an object one may not read.
    A request S3 refuses raises :class:`StoreDenied`.
    """

    s3: ObjectStore
    bucket: str
    run_id: str

    @property
    def prefix(self) -> str:
        return LAYOUT.prefix(self.run_id)

    def uri(self, key: str) -> str:
        return f"s3://{self.bucket}/{self.prefix}{key}"

    def put_json(self, key: str, value: dict[str, Any]) -> None:
        self.put_text(key, json.dumps(value))

    def put_text(self, key: str, text: str) -> None:
        body = text.encode()
        self._request(
            "s3:PutObject",
            self.uri(key),
            lambda: self.s3.put_object(Bucket=self.bucket, Key=self.prefix + key, Body=body),
        )

    def exists(self, key: str) -> bool:
        """Whether the run holds ``key`` (a listing: the key sorts first under itself)."""
        full = self.prefix + key
        page = self._list(full, MaxKeys=1)
        return any(item["Key"] == full for item in page.get("Contents", []))

    def get_json(self, key: str) -> dict[str, Any] | None:
        """A JSON object of the run; None while there is none."""
        return self.read_json(key) if self.exists(key) else None

    def read_json(self, key: str) -> dict[str, Any] | None:
        """A JSON object known to exist (listed); None if it has gone since."""
        try:
            response = self._request(
                "s3:GetObject",
                self.uri(key),
                lambda: self.s3.get_object(Bucket=self.bucket, Key=self.prefix + key),
            )
        except Exception as exc:
            if _is_missing(exc):
                return None
            raise
        value: dict[str, Any] = json.loads(response["Body"].read())
        return value

    def keys(self, under: str) -> set[str]:
        """Keys (relative to the run prefix) starting with ``under``."""
        found: set[str] = set()
        token: str | None = None
        while True:
            extra = {"ContinuationToken": token} if token else {}
            page = self._list(self.prefix + under, **extra)
            found.update(item["Key"][len(self.prefix) :] for item in page.get("Contents", []))
            token = page.get("NextContinuationToken")
            if not token:
                return found

    def upload(self, path: Path, key: str) -> None:
        self._request(
            "s3:PutObject",
            self.uri(key),
            lambda: self.s3.upload_file(str(path), self.bucket, self.prefix + key),
        )

    def _list(self, prefix: str, **extra: Any) -> Any:
        return self._request(
            "s3:ListBucket",
            f"s3://{self.bucket} (prefix {prefix})",
            lambda: self.s3.list_objects_v2(Bucket=self.bucket, Prefix=prefix, **extra),
        )

    def _request(self, permission: str, target: str, request: Callable[[], T]) -> T:
        try:
            return request()
        except Exception as exc:
            if _is_denied(exc):
                code, _ = _error_of(exc)
                raise StoreDenied(
                    f"S3 refused {permission} on {target} ({code}): "
                    "this machine's role lacks that permission there"
                ) from exc
            raise


def _error_of(exc: BaseException) -> tuple[str, int]:
    """S3's error code and HTTP status in an exception, or in the client error it wraps
    (boto3's upload_file raises its own error in place of the client error)."""
    seen: BaseException | None = exc
    while seen is not None:
        response = getattr(seen, "response", None)
        if isinstance(response, dict):
            error = response.get("Error", {})
            status = response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0)
            return str(error.get("Code", "")), int(status or 0)
        seen = seen.__cause__ or seen.__context__
    return "", 0


def _is_missing(exc: Exception) -> bool:
    return _error_of(exc)[0] in ("NoSuchKey", "404", "NotFound")


def _is_denied(exc: Exception) -> bool:
    code, status = _error_of(exc)
    return code == "AccessDenied" or (status == 403 and code in ("403", "Forbidden"))


def agent_arguments(module: str, description: str) -> argparse.ArgumentParser:
    """The command line every broker machine's agent shares (``python3 -m <module>``): the
    run's bucket, id and region, and this node's name; the agent adds its own."""
    parser = argparse.ArgumentParser(prog=f"python3 -m {module}", description=description)
    parser.add_argument("--bucket", required=True)
    parser.add_argument("--run-id", required=True)
    parser.add_argument("--region", required=True)
    parser.add_argument("--node", required=True, help="this node's name, e.g. broker-1")
    return parser


def agent_store(args: argparse.Namespace) -> RunStore:
    """The run's store, as an agent's arguments name it (boto3: Debian's python3-boto3)."""
    import boto3

    return RunStore(boto3.client("s3", region_name=args.region), args.bucket, args.run_id)


@dataclass
class Uploader:
    """Uploads new or changed files of the local run directory, with retries."""

    store: RunStore
    run_dir: Path
    log: Log
    attempts: int = 5
    backoff: float = 2.0
    sleep: Callable[[float], None] = time.sleep
    sent: dict[str, tuple[int, float]] = field(default_factory=dict)

    def upload_new(self) -> list[str]:
        """Upload what changed since the last call; the files that could not be uploaded."""
        failed: list[str] = []
        if not self.run_dir.is_dir():
            return failed
        for path in sorted(p for p in self.run_dir.rglob("*") if p.is_file()):
            if path.name.startswith("."):
                continue
            key = path.relative_to(self.run_dir).as_posix()
            stat = path.stat()
            if self.sent.get(key) == (stat.st_size, stat.st_mtime):
                continue
            if self.upload(path, key):
                self.sent[key] = (stat.st_size, stat.st_mtime)
            else:
                failed.append(key)
        return failed

    def upload(self, path: Path, key: str) -> bool:
        """Upload one file, retried unless S3 refuses it; whether it was uploaded."""
        error: Exception | None = None
        for attempt in range(1, self.attempts + 1):
            try:
                self.store.upload(path, key)
                return True
            except StoreDenied as exc:  # asking again gets the same answer
                self.log(f"upload of {key} failed: {exc}; the local copy stays at {path}")
                return False
            except Exception as exc:
                error = exc
                if attempt < self.attempts:
                    self.sleep(self.backoff * 2 ** (attempt - 1))
        self.log(
            f"upload of {key} to {self.store.uri(key)} failed after {self.attempts} attempts "
            f"({error}); the local copy stays at {path}"
        )
        return False
