"""Secrets that metadata records carry, kept out of what we print and store unless the user asks for them.

A KRaft log holds SCRAM credentials (`UserScramCredentialRecord`: the salt, the stored key and the server key, from
which a password can be attacked offline) and the values of password-type broker configs (`ConfigRecord`: keystore
passwords, JAAS configs with passwords in them, OAuth client secrets). Kafka's own `kafka-dump-log` prints them all.
We do not, by default: the readers (`batch.read_batches`, `dumplog.DumpTextReader`) replace each such value by a
marker, `(redacted 0123456789ab)`, whose digest tells equal values apart without revealing them (PBKDF2, slow on
purpose, so that guessing a weak password from it is slow too), and the record's raw value is re-encoded with the
marker in the secret's place. So every output (`inspect` in every format, the lake's `payload_json` and
`raw_value`) holds the marker, and a record's content hash, taken over the re-encoded value, still tells copies
with different secrets apart and stays the same on every ingest. `show_secrets=True` (the CLI's
`--show-secrets`) keeps the values as the log has them.

`DelegationTokenRecord` holds no secret: a token's HMAC is not in the log (the broker derives it from the token id
and its secret key), and the token id is a name, like a user's.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Iterator
from typing import TypeVar

from replay.kafka.message import MessageError, encode_metadata_value
from replay.kafka.model import Batch, Record

T = TypeVar("T")

CONFIG_API_KEY = 4
SCRAM_API_KEY = 11
# The api keys of the records that may hold a secret: the only ones `redact_items` looks into.
MAY_HOLD_SECRETS = frozenset({CONFIG_API_KEY, SCRAM_API_KEY})
SCRAM_SECRET_FIELDS = ("salt", "storedKey", "serverKey")

# The PASSWORD-type configs of Kafka 4.3.1's broker `ConfigDef` (topic configs have none). A config is secret when
# its name is one of these or ends with "." and one (the per-listener and per-mechanism forms), or when it ends in
# ".password" or names a secret (what a plugin's or a later version's password config looks like).
PASSWORD_CONFIGS = frozenset({
    "delegation.token.secret.key", "sasl.jaas.config", "sasl.oauthbearer.assertion.private.key.passphrase",
    "sasl.oauthbearer.client.credentials.client.secret", "ssl.key.password", "ssl.keystore.certificate.chain",
    "ssl.keystore.key", "ssl.keystore.password", "ssl.truststore.certificates", "ssl.truststore.password",
})

MARKER_RE = re.compile(r"\(redacted [0-9a-f]{12}\)")
_DIGEST_SALT = b"kraft-acl-replay redaction"
_DIGEST_ROUNDS = 10_000


_SECRET_CONFIG_RE = re.compile(
    r"(?:^|.*\.)(?:" + "|".join(re.escape(c) for c in sorted(PASSWORD_CONFIGS)) + r")$|.*\.password$|.*secret")


def is_secret_config(name: str) -> bool:
    """Whether a config of this name holds a secret (see `PASSWORD_CONFIGS`)."""
    return _SECRET_CONFIG_RE.match(name) is not None


def marker(secret: bytes | bytearray | str) -> str:
    """The text that stands in for a secret: the same for the same secret, and nothing to learn it from."""
    data = secret.encode("utf-8") if isinstance(secret, str) else bytes(secret)
    digest = hashlib.pbkdf2_hmac("sha256", data, _DIGEST_SALT, _DIGEST_ROUNDS, dklen=6)
    return f"(redacted {digest.hex()})"


class RedactedBytes(bytes):
    """A bytes field's secret replaced by its marker (the marker's ASCII bytes): Kafka's JSON prints it as the
    marker text, not as base64 (`kafkajson`), and reading that text back gives it again."""

    def marker_text(self) -> str:
        return self.decode("ascii")


def _secret_fields(record: Record) -> list[str]:
    data = record.data
    if data is None or record.is_control:
        return []
    if record.api_key == SCRAM_API_KEY:
        return [f for f in SCRAM_SECRET_FIELDS if isinstance(data.get(f), bytes | bytearray)
                and not isinstance(data.get(f), RedactedBytes)]
    if record.api_key == CONFIG_API_KEY:
        value, name = data.get("value"), data.get("name")
        if isinstance(value, str) and isinstance(name, str) and is_secret_config(name) \
                and not MARKER_RE.fullmatch(value):
            return ["value"]
    return []


def redact_record(record: Record) -> bool:
    """Replace the secrets of one decoded record, in its data and its raw value; whether it had any."""
    fields = _secret_fields(record)
    if not fields:
        return False
    data = dict(record.data or {})
    for name in fields:
        value = data[name]
        data[name] = RedactedBytes(marker(value).encode("ascii")) if isinstance(value, bytes | bytearray) \
            else marker(value)
    assert record.api_key is not None and record.version is not None
    try:
        record.value = encode_metadata_value(record.api_key, record.version, data, record.unknown_tags)
    except MessageError:  # a value that decoded must encode again; if not, keep none of its bytes rather than leak
        record.value = b""
    record.data = data
    return True


def redact_items(items: Iterable[T]) -> Iterator[T]:
    """The decoders' items with the secrets of every batch's records replaced (in place; problems pass as they
    are). One loop over all records, no call per batch: every record decoded goes through here."""
    may_hold = MAY_HOLD_SECRETS
    for item in items:
        if isinstance(item, Batch):
            for record in item.records:  # control records have no api key
                if record.api_key in may_hold:
                    redact_record(record)
        yield item
