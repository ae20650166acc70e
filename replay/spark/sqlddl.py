"""A SQL function or view of the lake as data, so one definition gives both the temporary registration of a Python
session and the persistent DDL that `kraft-replay install-sql` runs or prints for a SQL warehouse.

Bodies are kept in the form `replay.spark.rules.run_sql` reads (braces doubled): the audits' text also runs
through PySpark's formatter with DataFrames. `plain` undoes it for DDL that goes anywhere else.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable
from dataclasses import dataclass

from pyspark.sql import SparkSession

from replay.spark.tables import sql_string


def plain(text: str) -> str:
    """Formatter-form SQL (`{{`, `}}`) as plain SQL."""
    return text.replace("{{", "{").replace("}}", "}")


@dataclass(frozen=True)
class SqlFunction:
    """A SQL table function over the lake's tables: `params` and `returns` as SQL column lists (`returns` None: the
    body's columns), `body` a query over the tables and the parameters."""

    name: str
    params: str
    returns: str | None
    comment: str
    body: str

    def create(self, schema: str | None = None) -> str:
        """`CREATE OR REPLACE [TEMPORARY] FUNCTION`: temporary without a schema, else persistent in `schema` (an
        already quoted `catalog.schema` or `schema`). Returns formatter-form text for a temporary function (it is run
        by `run_sql`), plain SQL for a persistent one."""
        returns = f"TABLE ({self.returns})" if self.returns else "TABLE"
        if schema is None:
            return f"CREATE OR REPLACE TEMPORARY FUNCTION {self.name}({self.params}) RETURNS {returns} RETURN {self.body}"
        return plain(f"CREATE OR REPLACE FUNCTION {schema}.{self.name}({self.params}) RETURNS {returns} "
                     f"COMMENT {sql_string(self.comment)} RETURN {self.body}")


@dataclass(frozen=True)
class SqlView:
    """A view over the lake's tables (persistent only: Python sessions have the DataFrame API)."""

    name: str
    comment: str
    body: str

    def create(self, schema: str) -> str:
        return plain(f"CREATE OR REPLACE VIEW {schema}.{self.name} COMMENT {sql_string(self.comment)} AS {self.body}")


def create_temporary(spark: SparkSession, functions: Iterable[SqlFunction], only: Collection[str] | None = None
                     ) -> list[str]:
    """Create `functions` as temporary ones in this session (of them, those named in `only`, when given); returns
    the names created. Spark analyses each body as it is created, a second or more per function: a query that
    calls one function need not wait for all of them (`words`)."""
    made = [f for f in functions if only is None or f.name in only]
    for f in made:
        spark.sql(plain(f.create()))
    return [f.name for f in made]


def words(query: str) -> set[str]:
    """The identifiers a SQL text could name (lowercased): the functions and tables it may call or read."""
    return {w.lower() for w in re.findall(r"[A-Za-z_][A-Za-z0-9_]*", query)}
