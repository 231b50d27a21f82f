"""bide: durable AI agents whose side effects fire at most once, across crashes."""

import importlib
import typing

if typing.TYPE_CHECKING:
    from runtime.agent import Agent, Session
    from runtime.approval import ApprovalPolicy, Decision, Tally, single_approval
    from runtime.errors import (
        BideError,
        BudgetError,
        ConfigError,
        ConflictError,
        CorruptJournal,
        FormatError,
        LeaseLost,
        ModelError,
        OwnershipError,
        ProtocolError,
        QueueFull,
        RunBusy,
        SchemaError,
        SessionBusy,
        SignalTimeout,
        StorageError,
        ToolArgumentsError,
        ToolError,
        ToolOutcomeUnknown,
        UnknownToolError,
    )
    from runtime.functions import FunctionTool, tool
    from runtime.journal import Decided, Journal, Resolution, RunPage, RunRow, Store
    from runtime.limits import UsageLimits
    from runtime.messages import (
        AssistantTurn,
        Message,
        ToolCall,
        ToolResultMessage,
        Usage,
        UserMessage,
    )
    from runtime.model import Model
    from runtime.output import OutputSpec
    from runtime.ownership import Lease, Owner
    from runtime.records import Record
    from runtime.result import Halt, RunResult, RunStatus, Waiting
    from runtime.retry import RetryingModel, RetryPolicy
    from runtime.state import CallState, RunState
    from runtime.tools import Safety, Tool, ToolContext, ToolSpec
    from runtime.worker import Worker

__version__ = "0.1.0"


__all__ = [
    "Agent",
    "ApprovalPolicy",
    "AssistantTurn",
    "BideError",
    "BudgetError",
    "CallState",
    "ConfigError",
    "ConflictError",
    "CorruptJournal",
    "Decided",
    "Decision",
    "FormatError",
    "FunctionTool",
    "Halt",
    "Journal",
    "Lease",
    "LeaseLost",
    "Message",
    "Model",
    "ModelError",
    "OutputSpec",
    "Owner",
    "OwnershipError",
    "ProtocolError",
    "QueueFull",
    "Record",
    "Resolution",
    "RetryPolicy",
    "RetryingModel",
    "RunBusy",
    "RunPage",
    "RunResult",
    "RunRow",
    "RunState",
    "RunStatus",
    "Safety",
    "SchemaError",
    "Session",
    "SessionBusy",
    "SignalTimeout",
    "StorageError",
    "Store",
    "Tally",
    "Tool",
    "ToolArgumentsError",
    "ToolCall",
    "ToolContext",
    "ToolError",
    "ToolOutcomeUnknown",
    "ToolResultMessage",
    "ToolSpec",
    "UnknownToolError",
    "Usage",
    "UsageLimits",
    "UserMessage",
    "Waiting",
    "Worker",
    "__version__",
    "single_approval",
    "tool",
]

_WHERE = {
    "Agent": "runtime.agent",
    "ApprovalPolicy": "runtime.approval",
    "Decision": "runtime.approval",
    "Tally": "runtime.approval",
    "single_approval": "runtime.approval",
    "BideError": "runtime.errors",
    "BudgetError": "runtime.errors",
    "ConfigError": "runtime.errors",
    "ConflictError": "runtime.errors",
    "CorruptJournal": "runtime.errors",
    "FormatError": "runtime.errors",
    "LeaseLost": "runtime.errors",
    "ModelError": "runtime.errors",
    "OwnershipError": "runtime.errors",
    "ProtocolError": "runtime.errors",
    "QueueFull": "runtime.errors",
    "RunBusy": "runtime.errors",
    "SchemaError": "runtime.errors",
    "SessionBusy": "runtime.errors",
    "StorageError": "runtime.errors",
    "ToolArgumentsError": "runtime.errors",
    "SignalTimeout": "runtime.errors",
    "ToolError": "runtime.errors",
    "ToolOutcomeUnknown": "runtime.errors",
    "UnknownToolError": "runtime.errors",
    "FunctionTool": "runtime.functions",
    "tool": "runtime.functions",
    "Decided": "runtime.journal",
    "Journal": "runtime.journal",
    "Resolution": "runtime.journal",
    "RunPage": "runtime.journal",
    "RunRow": "runtime.journal",
    "Store": "runtime.journal",
    "UsageLimits": "runtime.limits",
    "AssistantTurn": "runtime.messages",
    "Message": "runtime.messages",
    "ToolCall": "runtime.messages",
    "ToolResultMessage": "runtime.messages",
    "Usage": "runtime.messages",
    "UserMessage": "runtime.messages",
    "Model": "runtime.model",
    "OutputSpec": "runtime.output",
    "Lease": "runtime.ownership",
    "Owner": "runtime.ownership",
    "Record": "runtime.records",
    "Halt": "runtime.result",
    "RunResult": "runtime.result",
    "RunStatus": "runtime.result",
    "Waiting": "runtime.result",
    "RetryPolicy": "runtime.retry",
    "RetryingModel": "runtime.retry",
    "Session": "runtime.agent",
    "CallState": "runtime.state",
    "RunState": "runtime.state",
    "Safety": "runtime.tools",
    "Tool": "runtime.tools",
    "ToolContext": "runtime.tools",
    "ToolSpec": "runtime.tools",
    "Worker": "runtime.worker",
}
"""Where each public name lives. They are imported on first use, so that a process that needs
a part of bide (the CLI's ``show``, a store) does not import all of it: see ``__getattr__``."""


def __getattr__(name: str) -> typing.Any:
    """PEP 562: ``runtime.X`` and ``from runtime import X`` import X's module on first use."""
    where = _WHERE.get(name)
    if where is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(where), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
