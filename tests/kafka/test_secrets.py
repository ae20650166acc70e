"""Issue 18 item 3: SCRAM credentials and password configs are redacted by default in everything we print (and, in
`tests/spark/test_secrets_in_the_lake.py`, store), by both decoders; `--show-secrets` / `show_secrets=True` keeps
them, with a warning. Held to Kafka's own dump-log output in `tests/kafka/test_dumplog.py`
(`test_secrets_are_the_only_difference_by_default`)."""

from __future__ import annotations

import base64
import io
from pathlib import Path

import pytest

from replay import cli
from replay.kafka import batch, dumplog, secrets, writer
from replay.kafka.model import Batch, Problem
from tests.kafka.test_native_decoder import assert_same

SALT, STORED, SERVER = b"pepper-salt-0123", b"stored-key-" + bytes(range(21)), b"server-key-" + bytes(range(40, 61))
PASSWORD = "hunter2-keystore"


def scram(salt: bytes = SALT) -> writer.RecordInput:
    return writer.metadata_record(11, 0, {"name": "alice", "mechanism": 1, "salt": salt, "storedKey": STORED,
                                          "serverKey": SERVER, "iterations": 8192})


def config(name: str, value: str) -> writer.RecordInput:
    return writer.metadata_record(4, 0, {"resourceType": 4, "resourceName": "1", "name": name, "value": value})


def segment(salt: bytes = SALT) -> bytes:
    return writer.encode_batch(0, [scram(salt), config("listener.name.internal.ssl.keystore.password", PASSWORD),
                                   config("min.insync.replicas", "2"), writer.noop()], 1, 5)


def _secret_texts() -> list[bytes]:
    raw = [SALT, STORED, SERVER, PASSWORD.encode()]
    return raw + [base64.b64encode(s) for s in raw[:3]]


def _records(items: list[Batch | Problem]) -> list[object]:
    return [r for b in items if isinstance(b, Batch) for r in b.records]


def test_both_decoders_redact_the_data_and_the_raw_value() -> None:
    items = assert_same(segment())
    assert not [i for i in items if isinstance(i, Problem)]
    cred, password, other, _ = _records(items)
    for name, secret in (("salt", SALT), ("storedKey", STORED), ("serverKey", SERVER)):
        value = cred.data[name]  # type: ignore[attr-defined]
        assert isinstance(value, secrets.RedactedBytes) and value.marker_text() == secrets.marker(secret)
    assert password.data["value"] == secrets.marker(PASSWORD)  # type: ignore[attr-defined]
    assert other.data["value"] == "2"  # type: ignore[attr-defined]
    for record in (cred, password):
        for secret in _secret_texts():
            assert secret not in record.value  # type: ignore[attr-defined]
    assert cred.data["name"] == "alice" and cred.data["iterations"] == 8192  # type: ignore[attr-defined]


def test_show_secrets_keeps_them() -> None:
    cred, password, _, _ = _records(assert_same(segment(), show_secrets=True))
    assert cred.data["salt"] == SALT and not isinstance(cred.data["salt"], secrets.RedactedBytes)  # type: ignore
    assert password.data["value"] == PASSWORD  # type: ignore[attr-defined]


def test_the_marker_tells_secrets_apart_and_keeps_identity() -> None:
    """Equal secrets, equal markers and raw values (an ingest stays idempotent); different secrets, different
    raw values (copies that differ stay apart)."""
    def value(salt: bytes) -> bytes:
        return _records(batch.read_bytes(segment(salt), "0.log"))[0].value  # type: ignore[attr-defined,no-any-return]

    assert value(SALT) == value(SALT)
    assert value(SALT) != value(b"other-salt-01234")
    assert secrets.marker(SALT) == secrets.marker(bytes(SALT)) != secrets.marker(b"other-salt-01234")
    assert secrets.MARKER_RE.fullmatch(secrets.marker(PASSWORD))


@pytest.mark.parametrize(("name", "secret"), [
    ("ssl.keystore.password", True), ("listener.name.internal.ssl.key.password", True),
    ("listener.name.sasl_ssl.scram-sha-256.sasl.jaas.config", True), ("sasl.jaas.config", True),
    ("ssl.keystore.key", True), ("sasl.oauthbearer.client.credentials.client.secret", True),
    ("my.plugin.password", True), ("delegation.token.secret.key", True),
    ("min.insync.replicas", False), ("retention.ms", False), ("ssl.keystore.location", False),
    ("sasl.enabled.mechanisms", False), ("ssl.keystore.type", False),
])
def test_which_configs_are_secret(name: str, secret: bool) -> None:
    assert secrets.is_secret_config(name) is secret


@pytest.mark.parametrize("fmt", ["summary", "jsonl", "dump-log"])
def test_inspect_prints_no_secret_unless_asked(tmp_path: Path, fmt: str, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "00000000000000000000.log"
    path.write_bytes(segment())
    out = io.StringIO()
    how = ["--output", fmt] if fmt == "jsonl" else ["--format", fmt]
    assert cli.main(["inspect", *how, str(path)], out) == 0
    text = out.getvalue() + capsys.readouterr().err
    for secret in _secret_texts():
        assert secret.decode("latin-1") not in text
    if fmt != "summary":
        assert secrets.marker(PASSWORD) in text and secrets.marker(SALT) in text
    shown = io.StringIO()
    assert cli.main(["inspect", *how, "--show-secrets", str(path)], shown) == 0
    err = capsys.readouterr().err
    assert err.startswith("warning: --show-secrets: SCRAM salts and keys and password configs are printed as the "
                          "log holds them")
    if fmt != "summary":
        assert PASSWORD in shown.getvalue() and base64.b64encode(SALT).decode() in shown.getvalue()


def test_dump_log_text_is_redacted_when_read_and_reads_back_redacted(tmp_path: Path) -> None:
    """Kafka's dump-log text holds the secrets: reading it redacts them; our redacted text reads back as it is."""
    path = tmp_path / "00000000000000000000.log"
    path.write_bytes(segment())
    kafka_text = list(dumplog.render_file(str(path), show_secrets=True))
    assert any(PASSWORD in line for line in kafka_text)
    read = list(dumplog.parse_text(kafka_text, "dump.txt"))
    assert not [i for i in read if isinstance(i, Problem)]
    cred, password, _, _ = _records(read)
    assert password.data["value"] == secrets.marker(PASSWORD)  # type: ignore[attr-defined]
    assert cred.data["salt"].marker_text() == secrets.marker(SALT)  # type: ignore[attr-defined]
    ours = list(dumplog.render_file(str(path)))
    again = list(dumplog.parse_text(ours, "dump.txt"))
    assert not [i for i in again if isinstance(i, Problem)]
    assert [r.data for r in _records(again)] == [r.data for r in _records(read)]  # type: ignore[attr-defined]
    kept = _records(list(dumplog.parse_text(kafka_text, "dump.txt", show_secrets=True)))
    assert kept[1].data["value"] == PASSWORD  # type: ignore[attr-defined]
