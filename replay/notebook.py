"""Databricks notebooks that also run locally: fallbacks for `display`, `dbutils` and widgets, and a runner.

**Fallbacks.** A notebook cell calls `spark_session(globals())`, `display_function(globals())` and
`dbutils_handle(globals(), spark)`: on Databricks they hand back the runtime's own `spark`, `display` and `dbutils`;
anywhere else a local Spark session with Delta (`replay.spark.session.get_spark`), a `display` that prints tables as
text and saves figures as PNG files, and a `dbutils` whose widgets take their values from the runner's parameters,
then from environment variables (`KRAFT_REPLAY_<WIDGET NAME>`, e.g. `KRAFT_REPLAY_DUMP` for widget `dump`), then
from the widget's default. `widget(dbutils, name, default, label)` creates a text widget and returns its value in
both places.

**Runner.** `run_notebook(path)` executes a notebook in Databricks source format (`# Databricks notebook source`,
cells separated by `# COMMAND ----------`, magic cells written as `# MAGIC %...` lines) in one namespace, cell by
cell, like "Run all":

| cell | locally |
|---|---|
| Python (no magic), `%python` | executed with `exec` in the shared namespace (`spark`, `display`, `displayHTML`, `dbutils` predefined) |
| `%sql` | split into statements; each runs through `spark.sql`; the last result is displayed and kept in `_sqldf` (as Databricks does) |
| `%md`, `%md-sandbox` | not executed; the text is echoed when `echo=True` |
| `%pip` | skipped: the local environment already has the packages (`pip install -e '.[dev]'`) |
| `%sh`, `%fs`, `%run`, `%scala`, `%r`, other | `UnsupportedMagic`, or skipped with `skip_unsupported=True` |

The run stops at the first failing cell (raising `NotebookCellError` with the cell number and its first line) unless
`stop_on_error=False`; `dbutils.notebook.exit(value)` ends it early. From a shell:

    python -m replay.notebook notebooks/kraft_acl_replay.py -p dump=data/retention-gap -p moment=2026-11-21T10:00:00Z
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import re
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any, TextIO

from replay.kafka.listing import table_lines
from replay.kafka.times import parse_time
from replay.spark.session import get_spark, on_databricks
from replay.spark.tables import sql_literal as sql_literal  # the notebook writes its SQL variables with it

HEADER = "# Databricks notebook source"
SEPARATOR = "# COMMAND ----------"
ENV_PREFIX = "KRAFT_REPLAY_"
DISPLAY_DIR_ENV = "KRAFT_REPLAY_DISPLAY_DIR"


def env_name(widget_name: str) -> str:
    """The environment variable that gives a widget its value off Databricks: `KRAFT_REPLAY_<NAME>`."""
    return ENV_PREFIX + re.sub(r"[^A-Za-z0-9]+", "_", widget_name).strip("_").upper()


# ---- display ---------------------------------------------------------------------------------------------------

@dataclass
class Displayed:
    """One thing a local `display` showed: a table (columns and the rows shown), a figure (its PNG) or text."""

    kind: str  # table | figure | text
    columns: list[str] = field(default_factory=list)
    rows: list[dict[str, Any]] = field(default_factory=list)
    total_rows: int | None = None
    path: str | None = None
    text: str = ""


class LocalDisplay:
    """`display` off Databricks: Spark and pandas DataFrames print as text tables, figures are saved as PNG."""

    def __init__(self, out_dir: str | None = None, max_rows: int = 50, stream: TextIO | None = None) -> None:
        self.out_dir = out_dir or os.environ.get(DISPLAY_DIR_ENV) or tempfile.mkdtemp(prefix="kraft-replay-display-")
        self.max_rows = max_rows
        self.stream = stream
        self.items: list[Displayed] = []

    def _write(self, text: str) -> None:
        print(text, file=self.stream or sys.stdout)

    def __call__(self, obj: Any = None, *args: Any, **kwargs: Any) -> None:
        if _is_spark_frame(obj):
            self._table(obj)
        elif _is_figure(obj):
            self._figure(obj)
        elif _is_pandas(obj):
            text = obj.head(self.max_rows).to_string()
            self.items.append(Displayed("text", text=text, total_rows=len(obj)))
            self._write(text)
        else:
            text = "" if obj is None else str(obj)
            self.items.append(Displayed("text", text=text))
            self._write(text)

    def _table(self, df: Any) -> None:
        rows = [r.asDict(recursive=True) for r in df.limit(self.max_rows + 1).collect()]
        more = len(rows) > self.max_rows
        rows = rows[: self.max_rows]
        columns = list(df.columns)
        self.items.append(Displayed("table", columns=columns, rows=rows, total_rows=None if more else len(rows)))
        shown = [{c: _cell(r.get(c)) for c in columns} for r in rows]
        lines = table_lines(shown, columns) if rows else [" | ".join(columns), "(no rows)"]
        if more:
            lines.append(f"(first {self.max_rows} rows shown)")
        self._write("\n".join(lines))

    def _figure(self, fig: Any) -> None:
        os.makedirs(self.out_dir, exist_ok=True)
        n = sum(1 for d in self.items if d.kind == "figure") + 1
        path = os.path.join(self.out_dir, f"display-{n:02d}.png")
        fig.savefig(path, dpi=100, format="png")
        self.items.append(Displayed("figure", path=path))
        self._write(f"[figure saved to {path}]")

    def html(self, html: str) -> None:
        """`displayHTML` off Databricks: the text without tags."""
        text = re.sub(r"<[^>]+>", "", html)
        self.items.append(Displayed("text", text=text))
        self._write(text)


def _cell(value: Any) -> Any:
    if isinstance(value, list | tuple):
        return "[" + ", ".join(str(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {v}" for k, v in value.items()) + "}"
    return value


def _is_spark_frame(obj: Any) -> bool:
    mod = type(obj).__module__ or ""
    return type(obj).__name__ == "DataFrame" and mod.startswith("pyspark.sql")


def _is_pandas(obj: Any) -> bool:
    return type(obj).__name__ in ("DataFrame", "Series") and (type(obj).__module__ or "").startswith("pandas")


def _is_figure(obj: Any) -> bool:
    return hasattr(obj, "savefig") and (type(obj).__module__ or "").startswith("matplotlib")


# ---- dbutils -----------------------------------------------------------------------------------------------------

class InputWidgetNotDefined(KeyError):
    """What Databricks raises for `dbutils.widgets.get` of a widget that was never created."""


class LocalWidgets:
    """`dbutils.widgets` off Databricks. A widget's value: runner parameter, else `KRAFT_REPLAY_<NAME>`, else its
    default."""

    def __init__(self, params: Mapping[str, str] | None = None, environ: Mapping[str, str] | None = None) -> None:
        self.params = dict(params or {})
        self.environ = os.environ if environ is None else environ
        self.defined: dict[str, dict[str, Any]] = {}

    def _define(self, kind: str, name: str, default: str, label: str | None, choices: Sequence[str] = ()) -> None:
        self.defined[name] = {"kind": kind, "default": default, "label": label or name, "choices": list(choices)}

    def text(self, name: str, defaultValue: str = "", label: str | None = None) -> None:
        self._define("text", name, defaultValue, label)

    def dropdown(self, name: str, defaultValue: str, choices: Sequence[str], label: str | None = None) -> None:
        self._define("dropdown", name, defaultValue, label, choices)

    def combobox(self, name: str, defaultValue: str, choices: Sequence[str], label: str | None = None) -> None:
        self._define("combobox", name, defaultValue, label, choices)

    def multiselect(self, name: str, defaultValue: str, choices: Sequence[str], label: str | None = None) -> None:
        self._define("multiselect", name, defaultValue, label, choices)

    def get(self, name: str) -> str:
        if name in self.params:
            return str(self.params[name])
        if name not in self.defined:
            raise InputWidgetNotDefined(f"No input widget named {name} is defined")
        env = self.environ.get(env_name(name))
        if env is not None:
            return env
        return str(self.defined[name]["default"])

    def getArgument(self, name: str, defaultValue: str | None = None) -> str | None:
        try:
            return self.get(name)
        except InputWidgetNotDefined:
            return defaultValue

    def getAll(self) -> dict[str, str]:
        return {name: self.get(name) for name in self.defined}

    def remove(self, name: str) -> None:
        self.defined.pop(name, None)

    def removeAll(self) -> None:
        self.defined.clear()


class NotebookExit(Exception):
    """Raised by the local `dbutils.notebook.exit(value)`; the runner stops there and keeps the value."""

    def __init__(self, value: str) -> None:
        super().__init__(value)
        self.value = value


class _LocalNotebookUtils:
    def exit(self, value: str = "") -> None:
        raise NotebookExit(str(value))


class _LocalFs:
    """The few `dbutils.fs` calls that make sense on local paths."""

    def ls(self, path: str) -> list[Any]:
        p = _local(path)
        return [SimpleNamespace(path=os.path.join(path, n), name=n + ("/" if os.path.isdir(os.path.join(p, n)) else ""),
                                size=os.path.getsize(os.path.join(p, n))) for n in sorted(os.listdir(p))]

    def mkdirs(self, path: str) -> bool:
        os.makedirs(_local(path), exist_ok=True)
        return True


def _local(path: str) -> str:
    return path[len("file:"):] if path.startswith("file:") else path


class LocalDbutils:
    """The parts of `dbutils` a notebook of this project uses, for local runs."""

    def __init__(self, params: Mapping[str, str] | None = None, environ: Mapping[str, str] | None = None) -> None:
        self.widgets = LocalWidgets(params, environ)
        self.notebook = _LocalNotebookUtils()
        self.fs = _LocalFs()


# ---- the fallbacks a notebook calls ------------------------------------------------------------------------------

def spark_session(ns: Mapping[str, Any] | None = None, master: str | None = None) -> Any:
    """The notebook's `spark` when there is one (Databricks, or the runner's), else `get_spark()`."""
    existing = (ns or {}).get("spark")
    if existing is not None and hasattr(existing, "sql"):
        return existing
    return get_spark(master=master or os.environ.get("KRAFT_REPLAY_SPARK_MASTER"))


def display_function(ns: Mapping[str, Any] | None = None) -> Callable[..., Any]:
    """The notebook's `display` (Databricks' own, or the runner's), else a new `LocalDisplay`."""
    existing = (ns or {}).get("display")
    if callable(existing):
        shown: Callable[..., Any] = existing
        return shown
    return LocalDisplay()


