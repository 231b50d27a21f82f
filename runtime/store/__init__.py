"""Storage under the journal: the ``Store`` protocol and the rules every store keeps, written once
(``decide``), over SQLite (``sqlite``), PostgreSQL (``postgres``) or memory (``memory``).

``runtime.journal`` is the handle people use; this package is what it stands on.
"""
