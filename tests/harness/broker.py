"""A real single-node Kafka 4.3.1 in KRaft combined mode (broker + controller in one JVM) on 127.0.0.1.

Used by the integration tests (`tests/kafka_it`) and by `python -m tests.harness.make_samples`.

What it runs, exactly (see `BrokerConfig.properties()` for the full file):

* `kafka.tools.StorageTool format --cluster-id <random> --config server.properties --standalone`, which writes
  `meta.properties`, `bootstrap.checkpoint` and, for the dynamic (KIP-853) quorum, the bootstrap snapshot
  `__cluster_metadata-0/00000000000000000000-0000000000.checkpoint`;
* `kafka.Kafka server.properties` with `process.roles=broker,controller`, node id 1, a PLAINTEXT listener
  and a CONTROLLER listener on free ports of 127.0.0.1, and
  `authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer`.

Principals: both listeners are PLAINTEXT, so every client, and the broker talking to its own controller, is
`User:ANONYMOUS`. The simplest correct setup is therefore `super.users=User:ANONYMOUS;User:admin` (`User:admin`
is listed so the configuration reads as the usual one; nothing authenticates as it). SASL/PLAIN would only add a
JAAS file and change nothing in the metadata log. Super users bypass the ACLs, so the scripted histories may still
create ACLs for `User:ANONYMOUS`.

Snapshots and segments are made small so that a short history gives several of each:
`metadata.log.max.record.bytes.between.snapshots` (default here 16 KiB; Kafka's 20 MiB),
`metadata.log.max.snapshot.interval.ms` (Kafka's 1 h unless set; the tests and samples use
`SHORT_SNAPSHOT_INTERVAL_MS`) and the *internal, testing-only*
`internal.metadata.log.segment.bytes` (default here 64 KiB): the public `metadata.log.segment.bytes` refuses
anything below 8 MiB in 4.3.1, the internal one has no lower bound and wins when set.

Command line (`D` is a working directory; everything the broker writes stays under it)::

    python -m tests.harness.broker start --dir D [--snapshot-bytes N] [--segment-bytes N] [--heap 512m]
        formats D on first use, starts the broker in the background, prints bootstrap address, metadata dir,
        pid and the start time, and writes D/broker.json
    python -m tests.harness.broker stop --dir D
        SIGTERM to the recorded pid, waits up to 30 s, then SIGKILL
    python -m tests.harness.broker run-history --dir D --profile small --seed 7 [--out D/checkpoints.jsonl]
        formats, starts, plays a generated ACL history with the Admin API driver, stops; prints a summary

Layout of D: `config/server.properties`, `meta/` (metadata.log.dir: meta.properties, bootstrap.checkpoint,
`__cluster_metadata-0/`), `data/` (log.dirs), `logs/server.log`, `logs/stdout.log`, `broker.json`.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import json
import os
import random
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from types import TracebackType

from replay.maven import KAFKA_VERSION
from tests.harness.driver import run_history
from tests.harness.histories import generate, write_ops
from tests.harness.jvm import UTF8_FLAGS, broker_classpath, java, tool_command

STANDARD_AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
STORAGE_TOOL = "kafka.tools.StorageTool"  # what bin/kafka-storage.sh runs
SERVER_MAIN = "kafka.Kafka"  # what bin/kafka-server-start.sh runs
READY_LINE = "Kafka Server started"  # KafkaRaftServer logs it once broker and controller are up
LOG4J_BROKER = Path(__file__).parent / "log4j2-kafka.xml"
LOG4J_AUTHORIZER = Path(__file__).parent / "log4j2-kafka-authorizer.xml"  # also the authorizer's decisions
NODE_ID = 1


class BrokerError(RuntimeError):
    pass


class PortInUse(BrokerError):
    """The broker could not bind a listener: another process took the port between `free_port()` and the bind."""


# Kafka's SnapshotGenerator checks both limits each time it is handed committed records (at least every 500 ms:
# NoOpRecords), and logs "Creating new KRaft snapshot file ... because we have waited at least 0 minute(s)" for a
# time-triggered snapshot. One second is shorter than the time a history needs to write 8 KiB of records while the
# driver's JVM warms up, so time-triggered snapshots land inside the history, not only while the broker idles.
SHORT_SNAPSHOT_INTERVAL_MS = 1000

# A free port can be taken by someone else before the JVM binds it; a fresh broker then retries with new ports.
PORT_ATTEMPTS = 3
BIND_FAILURE = "Address already in use"  # java.net.BindException's message, in Kafka's fatal startup error


def random_cluster_id(seed: int | None = None) -> str:
    """A Kafka `Uuid` in its text form (base64url, no padding), avoiding the reserved ids and a leading '-'."""
    source = random.Random(seed) if seed is not None else None
    while True:
        raw = source.randbytes(16) if source is not None else secrets.token_bytes(16)
        if int.from_bytes(raw, "big") in (0, 1):
            continue
        text = base64.urlsafe_b64encode(raw).decode().rstrip("=")
        if not text.startswith("-"):
            return text


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class BrokerConfig:
    """The knobs that shape the metadata log. `None` keeps Kafka's default."""

    snapshot_bytes: int | None = 16 * 1024  # metadata.log.max.record.bytes.between.snapshots
    snapshot_interval_ms: int | None = None  # metadata.log.max.snapshot.interval.ms (Kafka: 1 h)
    segment_bytes: int | None = 64 * 1024  # internal.metadata.log.segment.bytes (testing-only; no minimum)
    idle_interval_ms: int | None = None  # metadata.max.idle.interval.ms: NoOpRecord cadence (Kafka: 500 ms)
    retention_bytes: int | None = None  # metadata.max.retention.bytes (Kafka: 100 MiB)
    retention_ms: int | None = None  # metadata.max.retention.ms (Kafka: 7 days)
    append_linger_ms: int | None = None  # controller.quorum.append.linger.ms (Kafka: 25 ms)
    quorum: str = "dynamic"  # "dynamic": KIP-853 --standalone; "static": controller.quorum.voters
    heap: str = "512m"
    # a SASL_PLAINTEXT listener (mechanism PLAIN) with these users and passwords, besides the PLAINTEXT one
    sasl_users: dict[str, str] = field(default_factory=dict)
    authorizer_log: bool = False  # kafka.authorizer.logger at DEBUG into logs/kafka-authorizer.log
    time_zone: str | None = None  # the JVM's user.timezone (the zone of the logs' dates)
    extra: dict[str, str] = field(default_factory=dict)

    def properties(self, work: Path, broker_port: int, controller_port: int, sasl_port: int = 0) -> dict[str, str]:
        p: dict[str, str] = {
            "process.roles": "broker,controller",
            "node.id": str(NODE_ID),
            "listeners": f"PLAINTEXT://127.0.0.1:{broker_port},CONTROLLER://127.0.0.1:{controller_port}",
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{broker_port},CONTROLLER://127.0.0.1:{controller_port}",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "early.start.listeners": "CONTROLLER",
            "log.dirs": str(work / "data"),
            "metadata.log.dir": str(work / "meta"),
            "authorizer.class.name": STANDARD_AUTHORIZER,
            "super.users": "User:ANONYMOUS;User:admin",
            "allow.everyone.if.no.acl.found": "false",
            "auto.create.topics.enable": "false",
            "num.partitions": "1",
            "offsets.topic.replication.factor": "1",
            "transaction.state.log.replication.factor": "1",
            "transaction.state.log.min.isr": "1",
            "share.coordinator.state.topic.replication.factor": "1",
            "share.coordinator.state.topic.min.isr": "1",
            "group.initial.rebalance.delay.ms": "0",
            "num.network.threads": "2",
            "num.io.threads": "2",
            "background.threads": "2",
            "num.recovery.threads.per.data.dir": "1",
        }
        if self.sasl_users:
            for key in ("listeners", "advertised.listeners"):
                p[key] += f",SASL_PLAINTEXT://127.0.0.1:{sasl_port}"
            p["listener.security.protocol.map"] += ",SASL_PLAINTEXT:SASL_PLAINTEXT"
            p["sasl.enabled.mechanisms"] = "PLAIN"
            users = " ".join(f'user_{u}="{pw}"' for u, pw in sorted(self.sasl_users.items()))
            p["listener.name.sasl_plaintext.plain.sasl.jaas.config"] = \
                f"org.apache.kafka.common.security.plain.PlainLoginModule required {users};"
        if self.quorum == "dynamic":
            p["controller.quorum.bootstrap.servers"] = f"127.0.0.1:{controller_port}"
        elif self.quorum == "static":
            p["controller.quorum.voters"] = f"{NODE_ID}@127.0.0.1:{controller_port}"
        else:
            raise ValueError(f"quorum must be 'dynamic' or 'static', not {self.quorum!r}")
        optional = {
            "metadata.log.max.record.bytes.between.snapshots": self.snapshot_bytes,
            "metadata.log.max.snapshot.interval.ms": self.snapshot_interval_ms,
            "internal.metadata.log.segment.bytes": self.segment_bytes,
            "metadata.max.idle.interval.ms": self.idle_interval_ms,
            "metadata.max.retention.bytes": self.retention_bytes,
            "metadata.max.retention.ms": self.retention_ms,
            "controller.quorum.append.linger.ms": self.append_linger_ms,
        }
        p.update({k: str(v) for k, v in optional.items() if v is not None})
        p.update(self.extra)
        return p


