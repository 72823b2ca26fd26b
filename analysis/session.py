"""Building the Spark session: ``local[*]`` here, the cluster's own settings on EMR.

Only entry points call this; transforms take and return DataFrames.
"""

from __future__ import annotations

import os
from pathlib import Path

from pyspark.sql import SparkSession

from analysis.storage import cluster_mode

#: Driver heap for local mode (every JVM gets an explicit -Xmx).
LOG_CONFIG = Path(__file__).with_name("log4j2.properties")
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
                "spark.driver.extraJavaOptions", f"-Dlog4j2.configurationFile=file:{LOG_CONFIG}"
            )
        )
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    return session
