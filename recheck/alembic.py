"""Keep recheck's columns, its due index and its change feed's table out of an application's
Alembic migrations.

An application's SQLAlchemy models do not declare the six columns `recheck init-db` adds to its
table, so Alembic's autogenerate would propose dropping them (and the due index) in the next
migration. In the application's migrations/env.py:

    from recheck.alembic import include_object

    context.configure(connection=connection, target_metadata=target_metadata,
                      include_object=include_object)

(with an include_object of its own: `include_object=lambda *a: include_object(*a) and mine(*a)`).

What is recheck's, told without any configuration: a column whose comment init-db wrote
("recheck: ..."), the index `recheck_due`, the change feeds' tables (`<table>_recheck_changes`,
and `recheck_changes` of versions before 0.2); and, from the same
configuration the commands read (RECHECK_* variables, .env, the workloads file), the columns
each workload names and an index that starts with a workload's due column. Anything a model
declares is compared as usual: only what exists in the database and not in the model is kept
out, so declaring recheck's columns on the model (to read them) also works.
"""

from __future__ import annotations

import functools
import logging

from recheck.shared.config import CHANGES_SUFFIX, ConfigError, Settings
from recheck.shared.mysql.schema import COLUMN_MARK, ROLE_SETTINGS
from recheck.shared.workloads import read_workloads

log = logging.getLogger(__name__)

DUE_INDEX = "recheck_due"  # the name init-db gives the due index


@functools.cache
def configured() -> tuple[frozenset, frozenset]:
    """((table, column) recheck writes, (table, due column)), lower case, from the configuration."""
    try:
        workloads = read_workloads(Settings())
    except (ConfigError, ValueError) as error:  # no usable configuration here: comments still tell
        log.info(
            "recheck.alembic: configuration not read (%s); recognising recheck's columns by comment", error
        )
        return frozenset(), frozenset()
    columns = {(w.table.lower(), getattr(w, role).lower()) for w in workloads for role in ROLE_SETTINGS}
    dues = {(w.table.lower(), w.due_column.lower()) for w in workloads}
    return frozenset(columns), frozenset(dues)


def is_recheck_column(column) -> bool:
    if (column.comment or "").startswith(COLUMN_MARK):
        return True
    return (column.table.name.lower(), column.name.lower()) in configured()[0]


def is_recheck_index(index) -> bool:
    if (index.name or "").lower() == DUE_INDEX:
        return True
    first = next(iter(index.columns), None)
    return first is not None and (index.table.name.lower(), first.name.lower()) in configured()[1]


def is_changes_table(name: str) -> bool:
    """A change feed's table: `<table>_recheck_changes` (cut and hashed when long, the same
    suffix), or the one table all feeds shared before 0.2."""
    return name.lower().endswith(CHANGES_SUFFIX) or name.lower() == "recheck_changes"


def include_object(object, name, type_, reflected, compare_to) -> bool:  # Alembic's names
    """Alembic's include_object hook: False for what recheck made and the model does not declare."""
    if not reflected or compare_to is not None:
        return True  # the model declares it: compared as usual
    if type_ == "table":
        return not is_changes_table(name)
    if type_ == "column":
        return not is_recheck_column(object)
    if type_ == "index":
        return not is_recheck_index(object)
    return True
