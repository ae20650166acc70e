"""Imports point one way (issue 13 item 1): `replay.kafka` <- the lake core <- the rest of `replay.spark` <- the
applications. Every import in `replay/` counts, at module level or inside a function: a function-level import is
still a dependency, only a later one. The test fails on an import that points up a layer and on a cycle, naming
the edge (file and line); the wheel holds the package only, no harness and no tests.
"""

from __future__ import annotations

import ast
import functools
import subprocess
import sys
import zipfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "replay"
HARNESS = ROOT / "tests" / "harness"

# Lower layers never import higher ones; a name stands for that module and everything under it, the longest name
# wins. `replay` itself is the root package's `__init__` only (it holds no code).
LAYERS: dict[str, int] = {
    "replay": 0,
    "replay.kafka": 0,  # Kafka's formats and rules, pure Python
    "replay.maven": 0,  # fetching jars; imports nothing of ours
    "replay.progress": 0,  # progress bars; imports nothing of ours
    "replay.spark.tables": 1,  # the lake: every table's schema, SQL quoting
    "replay.spark.visibility": 1,  # which replays' rows readers see; imports nothing of ours
    "replay.spark.session": 1,  # a SparkSession with Delta
    "replay.spark.class_archive": 1,  # where the driver's class archive is, and the JVM options that map it
    "replay.spark.java_jar": 1,  # building our small jars for the local drivers
    "replay.spark.codegen_cache": 1,  # the generated-code cache: its agent's jar and options
    "replay.spark.local_fs": 1,  # the local file system without child processes: its jar and settings
    "replay.spark.frames": 1,  # DataFrame helpers
    "replay.spark": 2,  # ingest, replay, queries, authorize, audits, plots, the tour's questions
    "replay.cli": 3,
    "replay.demo": 3,
    "replay.notebook": 3,
}
LAYER_NAMES = {0: "replay.kafka and support", 1: "the lake core", 2: "replay.spark", 3: "the applications"}

# Known violations in modules being reworked on other branches. An import within a layer is allowed as long as it
# closes no cycle, so an entry names the edge that will go; an entry that is no longer needed (its edge is gone, or
# no longer points up or closes a cycle) fails the test, so this list only shrinks.
KNOWN_EDGES: dict[tuple[str, str], str] = {
    # empty: the replay <-> resume cycle ended when resume stopped importing replay (with_missing moved to
    # replay.spark.ordered, the record-type numbers to replay.kafka.model)
}

# What the harness may use from the package: the domain and the jars, nothing that needs Spark or the CLI.
HARNESS_MAY_IMPORT = ("replay.kafka", "replay.maven")


@dataclass(frozen=True)
class Edge:
    source: str
    target: str
    path: Path
    line: int
    in_function: bool

    def __str__(self) -> str:
        where = "inside a function" if self.in_function else "at module level"
        return f"{self.source} -> {self.target} ({self.path.relative_to(ROOT)}:{self.line}, {where})"


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _is_module(name: str) -> bool:
    base = ROOT.joinpath(*name.split("."))
    return base.with_suffix(".py").is_file() or (base / "__init__.py").is_file()


def _absolute(module: str | None, level: int, importer: str, is_package: bool) -> str:
    """The absolute name a `from ... import` reads from, relative imports resolved against the importer."""
    if not level:
        return module or ""
    base = importer.split(".") if is_package else importer.split(".")[:-1]
    base = base[: len(base) - (level - 1)]
    return ".".join(base + ([module] if module else []))


def _imports(tree: ast.AST, in_function: bool = False) -> Iterator[tuple[ast.Import | ast.ImportFrom, bool]]:
    """Every import node with whether it sits inside a function or class body (run later, or never)."""
    for child in ast.iter_child_nodes(tree):
        if isinstance(child, ast.Import | ast.ImportFrom):
            yield child, in_function
        nested = isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda | ast.ClassDef)
        yield from _imports(child, in_function or nested)


def imports_of(path: Path) -> list[Edge]:
    """Every module imported by the file: `import a.b` gives a.b, `from a import b` gives a.b when b is a module
    of ours, else a."""
    source = module_name(path)
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    edges = []
    for node, in_function in _imports(tree):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        else:
            base = _absolute(node.module, node.level, source, path.name == "__init__.py")
            targets = [f"{base}.{a.name}" if _is_module(f"{base}.{a.name}") else base for a in node.names]
        edges += [Edge(source, t, path, node.lineno, in_function) for t in dict.fromkeys(targets)]
    return edges


def ours(name: str) -> bool:
    return name == "replay" or name.startswith("replay.")


def layer_of(name: str) -> int:
    parts = name.split(".")
    for n in range(len(parts), 0, -1):
        prefix = ".".join(parts[:n])
        if prefix in LAYERS and (prefix != "replay" or name == "replay"):
            return LAYERS[prefix]
    raise KeyError(f"{name} is in no layer: add it to LAYERS in tests/test_imports.py")


