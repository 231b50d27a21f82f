"""``@tool``: a typed async function as a Tool (``FunctionTool``), its arguments validated by the
function's signature and its output schema read from its return annotation."""

from __future__ import annotations

import dataclasses
import inspect
import typing
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any, overload

from runtime.errors import ConfigError, ToolArgumentsError
from runtime.tools import Safety, ToolContext, ToolSpec

if TYPE_CHECKING:  # pydantic is imported when the first tool is made, not with bide
    import pydantic

__all__ = ["FunctionTool", "tool"]


class FunctionTool:
    """A typed async function as a Tool; made by ``@tool``. Calling it directly still works."""

    def __init__(
        self,
        fn: Callable[..., Awaitable[Any]],
        *,
        name: str | None = None,
        title: str | None = None,
        description: str | None = None,
        safety: Safety = Safety.SIDE_EFFECT,
        timeout: float | None = None,
        approval: Any = None,
        reconcile: Any = None,
        settle: float | None = None,
    ):
        if not inspect.iscoroutinefunction(fn):
            raise ConfigError(f"@tool needs an async function, got {fn!r}")
        self.fn = fn
        self._context_param, self._fields = _parameters(fn)
        # Every part of the spec but its schemas is checked now. The schemas are pydantic's
        # work, the dearest part of a process's start, and a drive that replays a finished run
        # never needs them: they are built when first asked for (`spec`, `call`).
        self.declared = ToolSpec(
            name=name if name is not None else fn.__name__,
            title=title,
            description=description if description is not None else inspect.getdoc(fn) or "",
            safety=safety,
            approval=approval,
            timeout=timeout,
            reconcile=reconcile,
            settle=settle,
        )
        """The tool's spec without its schemas: what an Agent checks when it is built."""
        self._spec: ToolSpec | None = None
        self._arguments_model: type[pydantic.BaseModel] | None = None
        self.__wrapped__ = fn
        self.__doc__ = fn.__doc__
        self.__name__ = fn.__name__

    @property
    def spec(self) -> ToolSpec:
        if self._spec is None:
            self._build()
            assert self._spec is not None
        return self._spec

    def _build(self) -> None:
        import pydantic

        try:
            model = _arguments_model(self.fn.__name__, self._fields)
            input_schema = model.model_json_schema()
        except pydantic.PydanticUserError as exc:
            raise ConfigError(
                f"tool {self.declared.name}: its arguments have no JSON schema: {exc}"
            ) from exc
        input_schema.pop("title", None)
        self._spec = dataclasses.replace(
            self.declared, input_schema=input_schema, output_schema=_output_schema(self.fn)
        )
        self._arguments_model = model

    async def call(self, arguments: Mapping[str, Any], context: ToolContext | None = None) -> Any:
        import pydantic
        import pydantic_core

        if self._arguments_model is None:
            self._build()
            assert self._arguments_model is not None
        try:
            parsed = self._arguments_model.model_validate(dict(arguments))
        except pydantic.ValidationError as exc:
            raise ToolArgumentsError(
                f"arguments for {self.declared.name} do not fit its schema: {_brief(exc)}"
            ) from exc
        kwargs = {name: getattr(parsed, name) for name in type(parsed).model_fields}
        if self._context_param is not None:
            kwargs[self._context_param] = context
        value = await self.fn(**kwargs)
        try:
            return pydantic_core.to_jsonable_python(value)
        except (ValueError, RecursionError):
            # The function ran: its value is returned as it is, for the journal to refuse by
            # name (too deep, not JSON) as a result that cannot be kept, never as a failure
            # that might not have acted.
            return value

    async def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return await self.fn(*args, **kwargs)

    def __repr__(self) -> str:
        return f"<FunctionTool {self.declared.name} {self.declared.safety.value}>"


def _brief(exc: pydantic.ValidationError) -> str:
    parts = []
    for err in exc.errors()[:3]:
        where = ".".join(str(p) for p in err["loc"]) or "arguments"
        parts.append(f"{where}: {err['msg']}")
    return "; ".join(parts)


def _parameters(fn: Callable[..., Any]) -> tuple[str | None, dict[str, Any]]:
    """The parameter that takes the ToolContext, if any, and the others as pydantic fields."""
    hints = typing.get_type_hints(fn, include_extras=True)
    fields: dict[str, Any] = {}
    context_param = None
    for param in inspect.signature(fn).parameters.values():
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD, param.POSITIONAL_ONLY):
            raise ConfigError(
                f"tool {fn.__name__}: parameter {param.name} must be a plain or keyword parameter"
            )
        annotation = hints.get(param.name, Any)
        if _is_context(annotation):
            context_param = param.name
            continue
        default = ... if param.default is param.empty else param.default
        fields[param.name] = (annotation, default)
    return context_param, fields


def _arguments_model(name: str, fields: dict[str, Any]) -> type[pydantic.BaseModel]:
    import pydantic

    return pydantic.create_model(
        f"{name}_arguments",
        __config__=pydantic.ConfigDict(extra="forbid", strict=False),
        **fields,
    )


def _is_context(annotation: Any) -> bool:
    if annotation is ToolContext:
        return True
    return any(arg is ToolContext for arg in typing.get_args(annotation))


def _output_schema(fn: Callable[..., Any]) -> dict[str, Any] | None:
    import pydantic

    returns = typing.get_type_hints(fn).get("return")
    if returns is None or returns is Any or returns is type(None):
        return None
    try:
        schema = pydantic.TypeAdapter(returns).json_schema()
    except pydantic.PydanticUserError:
        return None
    return schema if schema.get("type") == "object" else None


@overload
def tool(fn: Callable[..., Awaitable[Any]], /) -> FunctionTool: ...


@overload
def tool(
    *,
    name: str | None = None,
    title: str | None = None,
    description: str | None = None,
    safety: Safety = Safety.SIDE_EFFECT,
    timeout: float | None = None,
    approval: Any = None,
    reconcile: Any = None,
    settle: float | None = None,
) -> Callable[[Callable[..., Awaitable[Any]]], FunctionTool]: ...


def tool(
    fn: Callable[..., Awaitable[Any]] | None = None,
    /,
    *,
    name: str | None = None,
    title: str | None = None,
    description: str | None = None,
    safety: Safety = Safety.SIDE_EFFECT,
    timeout: float | None = None,
    approval: Any = None,
    reconcile: Any = None,
    settle: float | None = None,
) -> FunctionTool | Callable[[Callable[..., Awaitable[Any]]], FunctionTool]:
    """Turn a typed async function into a Tool: ``@tool`` or ``@tool(safety=Safety.READ_ONLY)``.

    The input schema comes from the signature (through pydantic), the description from the
    docstring. A parameter annotated ``ToolContext`` receives the call's run id, call id and
    idempotency key. Without ``safety=`` the tool is a SIDE_EFFECT: it runs at most once.
    ``reconcile=`` names a function that looks its effect up, to settle its halts by itself
    (``runtime.reconcile``); ``settle=`` the seconds the provider may take to apply a request,
    which an *absent* must wait after the attempt's lease ended (without it, an *absent* leaves
    the halt for a person).
    """

    def wrap(f: Callable[..., Awaitable[Any]]) -> FunctionTool:
        return FunctionTool(
            f,
            name=name,
            title=title,
            description=description,
            safety=safety,
            timeout=timeout,
            approval=approval,
            reconcile=reconcile,
            settle=settle,
        )

    return wrap(fn) if fn is not None else wrap