def dbutils_handle(ns: Mapping[str, Any] | None = None, spark: Any = None) -> Any:
    """The notebook's `dbutils`; on Databricks without one in `ns`, `pyspark.dbutils.DBUtils`; else `LocalDbutils`."""
    existing = (ns or {}).get("dbutils")
    if existing is not None:
        return existing
    if on_databricks():
        try:
            from pyspark.dbutils import DBUtils

            return DBUtils(spark)
        except Exception:
            pass
    return LocalDbutils()


def widget(dbutils: Any, name: str, default: str = "", label: str | None = None,
           choices: Sequence[str] | None = None) -> str:
    """Create a text (or dropdown, with `choices`) widget and return its current value, stripped."""
    if choices:
        dbutils.widgets.dropdown(name, default, list(choices), label or name)
    else:
        dbutils.widgets.text(name, default, label or name)
    return str(dbutils.widgets.get(name) or "").strip()


def declare_sql_variables(spark: Any, variables: Mapping[str, tuple[str, str]]) -> Any:
    """`DECLARE OR REPLACE VARIABLE name type DEFAULT expression` for each `name: (type, SQL expression)`; returns
    a one-row DataFrame of their values."""
    for name, (sql_type, expression) in variables.items():
        spark.sql(f"DECLARE OR REPLACE VARIABLE {name} {sql_type} DEFAULT {expression}")
    return spark.sql("SELECT " + ", ".join(variables))