@functools.cache
def _package_edges() -> tuple[Edge, ...]:
    return tuple(e for path in sorted(PACKAGE.rglob("*.py")) for e in imports_of(path))


def package_edges() -> list[Edge]:
    return list(_package_edges())


def upward(edges: list[Edge]) -> list[str]:
    return [f"{e} points up from {LAYER_NAMES[layer_of(e.source)]} to {LAYER_NAMES[layer_of(e.target)]}"
            for e in edges if ours(e.target) and layer_of(e.target) > layer_of(e.source)]


def cycles(edges: list[Edge], inside: Callable[[str], bool] = ours) -> list[list[Edge]]:
    """One cycle through each strongly connected group of modules (Tarjan), as the edges that close it; only
    edges to modules `inside` the graph count."""
    graph: dict[str, list[Edge]] = {}
    for e in edges:
        if inside(e.target) and e.target != e.source:
            graph.setdefault(e.source, []).append(e)
            graph.setdefault(e.target, [])
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[set[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for e in graph[v]:
            if e.target not in index:
                visit(e.target)
                low[v] = min(low[v], low[e.target])
            elif e.target in on_stack:
                low[v] = min(low[v], index[e.target])
        if low[v] == index[v]:
            group = set()
            while True:
                w = stack.pop()
                on_stack.discard(w)
                group.add(w)
                if w == v:
                    break
            if len(group) > 1:
                groups.append(group)

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return [_cycle_in(graph, group) for group in groups]


def _cycle_in(graph: dict[str, list[Edge]], group: set[str]) -> list[Edge]:
    """A shortest way from the group's first module back to itself, inside the group."""
    start = min(group)
    paths: dict[str, list[Edge]] = {start: []}
    frontier = [start]
    while frontier:
        nxt = []
        for v in frontier:
            for e in graph[v]:
                if e.target == start:
                    return [*paths[v], e]
                if e.target in group and e.target not in paths:
                    paths[e.target] = [*paths[v], e]
                    nxt.append(e.target)
        frontier = nxt
    raise AssertionError(f"no cycle in {group}")  # Tarjan's group always has one


def test_every_module_has_a_layer() -> None:
    missing = []
    for path in sorted(PACKAGE.rglob("*.py")):
        try:
            layer_of(module_name(path))
        except KeyError as err:
            missing.append(str(err))
    assert not missing, "\n".join(missing)


def test_no_import_points_up_a_layer() -> None:
    bad = upward([e for e in package_edges() if (e.source, e.target) not in KNOWN_EDGES])
    assert not bad, "imports that point up:\n" + "\n".join(bad)


def test_no_import_cycles() -> None:
    found = cycles([e for e in package_edges() if (e.source, e.target) not in KNOWN_EDGES])
    assert not found, "import cycles:\n" + "\n".join(" ; ".join(map(str, c)) for c in found)


def reaches(edges: list[Edge], start: str, goal: str) -> bool:
    """Whether imports lead from module `start` to module `goal`."""
    graph: dict[str, set[str]] = {}
    for e in edges:
        graph.setdefault(e.source, set()).add(e.target)
    seen, todo = {start}, [start]
    while todo:
        for nxt in graph.get(todo.pop(), ()):
            if nxt == goal:
                return True
            if nxt not in seen:
                seen.add(nxt)
                todo.append(nxt)
    return False


def still_needed(key: tuple[str, str], edges: list[Edge]) -> bool:
    """An allow-listed edge is needed while it exists and points up a layer or closes a cycle (with every other
    allow-listed edge left out, so that two entries cannot keep each other alive)."""
    source, target = key
    others = [e for e in edges if (e.source, e.target) not in KNOWN_EDGES]
    mine = [e for e in edges if (e.source, e.target) == key]
    return bool(mine) and (bool(upward(mine)) or reaches(others, target, source))


def test_known_violations_are_still_needed() -> None:
    """An allow-listed edge that is gone, or became a harmless import within its layer, leaves KNOWN_EDGES."""
    stale = sorted(key for key in KNOWN_EDGES if not still_needed(key, package_edges()))
    assert not stale, f"fixed, remove from KNOWN_EDGES in tests/test_imports.py: {stale}"


def test_replay_kafka_imports_only_itself_and_no_spark() -> None:
    """The domain layer runs in a plain Python shell and inside Spark executors."""
    bad = [str(e) for e in package_edges() if e.source.startswith("replay.kafka")
           and ((ours(e.target) and not e.target.startswith("replay.kafka"))
                or e.target.split(".")[0] in ("pyspark", "delta", "matplotlib"))]
    assert not bad, "\n".join(bad)


# What runs inside Spark tasks: the ingest's decoding (issue 13 item 3).
EXECUTOR_MODULES = ("replay.spark.ingest_decode", "replay.spark.ingest_rows", "replay.spark.ingest_summary_rows",
                    "replay.spark.ingest_tally")


def test_the_ingest_executor_side_needs_no_spark() -> None:
    """The executor-side decoding imports only pyarrow, the standard library, `replay.kafka` and itself (and fsspec,
    optional, for the URIs it opens): it runs, is tested and is measured without Spark."""
    allowed = ("pyarrow", "fsspec", *sys.stdlib_module_names)
    edges = [e for e in package_edges() if e.source in EXECUTOR_MODULES]
    assert {e.source for e in edges} == set(EXECUTOR_MODULES)
    bad = [str(e) for e in edges if not (e.target.startswith("replay.kafka") or e.target in EXECUTOR_MODULES
                                         or e.target.split(".")[0] in allowed)]
    assert not bad, "\n".join(bad)


def test_the_package_never_imports_tests_or_bench() -> None:
    bad = [str(e) for e in package_edges() if e.target.split(".")[0] in ("tests", "bench")]
    assert not bad, "\n".join(bad)


def test_the_harness_uses_only_replay_kafka_and_the_jars() -> None:
    edges = [e for path in sorted(HARNESS.rglob("*.py")) for e in imports_of(path)]
    assert edges, "tests/harness holds no Python files"
    bad = [str(e) for e in edges if ours(e.target) and not e.target.startswith(HARNESS_MAY_IMPORT)]
    assert not bad, "\n".join(bad)
    found = cycles(edges, inside=lambda name: name.startswith("tests.harness"))
    assert not found, "harness import cycles:\n" + "\n".join(" ; ".join(map(str, c)) for c in found)


# ---- the graph walker itself, on made-up modules ------------------------------------------------------------

def _edge(source: str, target: str, line: int = 1) -> Edge:
    return Edge(source, target, ROOT / "replay" / "x.py", line, False)


def test_walker_names_the_upward_edge_and_the_cycle() -> None:
    up = upward([_edge("replay.spark.queries", "replay.cli", 48), _edge("replay.cli", "replay.spark.queries")])
    assert len(up) == 1 and up[0].startswith("replay.spark.queries -> replay.cli (replay/x.py:48, at module level)")
    assert "from replay.spark to the applications" in up[0]
    (cycle,) = cycles([_edge("replay.cli", "replay.demo", 3), _edge("replay.demo", "replay.cli", 9),
                       _edge("replay.demo", "replay.kafka.times")])
    assert [(e.source, e.target, e.line) for e in cycle] == [("replay.cli", "replay.demo", 3),
                                                             ("replay.demo", "replay.cli", 9)]


def test_an_import_within_a_layer_is_allowed_unless_it_closes_a_cycle() -> None:
    """After the cycle is broken, replay importing resume at module level is a plain import within replay.spark."""
    one_way = [_edge("replay.spark.replay", "replay.spark.resume"), _edge("replay.spark.resume", "replay.spark.tables")]
    assert not upward(one_way) and not cycles(one_way)
    assert not reaches(one_way, "replay.spark.resume", "replay.spark.replay")
    both_ways = [*one_way, _edge("replay.spark.resume", "replay.spark.replay")]
    assert reaches(both_ways, "replay.spark.replay", "replay.spark.resume") and cycles(both_ways)


def test_walker_sees_function_level_and_relative_imports() -> None:
    tree = ast.parse("import os\nfrom .acl import AclBinding\n\ndef f():\n    from replay.cli import main\n"
                     "if True:\n    import json\nclass C:\n    def g(self):\n        import io\n")
    assert [(n.lineno, inner) for n, inner in _imports(tree)] == [(1, False), (2, False), (5, True), (7, False),
                                                                   (10, True)]
    assert _absolute("acl", 1, "replay.kafka.synth", False) == "replay.kafka.acl"
    assert _absolute(None, 1, "replay.kafka", True) == "replay.kafka"
    assert _absolute("tables", 2, "replay.spark.x.y", False) == "replay.spark.tables"
    edges = imports_of(PACKAGE / "kafka" / "synth.py")
    assert any(e.target == "replay.kafka.files" and e.in_function for e in edges)  # `from . import files`


# ---- the wheel -------------------------------------------------------------------------------------------------

@pytest.mark.slow
def test_the_wheel_holds_the_package_only(tmp_path: Path) -> None:
    """`pip wheel --no-deps .` on a copy of the source (the build writes build/ and *.egg-info next to it)."""
    import shutil

    source = tmp_path / "src"
    source.mkdir()
    ignore = shutil.ignore_patterns("__pycache__", "*.egg-info", "build", "out", ".*")
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(ROOT / name, source / name)
    for name in ("replay", "tests", "bench", "notebooks"):
        shutil.copytree(ROOT / name, source / name, ignore=ignore)
    proc = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", ".", "-w", str(tmp_path / "w")],
                          cwd=source, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (wheel,) = (tmp_path / "w").glob("kraft_acl_replay-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    top = {n.split("/", 1)[0] for n in names}
    assert top == {"replay", next(t for t in top if t.endswith(".dist-info"))}, top
    assert not [n for n in names if "harness" in n or "/tests/" in n or Path(n).name.startswith("test_")]
    assert "replay/kafka/times.py" in names and "replay/cli.py" in names and "replay/py.typed" in names