def _write_properties(path: Path, props: dict[str, str]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = [f"# written by tests.harness.broker for Kafka {KAFKA_VERSION}"]
    lines += [f"{k}={v}" for k, v in props.items()]
    path.write_text("\n".join(lines) + "\n")


def _is_our_java(pid: int, config: Path) -> bool:
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    return SERVER_MAIN.encode() in cmdline and str(config).encode() in cmdline


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # a zombie child still answers kill(0)
    with contextlib.suppress(OSError):
        if Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1].startswith("Z"):
            return False
    return True


def stop_pid(pid: int, timeout: float = 30.0, proc: subprocess.Popen[bytes] | None = None) -> str:
    """SIGTERM, wait up to `timeout` s, then SIGKILL. Returns how it ended ('term', 'kill', 'gone')."""
    if not _alive(pid):
        return "gone"
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            return "term"
        if proc is None and not _alive(pid):
            return "term"
        time.sleep(0.1)
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)
    if proc is not None:
        proc.wait(10)
    return "kill"


class KafkaBroker:
    """Format (on first use), start, and stop one combined broker+controller. A context manager.

    >>> with KafkaBroker(Path("/tmp/k1")) as broker:
    ...     broker.bootstrap        # '127.0.0.1:40123'
    ...     broker.metadata_dir     # /tmp/k1/meta/__cluster_metadata-0
    ...     broker.start_seconds    # how long start() took until ready
    """

    def __init__(self, work: Path | str, config: BrokerConfig | None = None, cluster_id: str | None = None,
                 ready_timeout: float = 180.0) -> None:
        self.work = Path(work).resolve()
        self.config = config or BrokerConfig()
        self.ready_timeout = ready_timeout
        self.config_path = self.work / "config" / "server.properties"
        self.log_dir = self.work / "logs"
        self.state_path = self.work / "broker.json"
        self._cluster_id = cluster_id
        self.broker_port = 0
        self.controller_port = 0
        self.sasl_port = 0
        self.proc: subprocess.Popen[bytes] | None = None
        self.pid: int | None = None
        self.start_seconds: float | None = None
        self.format_seconds: float | None = None
        self.port_retries = 0  # fresh storage re-formatted on new ports because a port was taken (see start)

    # ---- paths ---------------------------------------------------------------------------------------------
    @property
    def metadata_log_dir(self) -> Path:
        """`metadata.log.dir`: holds meta.properties, bootstrap.checkpoint and `__cluster_metadata-0/`."""
        return self.work / "meta"

    @property
    def metadata_dir(self) -> Path:
        """The `__cluster_metadata-0` partition directory (segments and snapshots)."""
        return self.metadata_log_dir / "__cluster_metadata-0"

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.broker_port}"

    @property
    def sasl_bootstrap(self) -> str:
        """The SASL_PLAINTEXT listener (`BrokerConfig.sasl_users`)."""
        return f"127.0.0.1:{self.sasl_port}"

    @property
    def authorizer_log(self) -> Path:
        """Where `BrokerConfig.authorizer_log` makes the broker write its authorizer's decisions."""
        return self.log_dir / "kafka-authorizer.log"

    @property
    def controller(self) -> str:
        return f"127.0.0.1:{self.controller_port}"

    @property
    def cluster_id(self) -> str:
        if self._cluster_id is None:
            meta = self.metadata_log_dir / "meta.properties"
            if meta.exists():
                for line in meta.read_text().splitlines():
                    if line.startswith("cluster.id="):
                        self._cluster_id = line.split("=", 1)[1].strip()
            if self._cluster_id is None:
                self._cluster_id = random_cluster_id()
        return self._cluster_id

    @property
    def formatted(self) -> bool:
        return (self.metadata_log_dir / "meta.properties").exists()

    # ---- lifecycle -----------------------------------------------------------------------------------------
    def _write_config(self) -> None:
        if not self.broker_port and self.config_path.exists():
            # a restart keeps its ports: the dynamic quorum's voter set records the controller endpoint
            for line in self.config_path.read_text().splitlines():
                if line.startswith("listeners="):
                    for listener in line.split("=", 1)[1].split(","):
                        port = int(listener.rsplit(":", 1)[1])
                        if listener.startswith("PLAINTEXT://"):
                            self.broker_port = port
                        elif listener.startswith("CONTROLLER://"):
                            self.controller_port = port
                        elif listener.startswith("SASL_PLAINTEXT://"):
                            self.sasl_port = port
        if not self.broker_port:
            self.broker_port = free_port()
        if not self.controller_port:
            self.controller_port = free_port()
            while self.controller_port == self.broker_port:
                self.controller_port = free_port()
        if self.config.sasl_users and not self.sasl_port:
            self.sasl_port = free_port()
            while self.sasl_port in (self.broker_port, self.controller_port):
                self.sasl_port = free_port()
        _write_properties(self.config_path, self.config.properties(self.work, self.broker_port, self.controller_port,
                                                                   self.sasl_port))

    def format(self) -> None:
        """`kafka-storage format`: meta.properties, bootstrap.checkpoint (and the KIP-853 bootstrap snapshot)."""
        self.work.mkdir(parents=True, exist_ok=True)
        self._write_config()
        args = ["format", "--cluster-id", self.cluster_id, "--config", str(self.config_path)]
        if self.config.quorum == "dynamic":
            args.append("--standalone")
        t0 = time.monotonic()
        proc = subprocess.run(tool_command(STORAGE_TOOL, *args), capture_output=True, text=True)
        self.format_seconds = time.monotonic() - t0
        if proc.returncode != 0:
            raise BrokerError(f"kafka-storage format failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")

    def start(self, die_with_parent: bool = True) -> KafkaBroker:
        """Format on first use, launch, wait until ready. `die_with_parent`: Linux sends the JVM SIGTERM if this
        Python process dies without stopping it (so a killed test run leaves no broker behind).

        A fresh broker whose listener port was taken before the JVM bound it (`free_port()` can only pick a port
        that is free *now*) is formatted again on new ports, up to `PORT_ATTEMPTS` times in all: the dynamic
        quorum's bootstrap snapshot records the controller endpoint, so new ports need new storage. A restart
        keeps its storage and therefore its ports, and fails with `PortInUse` instead."""
        if self.proc is not None:
            raise BrokerError("already started")
        fresh = not self.formatted
        self.port_retries = 0
        while True:
            if not self.formatted:
                self.format()
            else:
                self._write_config()  # a restart: same ports, the storage is kept
            try:
                return self._launch(die_with_parent)
            except PortInUse:
                if not fresh or self.port_retries + 1 >= PORT_ATTEMPTS:
                    raise
                self.port_retries += 1
                self._discard_fresh_storage()

    def _discard_fresh_storage(self) -> None:
        """Forget the ports and the storage formatted for them (nothing was written to it but the format)."""
        self.broker_port = self.controller_port = self.sasl_port = 0
        self.config_path.unlink(missing_ok=True)
        shutil.rmtree(self.metadata_log_dir, ignore_errors=True)
        shutil.rmtree(self.work / "data", ignore_errors=True)

    def _launch(self, die_with_parent: bool) -> KafkaBroker:
        self.log_dir.mkdir(parents=True, exist_ok=True)
        server_log = self.log_dir / "server.log"
        stdout_log = self.log_dir / "stdout.log"
        offsets = {p: p.stat().st_size if p.exists() else 0 for p in (server_log, stdout_log)}
        cmd = [
            java(), f"-Xmx{self.config.heap}", "-Xms64m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
            "-Djava.awt.headless=true", *UTF8_FLAGS, f"-Dkafka.logs.dir={self.log_dir}",
            f"-Dlog4j2.configurationFile={LOG4J_AUTHORIZER if self.config.authorizer_log else LOG4J_BROKER}",
            *([f"-Duser.timezone={self.config.time_zone}"] if self.config.time_zone else []),
            "-cp", broker_classpath(), SERVER_MAIN, str(self.config_path),
        ]
        t0 = time.monotonic()
        with open(stdout_log, "ab") as out:
            self.proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                         cwd=self.work, start_new_session=True,
                                         preexec_fn=_die_with_parent if die_with_parent else None)
        self.pid = self.proc.pid
        try:
            self._wait_ready(server_log, offsets)
        except BaseException:
            self.stop()
            raise
        self.start_seconds = time.monotonic() - t0
        self._save_state()
        return self

    def _wait_ready(self, server_log: Path, offsets: dict[Path, int]) -> None:
        """Until Kafka logged READY_LINE and both ports accept connections; `PortInUse` as soon as a bind failed."""
        deadline = time.monotonic() + self.ready_timeout
        while time.monotonic() < deadline:
            assert self.proc is not None
            exited = self.proc.poll() is not None
            new_text = b"".join(_read_from(p, at) for p, at in offsets.items())
            if BIND_FAILURE.encode() in new_text:
                raise PortInUse(f"broker port {self.broker_port} or controller port {self.controller_port} is taken:\n"
                                f"{self.log_tail()}")
            if exited:
                assert self.proc is not None
                raise BrokerError(f"broker exited with {self.proc.returncode} before it was ready:\n{self.log_tail()}")
            if (READY_LINE.encode() in _read_from(server_log, offsets[server_log])
                    and _port_open(self.broker_port) and _port_open(self.controller_port)):
                return
            time.sleep(0.2)
        raise BrokerError(f"broker not ready after {self.ready_timeout:.0f} s:\n{self.log_tail()}")

    def log_tail(self, lines: int = 30) -> str:
        parts = []
        for name in ("stdout.log", "server.log"):
            p = self.log_dir / name
            if p.exists():
                parts.append(f"--- {p}\n" + "\n".join(p.read_text(errors="replace").splitlines()[-lines:]))
        return "\n".join(parts)

    def stop(self, timeout: float = 30.0) -> str:
        """SIGTERM (Kafka's clean shutdown), up to `timeout` s, then SIGKILL. Idempotent."""
        how = "gone"
        if self.proc is not None:
            how = stop_pid(self.proc.pid, timeout, self.proc)
            self.proc = None
        elif self.pid is not None and _is_our_java(self.pid, self.config_path):
            how = stop_pid(self.pid, timeout)
        self.pid = None
        with contextlib.suppress(FileNotFoundError):
            self.state_path.unlink()
        return how

    def _save_state(self) -> None:
        state = {
            "pid": self.pid,
            "bootstrap": self.bootstrap,
            "controller": self.controller,
            "cluster_id": self.cluster_id,
            "metadata_dir": str(self.metadata_dir),
            "config": str(self.config_path),
            "start_seconds": self.start_seconds,
            "kafka_version": KAFKA_VERSION,
            "broker_config": asdict(self.config),
        }
        self.state_path.write_text(json.dumps(state, indent=1) + "\n")

    @classmethod
    def attach(cls, work: Path | str) -> KafkaBroker:
        """A handle on a broker started by another process (`start` on the command line), from broker.json."""
        broker = cls(work)
        state = json.loads(broker.state_path.read_text())
        broker.pid = int(state["pid"])
        broker.broker_port = int(state["bootstrap"].rsplit(":", 1)[1])
        broker.controller_port = int(state["controller"].rsplit(":", 1)[1])
        broker.start_seconds = state.get("start_seconds")
        return broker

    def __enter__(self) -> KafkaBroker:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()