def parse_moment(text: str) -> tuple[str, int] | None:
    """An audit moment as typed in a widget: `("offset", N)` for a plain number below 10^11 (a log offset),
    `("time", ms)` for epoch milliseconds (larger numbers) or ISO-8601 (`2026-11-20T14:02:00Z`; no zone = UTC),
    None for an empty text (the notebook then picks one)."""
    text = (text or "").strip()
    if not text:
        return None
    if text.lower().startswith("offset"):
        return "offset", int(text[len("offset"):].strip(" :=").strip())
    if text.lstrip("-").isdigit() and abs(int(text)) < 10**11:
        return "offset", int(text)
    return "time", parse_time(text)


# ---- the runner --------------------------------------------------------------------------------------------------

class UnsupportedMagic(RuntimeError):
    pass


class NotebookCellError(RuntimeError):
    def __init__(self, cell: Cell, error: BaseException) -> None:
        first = next((line for line in cell.source.splitlines() if line.strip()), "")
        super().__init__(f"cell {cell.index} ({cell.kind}, line {cell.line}: {first[:80]!r}) failed: "
                         f"{type(error).__name__}: {error}")
        self.cell = cell
        self.error = error


@dataclass
class Cell:
    index: int  # from 1, as Databricks numbers them
    kind: str  # python | sql | md | pip | sh | fs | run | scala | r | ...
    source: str  # without `# MAGIC` prefixes and without the `%magic` word
    line: int  # line of the cell's first line in the file, from 1
    title: str | None = None


