"""Test harness around a real Kafka: a single-node KRaft broker, an Admin-API driver that plays scripted ACL
histories, Kafka's own DumpLogSegments, and the generator of the sample dumps in `data/`.

Nothing here is imported by `replay.kafka` or `replay.spark`; it needs Java 17 and the Kafka jars that
`replay.maven.kafka_jars()` caches.
"""
