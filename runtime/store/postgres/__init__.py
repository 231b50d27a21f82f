"""PostgreSQL underneath the journal: reaching the server (``connect``), the batch logic that
decides each key's winner (``batch``), the group-commit writer (``writer``), leases
(``leases``), the schema (``migrate``) and the store itself (``store``). Needs the
``bide[postgres]`` extra (asyncpg)."""

from runtime.store.postgres.connect import display, postgres_url
from runtime.store.postgres.store import PostgresStore

__all__ = ["PostgresStore", "display", "postgres_url"]
