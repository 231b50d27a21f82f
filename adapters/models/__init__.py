"""Model providers behind bide's ``Model`` protocol.

Each provider lives in its own module so that only the SDK you use must be installed:
``adapters.models.openai`` (``pip install 'bide[openai]'``) and ``adapters.models.anthropic``
(``pip install 'bide[anthropic]'``). Both classify failures alike:

    what happened                                         ModelError
    HTTP 408, 425, 429, any 5xx (incl. 529 overloaded)    retryable, status_code, retry_after
    any other HTTP 4xx (400, 401, 403, 404, 413, 422...)  not retryable, status_code
    the server's ``x-should-retry: true|false`` header    overrides the two rows above
    connection refused / reset / dropped mid-stream       retryable
    silent for longer than ``timeout``; ``total_timeout`` retryable
    stream ended cleanly but before the finish marker     retryable
    error event inside a 200 stream                       retryable if overloaded/rate/server
    tool arguments not JSON, or not a JSON object         not retryable (the model broke protocol)
    complete non-streamed answer with no finish reason    not retryable

Every turn is bounded: ``timeout`` (default 60 s) bounds silence, ``total_timeout`` (default
600 s) the whole turn, keep-alives and all; ``total_timeout=None`` lifts the second bound.
Whatever the row, nothing of the failed request is returned as a turn. Retrying is the agent
loop's job (``Agent(model_retry=RetryPolicy(...))``, see ``runtime.retry``).
"""

__all__: list[str] = []
