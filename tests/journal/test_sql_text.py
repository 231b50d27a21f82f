"""The SQLite store's SQL is text (no SQLAlchemy on import): every name it uses is the Core
schema's, and every read it makes is exactly its Core select compiled for SQLite."""

from __future__ import annotations

import itertools
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy.dialects import sqlite as sqlite_dialect

from runtime.store import names, schema
from runtime.store.decide import WAKE_KINDS
from runtime.store.sqlite import batch, leases, queries
from runtime.store.sqlite.queries import Query


@pytest.mark.parametrize(
    "table", ["records", "runs", "leases", "queues", "queue_runs", "schedules"]
)
def test_names_are_the_core_tables_names_and_columns_in_order(table: str) -> None:
    core: sa.Table = getattr(schema, table)
    named: names.TableNames = getattr(names, table)
    assert named.name == core.name
    assert named.columns == tuple(core.c.keys())


def test_the_versions_and_index_columns_are_the_schemas() -> None:
    tables = (names.records, names.runs, names.leases, names.queues, names.queue_runs)
    assert schema.metadata.tables.keys() == {t.name for t in (*tables, names.schedules)}
    assert (schema.FORMAT_VERSION, schema.HEAD_REVISION, schema.VERSION_TABLE) == (
        names.FORMAT_VERSION,
        names.HEAD_REVISION,
        names.VERSION_TABLE,
    )
    assert set(names.INDEX_COLUMNS) < set(names.runs.columns)


def test_the_writers_column_lists_are_the_tables() -> None:
    assert names.records.columns == batch._RECORD_COLUMNS
    assert names.leases.columns == leases._COLUMNS


# The reads as SQLAlchemy Core selects: what the text in `queries` must compile from.

_r, _u, _l = schema.records, schema.runs, schema.leases
_RUN_ID: sa.BindParameter[str] = sa.bindparam("run_id")
_RUN_COLUMNS = (
    _u.c.run_id,
    _u.c.format,
    _u.c.status,
    _u.c.agent,
    _u.c.turns,
    _u.c.created_ms,
    _u.c.updated_ms,
    _u.c.detail,
    _l.c.epoch,
    _l.c.owner,
    _l.c.acquired_ms,
    _l.c.expires_ms,
    _l.c.released,
)
_RUNS = _u.outerjoin(_l, _l.c.run_id == _u.c.run_id)


def _list(status: bool, prefix: bool, before: bool) -> sa.Select[Any]:
    query = sa.select(*_RUN_COLUMNS).select_from(_RUNS)
    if status:
        query = query.where(_u.c.status == sa.bindparam("status"))
    if prefix:
        query = query.where(_u.c.run_id.like(sa.bindparam("pattern"), escape="/"))
    if before:
        cursor = sa.tuple_(sa.bindparam("before_ms"), sa.bindparam("before_id"))
        query = query.where(sa.tuple_(_u.c.created_ms, _u.c.run_id) < cursor)
    order = query.order_by(_u.c.created_ms.desc(), _u.c.run_id.desc())
    return order.limit(sa.bindparam("limit"))