@dataclass
class CellRun:
    cell: Cell
    status: str  # ok | rendered | skipped | error | exit
    seconds: float = 0.0
    output: str = ""
    error: str | None = None


@dataclass
class NotebookRun:
    path: str
    cells: list[CellRun]
    namespace: dict[str, Any]
    display: LocalDisplay | None
    exit_value: str | None = None

    @property
    def ok(self) -> bool:
        return all(c.status != "error" for c in self.cells)

    def output(self) -> str:
        return "".join(c.output for c in self.cells)


_MAGIC_RE = re.compile(r"^# MAGIC ?(.*)$")
_TITLE_RE = re.compile(r"^# DBTITLE \d+,(.*)$")


def parse_notebook(text: str) -> list[Cell]:
    """Split Databricks source text into cells (see the module docstring)."""
    lines = text.splitlines()
    if not lines or lines[0].strip() != HEADER:
        raise ValueError(f"not a Databricks source notebook: the first line must be {HEADER!r}")
    chunks: list[tuple[int, list[str]]] = []
    current: list[str] = []
    start = 2
    for number, line in enumerate(lines[1:], start=2):
        if line.strip() == SEPARATOR:
            chunks.append((start, current))
            current, start = [], number + 1
        else:
            current.append(line)
    chunks.append((start, current))
    cells: list[Cell] = []
    for start, body in chunks:
        while body and not body[0].strip():
            body, start = body[1:], start + 1
        while body and not body[-1].strip():
            body = body[:-1]
        if not body:
            continue
        title = None
        m = _TITLE_RE.match(body[0])
        if m:
            title, body, start = m.group(1).strip(), body[1:], start + 1
        magic = [_MAGIC_RE.match(line) for line in body]
        if body and all(magic):
            content = [m.group(1) for m in magic if m]
            head = content[0].strip()
            word = head.split(None, 1)[0] if head.startswith("%") else ""
            if word:
                kind = word[1:].lower()
                rest = head[len(word):].strip()
                source = "\n".join(([rest] if rest else []) + content[1:])
            else:
                kind, source = "python", "\n".join(content)
        else:
            kind, source = "python", "\n".join(body)
        cells.append(Cell(len(cells) + 1, kind, source, start, title))
    return cells


def split_sql(text: str) -> list[str]:
    """Statements of a SQL cell, split at `;` outside quotes and comments; comment-only pieces are dropped."""
    statements: list[str] = []
    buf: list[str] = []
    i, n = 0, len(text)
    quote: str | None = None
    while i < n:
        ch = text[i]
        if quote:
            buf.append(ch)
            if ch == "\\" and quote != "`" and i + 1 < n:
                buf.append(text[i + 1])
                i += 2
                continue
            if ch == quote:
                quote = None
            i += 1
            continue
        if ch in ("'", '"', "`"):
            quote = ch
            buf.append(ch)
        elif text.startswith("--", i):
            end = text.find("\n", i)
            end = n if end < 0 else end
            buf.append(text[i:end])
            i = end
            continue
        elif text.startswith("/*", i):
            end = text.find("*/", i + 2)
            end = n if end < 0 else end + 2
            buf.append(text[i:end])
            i = end
            continue
        elif ch == ";":
            statements.append("".join(buf))
            buf = []
        else:
            buf.append(ch)
        i += 1
    statements.append("".join(buf))
    return [s.strip() for s in statements if _strip_sql_comments(s).strip()]


def _strip_sql_comments(text: str) -> str:
    return re.sub(r"--[^\n]*|/\*.*?\*/", "", text, flags=re.S)


class _Tee(io.TextIOBase):
    def __init__(self, *streams: TextIO) -> None:
        self.streams = streams

    def write(self, s: str) -> int:
        for stream in self.streams:
            stream.write(s)
        return len(s)

    def flush(self) -> None:
        for stream in self.streams:
            stream.flush()


_SKIPPED_MAGICS = {"pip": "skipped: the local environment already has the packages"}
_MARKDOWN = {"md", "md-sandbox"}


