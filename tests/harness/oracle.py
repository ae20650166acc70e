"""Kafka's real StandardAuthorizer as an oracle: compile `java/AuthorizerOracle.java` against the Kafka jars and
talk to it over a pipe (protocol in the Java file's comment).

    with AuthorizerOracle() as o:
        o.configure(super_users="User:admin", allow_everyone=None)
        o.add_acl("a1", binding)
        o.complete_initial_load()
        o.authorize("User:bob", "10.0.0.1", "READ", "TOPIC", "t")          # "ALLOWED" | "DENIED" | "ERROR:<cls>"
        o.ask_many([("Q", ...), ("T", ...)])                                 # streamed, one JVM round trip

Only this file and `java/AuthorizerOracle.java` belong to the authorizer differential test; the class directory
is `<cache>/authorizer-oracle/<hash>`, rebuilt only when the source (or the Kafka version) changes.
"""

from __future__ import annotations

import os
import subprocess
import tempfile
import threading
from collections.abc import Iterable, Sequence
from pathlib import Path
from types import TracebackType
from urllib.parse import quote

from replay.kafka.acl import AclBinding, AclOperation, AclPermissionType, PatternType, ResourceType
from replay.maven import kafka_jars
from tests.harness import jvm

SOURCE = Path(__file__).parent / "java" / "AuthorizerOracle.java"
MAIN_CLASS = "AuthorizerOracle"


class OracleError(RuntimeError):
    pass


def _tool(name: str) -> str:
    try:
        return jvm.tool(name)
    except jvm.JavaError as err:
        raise OracleError(str(err)) from err


def kafka_classpath() -> str:
    return os.pathsep.join(str(j) for j in kafka_jars())


def compiled_classes() -> Path:
    """Compile AuthorizerOracle.java once per source change; return its class directory."""
    try:
        return jvm.compile_java([SOURCE], kafka_jars(), "authorizer-oracle")
    except jvm.JavaError as err:
        raise OracleError(str(err)) from err


def _q(text: str) -> str:
    return quote(text, safe="")


def _code(enum: type, value: str | int) -> str:
    return str(int(enum.parse(value)))  # type: ignore[attr-defined]


def acl_command(acl_id: str, b: AclBinding) -> str:
    return "\t".join(["A", _q(acl_id), _code(ResourceType, b.resource_type), _q(b.resource_name),
                      _code(PatternType, b.pattern_type), _q(b.principal), _q(b.host),
                      _code(AclOperation, b.operation), _code(AclPermissionType, b.permission_type)])


def authorize_command(principal: str, host: str, operation: str | int, resource_type: str | int,
                      resource_name: str, pattern_type: str | int = "LITERAL") -> str:
    return "\t".join(["Q", _q(principal), _q(host), _code(AclOperation, operation),
                      _code(ResourceType, resource_type), _q(resource_name), _code(PatternType, pattern_type)])


def by_type_command(principal: str, host: str, operation: str | int, resource_type: str | int) -> str:
    return "\t".join(["T", _q(principal), _q(host), _code(AclOperation, operation),
                      _code(ResourceType, resource_type)])


class AuthorizerOracle:
    """One long-lived JVM running AuthorizerOracle; commands are streamed, answers read back in order."""

    def __init__(self, timeout_ms: int = 3000) -> None:
        classes = compiled_classes()
        cp = os.pathsep.join([str(classes), kafka_classpath()])
        self._stderr = tempfile.TemporaryFile()  # noqa: SIM115  (lives as long as the JVM)
        self._proc = subprocess.Popen(
            [_tool("java"), "-Xss4m", "-XX:+UseSerialGC", "-cp", cp, MAIN_CLASS, str(timeout_ms)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._stderr, text=True, encoding="utf-8",
            bufsize=1 << 16,
        )

    def __enter__(self) -> AuthorizerOracle:
        return self

    def __exit__(self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None) -> None:
        self.close()

    def close(self) -> None:
        if self._proc.poll() is None:
            try:
                assert self._proc.stdin is not None
                self._proc.stdin.write("X\n")
                self._proc.stdin.flush()
                self._proc.wait(timeout=10)
            except (OSError, subprocess.TimeoutExpired):
                self._proc.kill()
                self._proc.wait()
        self._stderr.close()

    def stderr_tail(self) -> str:
        self._stderr.seek(0)
        return self._stderr.read().decode("utf-8", "replace")[-4000:]

    def send(self, commands: Sequence[str]) -> list[str]:
        """Send commands (protocol lines without newline) and return the answers, in order. A writer thread
        feeds stdin while this thread reads, so any number of commands can be in flight."""
        stdin, stdout = self._proc.stdin, self._proc.stdout
        assert stdin is not None and stdout is not None
        failure: list[BaseException] = []

        def write() -> None:
            try:
                for start in range(0, len(commands), 4096):
                    stdin.write("".join(c + "\n" for c in commands[start:start + 4096]))
                stdin.flush()
            except BaseException as exc:
                failure.append(exc)

        writer = threading.Thread(target=write, daemon=True)
        writer.start()
        answers = []
        for _ in commands:
            line = stdout.readline()
            if not line:
                writer.join(1)
                raise OracleError(f"oracle JVM ended early (exit {self._proc.poll()}):\n{self.stderr_tail()}")
            answers.append(line.rstrip("\n"))
        writer.join()
        if failure:
            raise OracleError(f"writing to the oracle failed: {failure[0]!r}")
        return answers

    def one(self, command: str) -> str:
        return self.send([command])[0]

    # convenience wrappers -----------------------------------------------------------------------------

    def configure(self, super_users: str | None = None, allow_everyone: str | bool | None = None) -> str:
        su = "-" if super_users is None else _q(super_users)
        ae = "-" if allow_everyone is None else _q(str(allow_everyone).lower() if isinstance(allow_everyone, bool)
                                                   else allow_everyone)
        return self.one(f"C\t{su}\t{ae}")

    def add_acl(self, acl_id: str, binding: AclBinding) -> str:
        return self.one(acl_command(acl_id, binding))

    def remove_acl(self, acl_id: str) -> str:
        return self.one(f"R\t{_q(acl_id)}")

    def load_snapshot(self, acls: Iterable[tuple[str, AclBinding]]) -> str:
        answers = self.send(["B", *(acl_command(i, b) for i, b in acls), "E"])
        bad = [a for a in answers if a != "OK"]
        return bad[0] if bad else "OK"

    def complete_initial_load(self) -> str:
        return self.one("D")

    def acl_count(self) -> int:
        return int(self.one("N"))

    def host_address(self, host: str) -> str:
        return self.one(f"H\t{_q(host)}")

    def authorize(self, principal: str, host: str, operation: str | int, resource_type: str | int,
                  resource_name: str, pattern_type: str | int = "LITERAL") -> str:
        return self.one(authorize_command(principal, host, operation, resource_type, resource_name, pattern_type))

    def authorize_by_resource_type(self, principal: str, host: str, operation: str | int,
                                   resource_type: str | int) -> str:
        return self.one(by_type_command(principal, host, operation, resource_type))
