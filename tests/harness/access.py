"""Requests as several users across ACL changes, against a broker with a SASL/PLAIN listener and its authorizer log
at DEBUG: the script of `tests/kafka_it/test_broker_authorizer_log.py` and of the sample `data/authorizer-log/`
(`python -m tests.harness.access data/authorizer-log` makes it again; a rerun differs in ids, times and offsets).

Three phases of the same requests: before any ACL, after grants, after a DENY and a revoked grant, so that the same
request is denied, allowed, and denied again. Each ACL change is separated from the requests by more than the
verification's default clock skew (2 s).
"""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
from pathlib import Path
from typing import Any

from tests.harness.broker import BrokerConfig, KafkaBroker
from tests.harness.driver import run_access

USERS = {"alice": "alice-pw", "bob": "bob-pw", "carol": "carol-pw"}
SUPER_USERS = "User:ANONYMOUS;User:admin"  # the harness broker's (BrokerConfig.properties)
ZONE = "Europe/Berlin"  # the broker JVM's zone: the log's dates carry none
PAUSE = {"op": "sleep", "ms": 3000}


def acl(principal: str, rtype: str, name: str, operation: str, permission: str = "ALLOW", pattern: str = "LITERAL",
        host: str = "*") -> dict[str, str]:
    return {"resource_type": rtype, "resource_name": name, "pattern_type": pattern, "principal": principal,
            "host": host, "operation": operation, "permission_type": permission}


def as_user(user: str, op: str, topic: str, **more: str) -> dict[str, Any]:
    return {"op": op, "user": user, "password": USERS[user], "topic": topic, **more}


PHASE = [as_user("alice", "describe", "orders"), as_user("alice", "produce", "orders"),
         as_user("bob", "consume", "payments", group="g1"), as_user("carol", "describe", "payments"),
         as_user("carol", "produce", "payments")]
GRANTS = [acl("User:alice", "TOPIC", "orders", "WRITE"), acl("User:alice", "TOPIC", "orders", "DESCRIBE"),
          acl("User:bob", "TOPIC", "pay", "READ", pattern="PREFIXED"), acl("User:bob", "GROUP", "g1", "READ"),
          acl("User:carol", "TOPIC", "*", "DESCRIBE"), acl("User:carol", "GROUP", "reports", "READ")]  # never used
SCRIPT = [{"op": "topics", "names": ["orders", "payments"]}, PAUSE, *PHASE, PAUSE,
          {"op": "create_acls", "acls": GRANTS}, PAUSE, *PHASE, PAUSE,
          {"op": "create_acls", "acls": [acl("User:alice", "TOPIC", "orders", "DESCRIBE", "DENY", host="127.0.0.1")]},
          {"op": "delete_acls", "acls": [acl("User:bob", "GROUP", "g1", "READ")]}, PAUSE, *PHASE]


def run(work: Path) -> tuple[Path, Path, list[dict[str, Any]]]:
    """The script against a fresh broker in `work`: its metadata log directory, its authorizer log, and the outcome
    of each request (the broker is stopped on return)."""
    config = BrokerConfig(sasl_users={"admin": "admin-pw", **USERS}, authorizer_log=True, time_zone=ZONE)
    with KafkaBroker(work / "broker", config) as broker:
        outcomes = run_access(broker.bootstrap, broker.sasl_bootstrap, SCRIPT, work / "outcomes.jsonl")
    return broker.metadata_dir, broker.authorizer_log, outcomes


def make_sample(out: Path) -> None:
    """`data/authorizer-log/`: the dump (`dump/__cluster_metadata-0/`, segments and snapshots), the authorizer log
    (`broker-logs/kafka-authorizer.log`), the script without passwords, each request's outcome, and the broker's
    settings a verification needs (`broker.json`)."""
    with tempfile.TemporaryDirectory(prefix="authorizer-sample-") as tmp:
        meta, log, outcomes = run(Path(tmp))
        shutil.rmtree(out / "dump", ignore_errors=True)
        part = out / "dump" / "__cluster_metadata-0"
        part.mkdir(parents=True)
        for f in sorted(meta.iterdir()):
            if f.suffix in (".log", ".checkpoint"):
                shutil.copy2(f, part / f.name)
        (out / "broker-logs").mkdir(exist_ok=True)
        shutil.copy2(log, out / "broker-logs" / "kafka-authorizer.log")
    (out / "script.jsonl").write_text("".join(json.dumps({k: v for k, v in s.items() if k != "password"}) + "\n"
                                              for s in SCRIPT))
    (out / "outcomes.jsonl").write_text("".join(json.dumps(o) + "\n" for o in outcomes))
    (out / "broker.json").write_text(json.dumps({"super_users": SUPER_USERS, "allow_everyone_if_no_acl_found": False,
                                                 "log_time_zone": ZONE}) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("out", type=Path, nargs="?", default=Path("data/authorizer-log"))
    make_sample(parser.parse_args().out)


if __name__ == "__main__":
    main()
