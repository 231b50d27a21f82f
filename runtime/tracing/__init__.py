"""OpenTelemetry spans of drives, model requests and tool calls, and what durability did in them.

Only the OpenTelemetry API is used: with no tracer provider set every span is a no-op and no
attribute is built. Span and attribute names follow the GenAI semantic conventions where they
apply (``gen_ai.*``); what only bide knows is under ``bide.*``. See ``docs/observability.md``.
"""

# Public: TRACE_FIELD, add_trace_ids, configure, trace_headers (``__all__``). The rest are the
# hooks the runtime calls as ``tracing.<hook>(...)`` (not for applications).
from runtime.tracing._core import NO_SPAN as NO_SPAN
from runtime.tracing._core import TRACE_FIELD, add_trace_ids, configure, trace_headers
from runtime.tracing._core import now_ns as now_ns
from runtime.tracing.calls import (
    approval_decided as approval_decided,
)
from runtime.tracing.calls import (
    call_ended as call_ended,
)
from runtime.tracing.calls import (
    marker_written as marker_written,
)
from runtime.tracing.calls import (
    recorded as recorded,
)
from runtime.tracing.calls import (
    resolved as resolved,
)
from runtime.tracing.calls import (
    tool_call as tool_call,
)
from runtime.tracing.calls import (
    tool_retry as tool_retry,
)
from runtime.tracing.runs import (
    answered as answered,
)
from runtime.tracing.runs import (
    chat as chat,
)
from runtime.tracing.runs import (
    drive as drive,
)
from runtime.tracing.runs import (
    drive_input as drive_input,
)
from runtime.tracing.runs import (
    finished as finished,
)
from runtime.tracing.runs import (
    journaled_context as journaled_context,
)
from runtime.tracing.runs import (
    model_retry as model_retry,
)
from runtime.tracing.runs import (
    resumed as resumed,
)
from runtime.tracing.runs import (
    stopped as stopped,
)

__all__ = ["TRACE_FIELD", "add_trace_ids", "configure", "trace_headers"]
