"""The driver program of `kraft-replay server`, run by spark-submit as the application's main file.

Spark's own `SparkConnectServer` turns artifact isolation on for every session, and with it each session gets a
class loader of its own. Spark caches generated code per class loader, so under it every command compiled again the
several hundred classes the one before had compiled, and started its own Python workers: about 5 s of the 22 s a
small ingest and replay took. This program starts the same Spark Connect service as a plugin of an ordinary local
application, so the sessions get the isolation the server's settings give them (`replay.spark.server.command`:
off). Each command still has a session of its own (its views, functions and settings); what they share is compiled
code and Python workers.

It imports only pyspark: spark-submit runs it as a file, not as part of the package.
"""

from __future__ import annotations

import signal
import threading

READY_LINE = "kraft-replay: the Spark Connect service is up"


def main() -> None:
    from pyspark.sql import SparkSession

    stopping = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stopping.set())
    spark = SparkSession.builder.getOrCreate()  # the settings come from spark-submit; the plugin starts the service
    print(READY_LINE, flush=True)
    stopping.wait()
    spark.stop()


if __name__ == "__main__":
    main()
