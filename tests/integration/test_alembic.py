"""recheck's columns stay out of an application's Alembic migrations (recheck/alembic.py).

A real Alembic project (env.py as docs/existing-table.md tells it) autogenerates a revision against a real
MariaDB table that `recheck init-db --apply` prepared (with the change feed's table): the
revision must propose nothing for recheck's columns, index or table, and still see the
application's own changes.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
import sqlalchemy as sa
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.config import Config
from alembic.migration import MigrationContext

import recheck.alembic
from tests.support.helpers import docs_text
from tests.support.helpers import recheck as run_recheck

pytestmark = pytest.mark.alembic


def documented_env_py() -> tuple[str, str]:
    """What docs/existing-table.md adds to an Alembic env.py: its import, and its configure call."""
    section = docs_text("existing-table.md").split("## SQLAlchemy and Alembic", 1)[1]
    lines = section.split("```python", 1)[1].split("```", 1)[0].strip().splitlines()
    imports = [line for line in lines if line.startswith("from ")]
    configure = [line for line in lines if line.startswith("context.configure(")]
    assert len(imports) == 1 and len(configure) == 1, lines
    return imports[0], configure[0]


DOCUMENTED_IMPORT, DOCUMENTED_CONFIGURE = documented_env_py()
ENV_PY = f"""
from alembic import context
from sqlalchemy import create_engine

{DOCUMENTED_IMPORT}
from models import metadata as target_metadata

def run_migrations_online():
    engine = create_engine(context.config.get_main_option("sqlalchemy.url"))
    with engine.connect() as connection:
        {DOCUMENTED_CONFIGURE}
        with context.begin_transaction():
            context.run_migrations()

run_migrations_online()
"""


def app_metadata(*extra: sa.Column) -> sa.MetaData:
    """The application's model: monitors, without a word about recheck."""
    metadata = sa.MetaData()
    sa.Table(
        "monitors",
        metadata,
        sa.Column("id", sa.BigInteger, primary_key=True, autoincrement=True),
        sa.Column("url", sa.String(500), nullable=False),
        *extra,
    )
    return metadata


@pytest.fixture
def prepared(settings, mariadb, monkeypatch):
    """The application's table, made from its model, then prepared by `recheck init-db --apply`."""
    url = f"mysql+pymysql://root@127.0.0.1:{mariadb.port}/{settings.mysql.database}"
    engine = sa.create_engine(url)
    with engine.begin() as connection:  # the tests' demo table is not this application's
        connection.exec_driver_sql(f"DROP TABLE {settings.table}")
    app_metadata().create_all(engine)
    env = {"RECHECK_TABLE": "monitors", "RECHECK_ID_COLUMN": "id", "RECHECK_CHANGES": "true"}
    applied = run_recheck("init-db", "--apply", settings=settings, env=env)
    assert applied.returncode == 0, applied.stdout + applied.stderr
    assert "recheck_changes" in applied.stdout
    recheck.alembic.configured.cache_clear()  # this process's configuration: the tests' defaults
    yield url, engine
    engine.dispose()
    recheck.alembic.configured.cache_clear()


def diffs(engine, metadata, include_object=None) -> list:
    with engine.connect() as connection:
        opts = {"include_object": include_object} if include_object else {}
        return compare_metadata(MigrationContext.configure(connection, opts=opts), metadata)


def named(found: list) -> str:
    return repr(found)


def test_without_the_hook_autogenerate_would_drop_recheck(prepared):
    _, engine = prepared
    found = named(diffs(engine, app_metadata()))  # what the issue saw: the next migration drops them
    for name in ("next_check_at", "'status'", "fail_count", "recheck_due", "recheck_changes"):
        assert name in found, found


def test_autogenerate_proposes_nothing_for_recheck(prepared, tmp_path, monkeypatch):
    url, engine = prepared
    assert diffs(engine, app_metadata(), recheck.alembic.include_object) == []
    # The application's own change is still seen.
    added = diffs(engine, app_metadata(sa.Column("name", sa.String(80))), recheck.alembic.include_object)
    assert [d[0] for d in added] == ["add_column"] and added[0][3].name == "name", added

    # The whole of Alembic: a project with the documented env.py, `alembic revision --autogenerate`.
    (tmp_path / "models.py").write_text(
        "import sqlalchemy as sa\nmetadata = sa.MetaData()\n"
        "sa.Table('monitors', metadata, sa.Column('id', sa.BigInteger, primary_key=True),\n"
        "         sa.Column('url', sa.String(500), nullable=False))\n"
    )
    config = Config(str(tmp_path / "alembic.ini"))
    command.init(config, str(tmp_path / "migrations"))
    config = Config(str(tmp_path / "alembic.ini"))
    config.set_main_option("sqlalchemy.url", url)
    (tmp_path / "migrations" / "env.py").write_text(textwrap.dedent(ENV_PY))
    monkeypatch.syspath_prepend(str(tmp_path))
    revision = command.revision(config, message="nothing", autogenerate=True)
    text = Path(revision.path).read_text()
    upgrade = text.split("def upgrade()")[1].split("def downgrade()")[0]
    assert "op." not in upgrade, upgrade  # an empty migration: recheck's columns are kept


def test_columns_told_by_configuration_when_init_db_did_not_add_them(prepared, monkeypatch):
    """Columns adopted or made by hand carry no comment: the configuration names them."""
    _, engine = prepared
    with engine.begin() as connection:
        connection.exec_driver_sql("ALTER TABLE monitors MODIFY status VARCHAR(255) NULL COMMENT ''")
    assert "status" in named(diffs(engine, app_metadata(), recheck.alembic.include_object))
    monkeypatch.setenv("RECHECK_TABLE", "monitors")
    recheck.alembic.configured.cache_clear()
    assert diffs(engine, app_metadata(), recheck.alembic.include_object) == []


def test_declaring_recheck_columns_on_the_model_also_works(prepared):
    """An application that reads recheck's result through its model declares the column: it is
    compared as usual, so it must match what init-db made, comment included."""
    _, engine = prepared
    comment = "recheck: the check's result"
    declared = app_metadata(sa.Column("status", sa.String(255), nullable=True, comment=comment))
    assert diffs(engine, declared, recheck.alembic.include_object) == []
    uncommented = app_metadata(sa.Column("status", sa.String(255), nullable=True))
    found = diffs(engine, uncommented, recheck.alembic.include_object)
    assert [d[0][0] for d in found] == ["modify_comment"], found  # the docs say: keep the comment