def _claimable() -> sa.Select[Any]:
    """A worker's claim: ready runs, and waiting or halted runs that are due or woken."""
    woken = sa.or_(
        sa.and_(
            _u.c.due_ms.is_not(None),
            sa.or_(
                _u.c.due_ms <= sa.bindparam("due_now"),
                _u.c.due_clock.is_distinct_from(sa.bindparam("clock")),
            ),
        ),
        sa.exists().where(
            _r.c.run_id == _u.c.run_id,
            _r.c.seq > sa.func.coalesce(_u.c.wake_seq, 0),
            sa.or_(*(_r.c.kind == k for k in WAKE_KINDS)),
        ),
    )
    return (
        sa.select(
            _u.c.run_id, _l.c.epoch, _l.c.owner, _l.c.acquired_ms, _l.c.expires_ms, _l.c.released
        )
        .select_from(_RUNS)
        .where(
            sa.or_(
                _u.c.status == "running",
                _u.c.status == "submitted",
                sa.and_(sa.or_(_u.c.status == "waiting", _u.c.status == "halted"), woken),
            ),
            sa.or_(
                _l.c.run_id.is_(None),
                _l.c.released.is_(True),
                _l.c.expires_ms <= sa.bindparam("now"),
                _l.c.host == sa.bindparam("host"),
                _l.c.owner.not_like(sa.bindparam("boot")),
            ),
            # A queued run that never started is claimed through its queue (store.queues).
            ~sa.exists().where(
                schema.queue_runs.c.run_id == _u.c.run_id, schema.queue_runs.c.started_ms.is_(None)
            ),
            # A worker with an agent claims only the runs that agent started.
            sa.or_(sa.bindparam("agent").is_(None), _u.c.agent == sa.bindparam("agent2")),
        )
        .order_by(
            sa.case(
                (
                    sa.and_(
                        _l.c.released.is_(False),
                        sa.or_(
                            _l.c.expires_ms <= sa.bindparam("now2"),
                            _l.c.owner.not_like(sa.bindparam("boot2")),
                        ),
                    ),
                    0,
                ),
                (sa.or_(_l.c.run_id.is_(None), _l.c.released.is_(True)), 1),
                else_=2,
            ),
            _u.c.updated_ms,
            _u.c.run_id,
        )
        .limit(sa.bindparam("limit"))
    )


CORE: dict[str, tuple[Query, sa.Select[Any]]] = {
    "get": (
        queries.GET,
        sa.select(_r.c.seq, _r.c.kind, _r.c.codec, _r.c.payload, _r.c.created_ms).where(
            _r.c.run_id == _RUN_ID, _r.c.key == sa.bindparam("key")
        ),
    ),
    "load": (
        queries.LOAD,
        sa.select(_r.c.seq, _r.c.key, _r.c.kind, _r.c.codec, _r.c.payload, _r.c.created_ms)
        .where(_r.c.run_id == _RUN_ID, _r.c.seq > sa.bindparam("after"))
        .order_by(_r.c.seq),
    ),
    "load_prefix": (
        queries.LOAD_PREFIX,
        sa.select(_r.c.seq, _r.c.key, _r.c.kind, _r.c.codec, _r.c.payload, _r.c.created_ms)
        .where(
            _r.c.run_id == _RUN_ID,
            _r.c.seq > sa.bindparam("after"),
            _r.c.key >= sa.bindparam("low"),
            _r.c.key < sa.bindparam("high"),
        )
        .order_by(_r.c.seq),
    ),
    "row": (
        queries.ROW,
        sa.select(*_RUN_COLUMNS).select_from(_RUNS).where(_u.c.run_id == _RUN_ID),
    ),
    "lease": (
        queries.LEASE,
        sa.select(_l.c.epoch, _l.c.owner, _l.c.acquired_ms, _l.c.expires_ms, _l.c.released).where(
            _l.c.run_id == _RUN_ID
        ),
    ),
    "claimable": (queries.CLAIMABLE, _claimable()),
    **{
        f"list{''.join('1' if f else '0' for f in flags)}": (queries.LIST[flags], _list(*flags))
        for flags in itertools.product((False, True), repeat=3)
    },
}


@pytest.mark.parametrize("name", sorted(CORE))
def test_each_read_is_its_core_select_compiled_for_sqlite(name: str) -> None:
    text, select = CORE[name]
    compiled = select.compile(dialect=sqlite_dialect.dialect())
    assert text.sql == str(compiled)
    assert text.names == tuple(compiled.positiontup or ())
    assert dict(text.defaults) == {k: v for k, v in compiled.params.items() if v is not None}


def test_every_read_and_listing_is_checked() -> None:
    checked = {id(text) for text, _ in CORE.values()}
    assert checked == {
        id(q)
        for q in (
            queries.GET,
            queries.LOAD,
            queries.LOAD_PREFIX,
            queries.ROW,
            queries.LEASE,
            queries.CLAIMABLE,
        )
    } | {id(q) for q in queries.LIST.values()}
