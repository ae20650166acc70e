"""Everything that needs Spark: the session, the lake's tables, ingest, replay, queries (DESIGN.md §5).

Import the submodules (`replay.spark.session`, `.tables`, `.ingest`, ...); this package imports nothing itself, so
`import replay.spark` stays cheap and never starts a JVM.
"""
