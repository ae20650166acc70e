"""Why the lake's tables stay partitioned by `cluster_id` rather than liquid-clustered (issue 15 item 5).

Builds two lakes of two synthetic clusters each, one with the tables as `Lake.ensure` makes them (PARTITIONED BY
cluster_id) and one with the same tables created CLUSTER BY (cluster_id), then runs full replays of the two
clusters at once (two threads, one session), `--rounds` times, and prints the errors.

    python -m bench.clustering_conflicts --rounds 3

Measured 2026-11-27 (Spark 4.2.0, Delta 4.4.0, 2 cores): partitioned 0 errors in 3 rounds; clustered, one of the
two replays failed in every round with `io.delta.exceptions.ConcurrentAppendException: [DELTA_CONCURRENT_APPEND
.WITHOUT_HINT] ... a concurrent WRITE added data to table ... replay_state` (open-source Delta checks a
`replaceWhere` on a non-partition column against every file another writer added).
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import threading
import time

from replay.kafka import synth
from replay.spark.ingest import ingest
from replay.spark.replay import replay_lake
from replay.spark.session import get_spark
from replay.spark.tables import SCHEMAS, TABLE_PROPERTIES, Lake, ddl_columns, sql_string


def race(spark: object, root: str, clustered: bool, rounds: int) -> list[str]:
    lake = Lake(spark, f"{root}/lake")  # type: ignore[arg-type]
    if clustered:
        props = ", ".join(f"{sql_string(k)} = {sql_string(v)}" for k, v in TABLE_PROPERTIES.items())
        for name, schema in SCHEMAS.items():
            lake.spark.sql(f"CREATE TABLE {lake.table_ref(name)} ({ddl_columns(schema)}) USING DELTA "
                           f"CLUSTER BY (cluster_id) TBLPROPERTIES ({props})")
    for cluster, seed in (("c1", 1), ("c2", 2)):
        synth.write_dump(synth.generate(seed, n_batches=40), f"{root}/{cluster}")
        ingest(lake.spark, [f"{root}/{cluster}"], cluster, lake, progress=False)
    replay_lake(lake, ["c1", "c2"], progress=False)
    errors: list[str] = []

    def replay(cluster: str) -> None:
        try:
            replay_lake(lake, [cluster], full=True, progress=False)
        except Exception as e:  # what we measure
            errors.append(next((line for line in str(e).splitlines() if "Exception" in line), type(e).__name__))

    for k in range(rounds):
        threads = [threading.Thread(target=replay, args=(c,)) for c in ("c1", "c2")]
        began = time.monotonic()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        print(f"{'clustered' if clustered else 'partitioned'}: round {k + 1}: {time.monotonic() - began:.1f} s, "
              f"{len(errors)} error(s) so far", flush=True)
    return errors


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    spark = get_spark(memory="2g")
    for clustered in (False, True):
        root = tempfile.mkdtemp(prefix="kraft-replay-clustering-")
        try:
            errors = race(spark, root, clustered, args.rounds)
        finally:
            shutil.rmtree(root, ignore_errors=True)
        print(f"{'clustered' if clustered else 'partitioned'}: {len(errors)} failed replay(s)")
        for e in errors:
            print("  " + e[:300])


if __name__ == "__main__":
    main()
