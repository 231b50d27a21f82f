"""bide: durable AI agents whose side effects fire at most once, across crashes."""

from runtime.agent import Agent
from runtime.approval import ApprovalPolicy, single_approval
from runtime.errors import (
    BideError,
    BudgetError,
    ConfigError,
    ConflictError,
    FormatError,
    ModelError,
    ProtocolError,
    SchemaError,
    StorageError,
    ToolArgumentsError,
    ToolError,
    ToolOutcomeUnknown,
    UnknownToolError,
)
from runtime.journal import Journal, Resolution
from runtime.messages import AssistantTurn, Message, ToolCall, ToolResultMessage, Usage, UserMessage
from runtime.model import Model
from runtime.result import Halt, RunResult, RunStatus, Waiting
from runtime.retry import RetryingModel, RetryPolicy
from runtime.tools import FunctionTool, Safety, Tool, ToolContext, ToolSpec, tool

__version__ = "0.1.0"

__all__ = [
    "Agent",
    "ApprovalPolicy",
    "AssistantTurn",
    "BideError",
    "BudgetError",
    "ConfigError",
    "ConflictError",
    "FormatError",
    "FunctionTool",
    "Halt",
    "Journal",
    "Message",
    "Model",
    "ModelError",
    "ProtocolError",
    "Resolution",
    "RetryPolicy",
    "RetryingModel",
    "RunResult",
    "RunStatus",
    "Safety",
    "SchemaError",
    "StorageError",
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
    "__version__",
    "single_approval",
    "tool",
]
