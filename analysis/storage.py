"""Where a run's files live: a local directory or ``s3://bucket/prefix``.

The analysis job addresses a run through :class:`RunLocation`, so the same code reads a
local run and one in S3. Small files (context, summary) go through the filesystem or boto3;
tables are read and written by Spark: locally through the S3A connector (hadoop-aws of
pyspark's Hadoop version, fetched from Maven Central into the artifact cache), on EMR
through EMRFS (``s3://`` as is). ``AWS_ENDPOINT_URL`` points both boto3 and S3A at an
S3-compatible server (e.g. moto in server mode).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from importlib.resources import as_file, files
from pathlib import Path
from typing import Any

#: pyspark's bundled Hadoop; hadoop-aws must match it exactly.
HADOOP_VERSION = "3.3.4"
#: The pom listing hadoop-aws (package data: a file, or a member of a zip on sys.path).
POM = files("analysis") / "s3" / "pom.xml"


def hadoop_aws_jars(log: Any = print) -> list[Path]:
    """The S3A jars for local mode (fetched once into the artifact cache)."""
    from brokers.jvm import cache_dir, maven_fetch

    with as_file(POM) as pom:  # Maven reads a file: a zip member is copied out for it
        directory = maven_fetch(pom, cache_dir(f"hadoop-aws-{HADOOP_VERSION}"), log)
    return sorted(directory.glob("*.jar"))


def s3a_settings(jars: list[Path]) -> dict[str, str]:
    """Spark settings for reading and writing ``s3a://`` in local mode."""
    settings = {
        "spark.jars": ",".join(str(j) for j in jars),
        "spark.hadoop.fs.s3a.impl": "org.apache.hadoop.fs.s3a.S3AFileSystem",
        "spark.hadoop.fs.s3a.aws.credentials.provider": (
            "org.apache.hadoop.fs.s3a.SimpleAWSCredentialsProvider,"
            "com.amazonaws.auth.DefaultAWSCredentialsProviderChain"
        ),
    }
    for env, key in (
        ("AWS_ACCESS_KEY_ID", "access.key"),
        ("AWS_SECRET_ACCESS_KEY", "secret.key"),
        ("AWS_SESSION_TOKEN", "session.token"),
    ):
        if os.environ.get(env):
            settings[f"spark.hadoop.fs.s3a.{key}"] = os.environ[env]
    if os.environ.get("AWS_SESSION_TOKEN"):  # a role's session: the token signs every request
        settings["spark.hadoop.fs.s3a.aws.credentials.provider"] = (
            "org.apache.hadoop.fs.s3a.TemporaryAWSCredentialsProvider"
        )
    endpoint = os.environ.get("AWS_ENDPOINT_URL")
    if endpoint:
        settings["spark.hadoop.fs.s3a.endpoint"] = endpoint
        settings["spark.hadoop.fs.s3a.path.style.access"] = "true"
        if os.environ.get("AWS_DEFAULT_REGION"):  # signed for the region, not us-east-1
            settings["spark.hadoop.fs.s3a.endpoint.region"] = os.environ["AWS_DEFAULT_REGION"]
        settings["spark.hadoop.fs.s3a.connection.ssl.enabled"] = str(
            endpoint.startswith("https")
        ).lower()
    return settings


@dataclass(frozen=True)
class RunLocation:
    """One run directory, local or in S3."""

    uri: str

    @classmethod
    def of(cls, run: Path | str | RunLocation) -> RunLocation:
        if isinstance(run, RunLocation):
            return run
        text = str(run)
        return cls(text.rstrip("/") if is_s3(text) else str(Path(text)))

    @property
    def s3(self) -> bool:
        return is_s3(self.uri)

    @property
    def name(self) -> str:
        return self.uri.rstrip("/").rsplit("/", 1)[-1]

    @property
    def local(self) -> Path:
        if self.s3:
            raise ValueError(f"{self.uri} is not a local directory")
        return Path(self.uri)

    def spark_path(self, relative: str) -> str:
        """The path Spark reads or writes: ``s3a://`` in local mode, ``s3://`` on EMR."""
        if not self.s3:
            return str(self.local / relative)
        bucket, key = self._bucket_key(relative)
        return f"{'s3' if cluster_mode() else 's3a'}://{bucket}/{key}"

    def read_text(self, relative: str) -> str:
        if not self.s3:
            return (self.local / relative).read_text()
        bucket, key = self._bucket_key(relative)
        body = _client().get_object(Bucket=bucket, Key=key)["Body"].read()
        return str(body.decode())

    def write_text(self, relative: str, text: str) -> None:
        if not self.s3:
            path = self.local / relative
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
            return
        bucket, key = self._bucket_key(relative)
        _client().put_object(Bucket=bucket, Key=key, Body=text.encode())

    def has_parquet(self, relative: str) -> bool:
        """Whether the folder holds at least one Parquet file."""
        if not self.s3:
            return any((self.local / relative).glob("*.parquet"))
        return self.has_files(relative, ".parquet")

    def has_files(self, relative: str, suffix: str) -> bool:
        """Whether the folder, or a folder below it, holds a file ending in ``suffix``."""
        if not self.s3:
            return any((self.local / relative).rglob(f"*{suffix}"))
        bucket, key = self._bucket_key(relative)
        listing = _client().list_objects_v2(Bucket=bucket, Prefix=key.rstrip("/") + "/")
        return any(o["Key"].endswith(suffix) for o in listing.get("Contents", []))

    def _bucket_key(self, relative: str) -> tuple[str, str]:
        bucket, _, prefix = self.uri.split("://", 1)[1].partition("/")
        return bucket, "/".join(p for p in (prefix.strip("/"), relative) if p)


def cluster_mode() -> bool:
    """True under spark-submit (EMR, a cluster) or when ``BROKERBENCH_SPARK_CLUSTER`` is set:
    the cluster's own settings and S3 support are used as they are."""
    return bool(
        os.environ.get("BROKERBENCH_SPARK_CLUSTER") or os.environ.get("PYSPARK_GATEWAY_PORT")
    )


def is_s3(uri: str) -> bool:
    return uri.startswith(("s3://", "s3a://"))


def _client() -> Any:
    import boto3

    return boto3.client("s3", endpoint_url=os.environ.get("AWS_ENDPOINT_URL") or None)
