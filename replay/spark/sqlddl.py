"""A SQL function or view of the lake as data, so one definition gives both the temporary registration of a Python
session and the persistent DDL that `kraft-replay install-sql` runs or prints for a SQL warehouse.

Bodies are kept in the form `replay.spark.rules.run_sql` reads (braces doubled): the audits' text also runs
through PySpark's formatter with DataFrames. `plain` undoes it for DDL that goes anywhere else.
"""

from __future__ import annotations

from dataclasses import dataclass

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