def _die_with_parent() -> None:  # runs in the child between fork and exec
    with contextlib.suppress(Exception):
        import ctypes

        ctypes.CDLL(None).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


def _read_from(path: Path, offset: int) -> bytes:
    try:
        with open(path, "rb") as f:
            f.seek(offset)
            return f.read()
    except FileNotFoundError:
        return b""


def _port_open(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.settimeout(0.5)
        return s.connect_ex(("127.0.0.1", port)) == 0


def _config_from_args(args: argparse.Namespace) -> BrokerConfig:
    return BrokerConfig(
        snapshot_bytes=args.snapshot_bytes,
        snapshot_interval_ms=args.snapshot_interval_ms,
        segment_bytes=args.segment_bytes,
        idle_interval_ms=args.idle_interval_ms,
        retention_bytes=args.retention_bytes,
        quorum=args.quorum,
        heap=args.heap,
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.harness.broker", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="cmd", required=True)
    for name in ("start", "stop", "run-history"):
        p = sub.add_parser(name)
        p.add_argument("--dir", required=True, type=Path)
        if name == "stop":
            continue
        d = BrokerConfig()
        p.add_argument("--snapshot-bytes", type=int, default=d.snapshot_bytes)
        p.add_argument("--snapshot-interval-ms", type=int, default=d.snapshot_interval_ms)
        p.add_argument("--segment-bytes", type=int, default=d.segment_bytes)
        p.add_argument("--idle-interval-ms", type=int, default=d.idle_interval_ms)
        p.add_argument("--retention-bytes", type=int, default=d.retention_bytes)
        p.add_argument("--quorum", choices=("dynamic", "static"), default=d.quorum)
        p.add_argument("--heap", default=d.heap)
        if name == "run-history":
            p.add_argument("--profile", default="small")
            p.add_argument("--seed", type=int, default=1)
            p.add_argument("--out", type=Path)
    args = parser.parse_args(argv)

    if args.cmd == "stop":
        broker = KafkaBroker.attach(args.dir)
        print(f"stopped pid {broker.pid}: {broker.stop()}")
        return 0
    if args.cmd == "start":
        broker = KafkaBroker(args.dir, _config_from_args(args)).start(die_with_parent=False)
        broker.proc = None  # leave it running after we exit; `stop` finds it through broker.json
        print(f"bootstrap    {broker.bootstrap}\nmetadata_dir {broker.metadata_dir}\npid          {broker.pid}\n"
              f"started in   {broker.start_seconds:.1f} s")
        return 0
    ops_path = args.dir / "history.jsonl"
    out = args.out or args.dir / "checkpoints.jsonl"
    args.dir.mkdir(parents=True, exist_ok=True)
    write_ops(generate(args.profile, args.seed), ops_path)
    with KafkaBroker(args.dir, _config_from_args(args)) as broker:
        print(f"broker ready in {broker.start_seconds:.1f} s at {broker.bootstrap}", file=sys.stderr)
        summary = run_history(broker.bootstrap, ops_path, out)
    print(json.dumps(summary, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
