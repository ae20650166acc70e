"""Test harness around a real Kafka: a single-node KRaft broker, an Admin-API driver that plays scripted ACL
histories, Kafka's own DumpLogSegments, the authorizer oracle, a Spark standalone cluster, and the generator of the
sample dumps in `data/`.

It lives with the tests, outside the installed package: the wheel does not ship it. From `replay` it uses only
`replay.kafka` and `replay.maven` (the jars); it needs Java 17 and the Kafka jars that `replay.maven.kafka_jars()`
caches. Run its command-line tools from the repository root: `python -m tests.harness.make_samples`.
"""