def run_notebook(
    path: str,
    params: Mapping[str, str] | None = None,
    spark: Any = None,
    display_dir: str | None = None,
    echo: bool = True,
    stop_on_error: bool = True,
    skip_unsupported: bool = False,
    stream: TextIO | None = None,
    max_rows: int = 100,
) -> NotebookRun:
    """Run a Databricks source notebook locally, cell by cell, in one namespace (see the module docstring).

    `params`: widget values (like `dbutils.notebook.run` arguments). `spark`: the session to use (default:
    `get_spark()` when the notebook asks for one). `display_dir`: where `display(fig)` saves PNGs. `max_rows`: rows
    a displayed table shows.
    """
    with open(path, encoding="utf-8") as f:
        cells = parse_notebook(f.read())
    out = stream or sys.stdout
    display = LocalDisplay(display_dir, max_rows=max_rows, stream=None)
    dbutils = LocalDbutils(params)
    ns: dict[str, Any] = {"__name__": "__main__", "__file__": os.path.abspath(path), "display": display,
                          "displayHTML": display.html, "dbutils": dbutils}
    if spark is not None:
        ns["spark"] = spark
    run = NotebookRun(os.path.abspath(path), [], ns, display)
    for cell in cells:
        buf = io.StringIO()
        sink: TextIO = _Tee(buf, out) if echo else buf  # type: ignore[assignment]
        display.stream = sink
        record = CellRun(cell, "ok")
        started = time.monotonic()
        try:
            with contextlib.redirect_stdout(sink):
                if echo:
                    print(f"\n--- cell {cell.index} ({cell.kind}{': ' + cell.title if cell.title else ''}) ---")
                _run_cell(cell, ns, display, record, skip_unsupported)
        except NotebookExit as stop:
            record.status = "exit"
            run.exit_value = stop.value
        except Exception as err:
            record.status = "error"
            record.error = f"{type(err).__name__}: {err}"
            record.seconds = time.monotonic() - started
            record.output = buf.getvalue()
            run.cells.append(record)
            if stop_on_error:
                raise NotebookCellError(cell, err) from err
            continue
        record.seconds = time.monotonic() - started
        record.output = buf.getvalue()
        run.cells.append(record)
        if record.status == "exit":
            break
    display.stream = None
    return run


def _run_cell(cell: Cell, ns: dict[str, Any], display: LocalDisplay, record: CellRun, skip_unsupported: bool) -> None:
    if cell.kind == "python":
        code = compile(cell.source + "\n", f"{ns['__file__']}[cell {cell.index}]", "exec")
        exec(code, ns)
    elif cell.kind in _MARKDOWN:
        record.status = "rendered"
        print(cell.source)
    elif cell.kind == "sql":
        spark = ns.get("spark")
        if spark is None:
            spark = ns["spark"] = spark_session(ns)
        result = None
        for statement in split_sql(cell.source):
            result = spark.sql(statement)
        if result is not None:
            ns["_sqldf"] = result
            if result.columns:
                display(result)
    elif cell.kind in _SKIPPED_MAGICS:
        record.status = "skipped"
        print(f"%{cell.kind} {_SKIPPED_MAGICS[cell.kind]}")
    elif skip_unsupported:
        record.status = "skipped"
        print(f"%{cell.kind} is not supported by the local runner; skipped")
    else:
        raise UnsupportedMagic(f"%{cell.kind} cells cannot run locally (cell {cell.index}, line {cell.line})")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m replay.notebook",
                                     description="Run a Databricks source notebook locally, cell by cell.")
    parser.add_argument("notebook")
    parser.add_argument("-p", "--param", action="append", default=[], metavar="NAME=VALUE",
                        help="a widget value (repeatable)")
    parser.add_argument("--display-dir", help="where display(figure) saves PNG files")
    parser.add_argument("--keep-going", action="store_true", help="run the remaining cells after a failure")
    args = parser.parse_args(argv)
    params = {}
    for item in args.param:
        name, sep, value = item.partition("=")
        if not sep:
            parser.error(f"--param wants NAME=VALUE, not {item!r}")
        params[name.strip()] = value
    try:
        run = run_notebook(args.notebook, params, display_dir=args.display_dir, stop_on_error=not args.keep_going)
    except NotebookCellError as err:
        print(f"\n{err}", file=sys.stderr)
        return 1
    failed = [c for c in run.cells if c.status == "error"]
    print(f"\n{len(run.cells)} cell(s) run, {len(failed)} failed"
          + (f"; figures in {run.display.out_dir}" if run.display and any(
              d.kind == "figure" for d in run.display.items) else ""), file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
