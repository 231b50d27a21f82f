"""bide: durable AI agents whose side effects fire at most once, across crashes."""

from runtime.agent import Agent
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
    RunBusy,
    SchemaError,
    StorageError,
    ToolArgumentsError,
    ToolError,
    ToolOutcomeUnknown,
    UnknownToolError,
)
from runtime.functions import FunctionTool, tool
from runtime.journal import Decided, Journal, Resolution, RunPage, RunRow, Store
from runtime.messages import AssistantTurn, Message, ToolCall, ToolResultMessage, Usage, UserMessage
from runtime.model import Model
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
    "Owner",
    "OwnershipError",
    "ProtocolError",
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
    "UserMessage",
    "Waiting",
    "Worker",
    "__version__",
    "single_approval",
    "tool",
]
