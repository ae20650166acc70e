"""Run our Java drivers (compiled on demand) against a broker: `java/AclHistoryDriver.java` plays a scripted ACL
history through Kafka's Admin API, writing `describeAcls(ANY)` and the metadata log offsets at each checkpoint;
`java/AccessDriver.java` makes requests as SASL users across ACL changes. See the Java files' headers for the input
and output formats.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

from replay.maven import logging_jars
from tests.harness.jvm import LOG4J_TOOLS, UTF8_FLAGS, compiled_classes, java, kafka_classpath

DRIVER_MAIN = "AclHistoryDriver"


class DriverError(RuntimeError):
    pass


def driver_command(bootstrap: str, ops: Path, out: Path, op_log: Path | None = None,
                   settle_timeout_ms: int = 60_000) -> list[str]:
    cp = os.pathsep.join([str(compiled_classes()), kafka_classpath(), *map(str, logging_jars())])
    cmd = [java(), "-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", *UTF8_FLAGS,
           f"-Dlog4j2.configurationFile={LOG4J_TOOLS}", "-cp", cp, DRIVER_MAIN,
           "--bootstrap", bootstrap, "--ops", str(ops), "--out", str(out),
           "--settle-timeout-ms", str(settle_timeout_ms)]
    if op_log is not None:
        cmd += ["--op-log", str(op_log)]
    return cmd


def run_history(bootstrap: str, ops: Path, out: Path, op_log: Path | None = None,
                timeout: float = 3600.0) -> dict[str, Any]:
    """Play `ops` (JSON lines) against `bootstrap`; checkpoints go to `out`. Returns the driver's summary."""
    out.parent.mkdir(parents=True, exist_ok=True)
    proc = subprocess.run(driver_command(bootstrap, ops, out, op_log), capture_output=True, text=True,
                          encoding="utf-8", errors="replace", timeout=timeout)
    if proc.returncode != 0:
        raise DriverError(f"AclHistoryDriver failed ({proc.returncode}):\n{proc.stderr[-4000:]}")
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    if not lines:
        raise DriverError(f"AclHistoryDriver printed no summary:\n{proc.stdout}\n{proc.stderr[-2000:]}")
    summary: dict[str, Any] = json.loads(lines[-1])
    return summary


ACCESS_MAIN = "AccessDriver"


def run_access(admin_bootstrap: str, sasl_bootstrap: str, script: list[dict[str, Any]], out: Path,
               timeout: float = 900.0) -> list[dict[str, Any]]:
    """Play `script` with `java/AccessDriver.java` (topics and ACL changes as the admin over PLAINTEXT, requests as
    SASL/PLAIN users); returns each request's outcome (`ok` or the exception that refused it)."""
    steps = out.with_suffix(".script.jsonl")
    steps.write_text("".join(json.dumps(s) + "\n" for s in script))
    cp = os.pathsep.join([str(compiled_classes()), kafka_classpath(), *map(str, logging_jars())])
    cmd = [java(), "-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", *UTF8_FLAGS,
           f"-Dlog4j2.configurationFile={LOG4J_TOOLS}", "-cp", cp, ACCESS_MAIN, "--admin", admin_bootstrap,
           "--sasl", sasl_bootstrap, "--script", str(steps), "--out", str(out)]
    proc = subprocess.run(cmd, capture_output=True, text=True, encoding="utf-8", errors="replace", timeout=timeout)
    if proc.returncode != 0:
        raise DriverError(f"AccessDriver failed ({proc.returncode}):\n{proc.stderr[-4000:]}")
    out.with_suffix(".stderr.txt").write_text(proc.stderr)  # why each refused request was refused
    return [json.loads(line) for line in out.read_text().splitlines() if line.strip()]
