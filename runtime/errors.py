"""The whole exception tree of bide, drawn here once.

    BideError
    ├── ConfigError                  a definition or an option is wrong; fix the code or the command
    │   └── ConflictError            a second, different decision for something already decided
    ├── ToolError                    a tool failed; recorded as an error result the model sees
    │   ├── UnknownToolError         the model named a tool the agent does not have
    │   ├── ToolArgumentsError       the arguments failed the tool's input schema; it never ran
    │   ├── ToolOutcomeUnknown       the tool may or may not have acted (timeout, lost connection)
    │   └── SignalTimeout            a receive's timeout came with no signal (a TimeoutError too)
    ├── ModelError                   the model provider failed (``retryable`` says whether to retry)
    ├── StorageError                 the journal could not be read or written
    │   ├── SchemaError              the database schema is missing, old, or from a newer bide
    │   └── FormatError              a run was written in a journal format this bide does not know
    │       └── CorruptJournal       a record cannot be read as written: an unknown codec, or a
    │                                payload that does not decode (``key`` and ``seq`` name it)
    ├── ProtocolError                a peer (model, MCP server, journal file) broke its protocol
    ├── OwnershipError               who drives a run: another owner holds it, or took it over
    │   ├── RunBusy                  the run's lease is held by a live owner (``lease`` says who)
    │   ├── SessionBusy              a session's last message has not ended (``holder`` names it)
    │   ├── QueueFull                a queued run's queue or key has no room now (``why`` says)
    │   └── LeaseLost                this drive's lease was taken over: it appends nothing more
    └── BudgetError                  a limit such as ``max_turns`` was reached; the run can continue

Control signals, not errors (``BaseException``, like ``CancelledError``, so that a tool's
``except Exception`` cannot swallow them; a tool lets them propagate):

    Interrupted (runtime.tools)      a tool asked a person for input: the run pauses ``waiting``
    Misuse (runtime.drive)           a tool broke a rule of the drive (a SIDE_EFFECT called
                                     ``interrupt()``): its ConfigError stops the drive

Every error carries an optional ``run_id`` and ``call_id`` so that a caller can tell which run and
which call it concerns without parsing the message. Messages are redacted when the error is made
(``runtime.redact``): credentials in URLs and declared secrets never reach the journal or a log.
"""

from __future__ import annotations

from typing import Any, Protocol

from runtime.redact import clean

__all__ = [
    "BideError",
    "BudgetError",
    "ConfigError",
    "ConflictError",
    "CorruptJournal",
    "FormatError",
    "LeaseLost",
    "ModelError",
    "OwnershipError",
    "ProtocolError",
    "QueueFull",
    "RunBusy",
    "SchemaError",
    "SessionBusy",
    "SignalTimeout",
    "StorageError",
    "ToolArgumentsError",
    "ToolError",
    "ToolOutcomeUnknown",
    "UnknownToolError",
]


class BideError(Exception):
    """The root of every error bide raises on purpose."""

    def __init__(self, message: str, *, run_id: str | None = None, call_id: str | None = None):
        # Redacted once, here: an error's text reaches the journal, `show` and logs.
        message = clean(message)
        super().__init__(message)
        self.message = message
        self.run_id = run_id
        self.call_id = call_id

    def __str__(self) -> str:
        return self.message


class ConfigError(BideError):
    """A definition, an option or a command is wrong: fixing the caller's code or input fixes it."""


class ConflictError(ConfigError):
    """A different decision was submitted for something already decided (the first one stands)."""


class ToolError(BideError):
    """A tool reported a failure. Raised in a tool, it becomes an error result the model sees.

    ``data`` (JSON) travels with the message into the recorded error, for the model to read.
    """

    def __init__(
        self,
        message: str,
        *,
        data: object = None,
        run_id: str | None = None,
        call_id: str | None = None,
    ):
        super().__init__(message, run_id=run_id, call_id=call_id)
        self.data = data


class SignalTimeout(ToolError, TimeoutError):
    """``ToolContext.receive`` found no signal within its timeout (journaled: the same on
    every run of the tool after). Uncaught, the call's result is this error."""


class UnknownToolError(ToolError):
    """The model asked for a tool that the agent does not have; nothing ran."""


class ToolArgumentsError(ToolError):
    """The arguments did not fit the tool's input schema; the tool never ran."""


