"""Issue 18 item 3, the lake's half: an ingest stores SCRAM credentials and password configs redacted
(`payload_json` and `raw_value` hold the marker), stays idempotent, still tells records with different secrets apart
by their content hash, and keeps the secrets only when asked (`show_secrets=True`, the CLI's `--show-secrets`)."""

from __future__ import annotations

import base64
from typing import Any

from spark_dumps import write_batches

from replay.kafka import secrets
from replay.spark.ingest import ingest
from replay.spark.tables import METADATA_RECORDS, Lake
from tests.kafka.test_secrets import PASSWORD, SALT, _secret_texts, segment


def _secret_rows(lake: Lake) -> list[Any]:
    return (lake.read(METADATA_RECORDS).where("api_key IN (4, 11)")
            .select("offset", "api_key", "payload_json", "raw_value", "content_hash").orderBy("offset").collect())


def test_the_lake_holds_markers_not_secrets(spark: Any, tmp_path: Any) -> None:
    dump = str(tmp_path / "dump")
    write_batches(dump, [segment()])
    lake = Lake(spark, str(tmp_path / "lake"))
    ingest(spark, [dump], "c1", lake, progress=False)
    rows = _secret_rows(lake)
    assert [(r.offset, r.api_key) for r in rows] == [(0, 11), (1, 4), (2, 4)]
    for r in rows:
        for secret in _secret_texts():
            assert secret.decode("latin-1") not in r.payload_json
            assert secret not in bytes(r.raw_value)
    assert secrets.marker(SALT) in rows[0].payload_json and secrets.marker(PASSWORD) in rows[1].payload_json
    assert '"value":"2"' in rows[2].payload_json  # a config that is no secret stays as it is

    before = lake.read(METADATA_RECORDS).count()
    ingest(spark, [dump], "c1", lake, progress=False)  # the same dump again: nothing new (the hash is stable)
    assert lake.read(METADATA_RECORDS).count() == before

    other = str(tmp_path / "other")  # the same offsets, another salt: another content hash
    write_batches(other, [segment(b"other-salt-01234")])
    other_lake = Lake(spark, str(tmp_path / "other-lake"))
    ingest(spark, [other], "c1", other_lake, progress=False)
    theirs = _secret_rows(other_lake)
    assert bytes(theirs[0].content_hash) != bytes(rows[0].content_hash)
    assert bytes(theirs[1].content_hash) == bytes(rows[1].content_hash)

    shown_lake = Lake(spark, str(tmp_path / "shown-lake"))
    ingest(spark, [dump], "c1", shown_lake, progress=False, show_secrets=True)
    shown = _secret_rows(shown_lake)
    assert base64.b64encode(SALT).decode() in shown[0].payload_json and PASSWORD in shown[1].payload_json
    assert SALT in bytes(shown[0].raw_value)
