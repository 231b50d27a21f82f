"""bide: durable AI agents whose side effects fire at most once, across crashes."""

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
from runtime.messages import AssistantTurn, Message, ToolCall, ToolResultMessage, Usage, UserMessage
from runtime.model import Model
from runtime.tools import FunctionTool, Safety, Tool, ToolContext, ToolSpec, tool

__version__ = "0.1.0"

__all__ = [
    "ApprovalPolicy",
    "AssistantTurn",
    "BideError",
    "BudgetError",
    "ConfigError",
    "ConflictError",
    "FormatError",
    "FunctionTool",
    "Message",
    "Model",
    "ModelError",
    "ProtocolError",
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
    "__version__",
    "single_approval",
    "tool",
]