class ToolOutcomeUnknown(ToolError):
    """The tool may have acted and its result is lost (timeout, connection lost, cancellation).

    A tool raises it to say "I may have fired". For a side effect the runtime records nothing and
    halts the run; a retry-safe tool is retried or its error recorded.
    """


class ModelError(BideError):
    """The model provider failed. ``retryable`` is true for rate limits, timeouts and 5xx."""

    def __init__(
        self,
        message: str,
        *,
        retryable: bool = False,
        retry_after: float | None = None,
        status_code: int | None = None,
        run_id: str | None = None,
    ):
        super().__init__(message, run_id=run_id)
        self.retryable = retryable
        self.retry_after = retry_after
        self.status_code = status_code


class StorageError(BideError):
    """The journal could not be read or written (a lock outlasting the busy timeout, a bad file).

    ``transient`` is true when the same write may succeed later (the database was locked).
    """

    def __init__(
        self,
        message: str,
        *,
        transient: bool = False,
        run_id: str | None = None,
        call_id: str | None = None,
    ):
        super().__init__(message, run_id=run_id, call_id=call_id)
        self.transient = transient


class SchemaError(StorageError):
    """The journal's schema is missing, older than this bide needs, or newer than it knows."""


class FormatError(StorageError):
    """A run's header names a journal format this bide cannot read; nothing of it is touched."""


class ProtocolError(BideError):
    """A peer broke its protocol: a model's turn, an MCP server's tool list, a journal record."""


class CorruptJournal(FormatError, ProtocolError):
    """A record in the journal cannot be read as it was written: its codec is one this bide does
    not know, or its payload does not decode with it. Nothing of the run is returned.

    The one category for a damaged journal, whichever way it is damaged. ``key`` and ``seq``
    name the record (``seq`` is ``None`` where the read did not fetch it), so an operator can
    find it in the file. It is also a ``ProtocolError``, as a record that is not valid JSON was
    before this category existed, so that code matching either keeps working.
    """

    def __init__(self, message: str, *, run_id: str, key: str, seq: int | None = None):
        super().__init__(message, run_id=run_id)
        self.key = key
        self.seq = seq


class BudgetError(BideError):
    """A limit was reached (``max_turns``). Nothing is lost: raise it and drive the run again."""


class OwnershipError(BideError):
    """Who drives a run: a second driver is refused, and a drive that lost its lease stops."""


class HeldLease(Protocol):
    """What ``RunBusy.lease`` tells of the lease that refused a drive: it is a
    ``runtime.ownership.Lease`` (typed here by its shape, so that the errors import nothing
    above them)."""

    @property
    def run_id(self) -> str: ...

    @property
    def epoch(self) -> int: ...

    @property
    def owner(self) -> Any: ...

    @property
    def expires_ms(self) -> int: ...

    @property
    def live(self) -> bool: ...

    def to_json(self) -> dict[str, Any]: ...


class RunBusy(OwnershipError):
    """The run's lease is held by a live owner: it is being driven elsewhere. ``lease`` names
    the owner and when the lease expires; wait for it, or let that owner finish."""

    def __init__(self, message: str, *, lease: HeldLease, run_id: str | None = None):
        super().__init__(message, run_id=run_id)
        self.lease = lease


class SessionBusy(OwnershipError):
    """A session runs one message at a time: the run of its previous message (``holder``) has
    not ended (it runs, waits or is halted). Wait for it to end, or cancel it."""

    def __init__(self, message: str, *, session: str, holder: str, run_id: str | None = None):
        super().__init__(message, run_id=run_id)
        self.session = session
        self.holder = holder


class QueueFull(OwnershipError):
    """A worker may not start this queued run now: its queue or its concurrency key is at its
    limit, its queue started as many runs as its rate allows, or its debounce window is open.
    ``why`` says which; the run stays queued and a later claim starts it."""

    def __init__(self, message: str, *, why: str, run_id: str | None = None):
        super().__init__(message, run_id=run_id)
        self.why = why


class LeaseLost(OwnershipError):
    """This drive's lease is over: another owner took it (it expired, or its holder was
    presumed dead), or it expired before a renewal, or could not be renewed in time to send.
    The drive stops without running anything more. ``taken_over``: another owner holds it."""

    def __init__(
        self,
        message: str,
        *,
        run_id: str | None = None,
        call_id: str | None = None,
        taken_over: bool = True,
    ):
        super().__init__(message, run_id=run_id, call_id=call_id)
        self.taken_over = taken_over
