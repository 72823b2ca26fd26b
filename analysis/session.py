"""Building the Spark session: ``local[*]`` here, the cluster's own settings on EMR.

Only entry points call this; transforms take and return DataFrames.
"""

from __future__ import annotations

import os
from importlib.resources import as_file, files

from pyspark.sql import SparkSession

from analysis.storage import cluster_mode

#: Logging of the local JVM (package data: a file, or a member of a zip on sys.path).
LOG_CONFIG = files("analysis") / "log4j2.properties"
#: Driver heap for local mode (every JVM gets an explicit -Xmx).
DEFAULT_DRIVER_MEMORY = os.environ.get("BROKERBENCH_SPARK_MEMORY", "2g")


def spark_session(
    app: str = "brokerbench-analysis",
    cores: int | None = None,
    settings: dict[str, str] | None = None,
) -> SparkSession:
    """A session; ``settings`` adds Spark settings (e.g. ``analysis.storage.s3a_settings``)."""
    builder = SparkSession.builder.appName(app)
    for key, value in (settings or {}).items():
        builder = builder.config(key, value)
    # The local JVM reads its logging configuration from a file while it starts (a zip
    # member is copied out for that long).
    with as_file(LOG_CONFIG) as log_config:
        if not cluster_mode():
            os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
            builder = (
                builder.master(f"local[{cores or '*'}]")
                .config("spark.driver.memory", DEFAULT_DRIVER_MEMORY)
                .config("spark.driver.host", "127.0.0.1")
                .config("spark.driver.bindAddress", "127.0.0.1")
                .config("spark.ui.enabled", "false")
                .config("spark.sql.shuffle.partitions", str(max(2, (os.cpu_count() or 2))))
                .config("spark.sql.session.timeZone", "UTC")
                .config("spark.ui.showConsoleProgress", "false")
                .config(
                    "spark.driver.extraJavaOptions",
                    f"-Dlog4j2.configurationFile=file:{log_config}",
                )
            )
        session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    return session
