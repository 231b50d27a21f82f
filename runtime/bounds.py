"""A drive's first and last records: the run opened (created, its start record written, or
replayed to resume), submitted, or ended (its end record and the lease's release in one
transaction). ``loop.RunDrive`` is a ``RunBounds``."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from typing import Any

from runtime import records as R
from runtime import tracing
from runtime.ahead import WriteAhead
from runtime.drive import DrivenAgent
from runtime.errors import ConfigError
from runtime.limits import Outer
from runtime.logs import get_logger
from runtime.messages import Message
from runtime.redact import clean
from runtime.result import RunResult, RunStatus
from runtime.sessions import Opening, pinned_prefix
from runtime.tools import KEY_SCHEME, ToolSpec

__all__ = ["RunBounds"]

log = get_logger("runtime.agent")  # the drive's logger: operators filter drives by it


class RunBounds(WriteAhead):
    """Opening and ending a run, for ``loop.RunDrive``."""

    agent: DrivenAgent
    key_scheme: int
    session: Opening | None
    prefix: Sequence[Message]
    parent: Mapping[str, str] | None = None
    """For a child run (``runtime.children``): its parent run and call, journaled at start."""
    any_agent: bool = False
    """Whether this drive may resume a run another agent (by name) started: an agent built
    from the run's own journaled spec, or an operator's deliberate override."""
    outer: tuple[Outer, ...] = ()
    """For a child run: the usage limits of the runs above it, with what the rest of their
    trees spent (``runtime.limits``)."""

    # --- opening ---------------------------------------------------------------------------

    async def _submitted(self, created: bool) -> RunResult[Any]:
        if self.state.end is not None:
            return self._ended()
        if created:
            await self.store.update_index(
                self.run_id, unless=R.END, epoch=self.holding.epoch, status="submitted"
            )
            log.info("run_submitted")
            return self._result(RunStatus.SUBMITTED)
        status = self.state.status()
        known = {s.value for s in RunStatus}
        return self._result(RunStatus(status) if status in known else RunStatus.RUNNING)

    async def _open(self, input: str | None, spec: str | None) -> bool:
        """Load the run (creating it if ``input`` is given); True if it was created."""
        store, run_id = self.store, self.run_id
        if input is None:
            created = False
        else:
            created = await store.create_run(
                run_id, agent=self.agent.name, epoch=self.holding.epoch
            )
        if not created:
            await self._replay()
        if self.state.start is None:
            if input is None:
                raise ConfigError(
                    f"run {run_id!r} never started (it stopped before its input was journaled): "
                    "run it again with its input",
                    run_id=run_id,
                )
            await self.append(
                R.START,
                R.START,
                {
                    "input": input,
                    "agent": self.agent.name,
                    "spec": spec,
                    "settings": {"max_turns": self.agent.max_turns},
                    "tools": _tools_digest(self.agent.specs),
                    "key_scheme": KEY_SCHEME,
                    **({"session": self.session.to_json()} if self.session is not None else {}),
                    **({"parent": dict(self.parent)} if self.parent is not None else {}),
                    **tracing.journaled_context(),
                },
            )
        start = self.state.start or {}
        started_by = start.get("agent")
        if (
            input is None
            and not self.any_agent
            and isinstance(started_by, str)
            and started_by != self.agent.name
        ):
            # Another agent's tools and model would replay this run's calls under its names.
            raise ConfigError(
                f"run {run_id!r} was started by agent {started_by!r}, not {self.agent.name!r}: "
                f"only agent {started_by!r} drives it (an operator may override: python -m "
                "runtime resume RUN_ID --agent MODULE:ATTR)",
                run_id=run_id,
            )
        # Runs started before key schemes were journaled used scheme 1: keep their keys.
        self.key_scheme = int(start.get("key_scheme") or 1)
        if start.get("session") is not None and self.state.end is None:
            self.prefix = await pinned_prefix(
                self.store, start["session"], self.agent.session_history, run_id=run_id
            )
        if input is not None and self.state.input != input:
            raise ConfigError(
                f"run {run_id!r} exists with a different input; a run's input is fixed when it "
                "starts (resume it without an input, or choose a new run id)",
                run_id=run_id,
            )
        tracing.drive_input(str(self.state.input))
        if not created:
            state = self.state
            chunks, settled = (0, 0) if state.history is None else state.history.read
            records = len(state.records) + chunks  # what the drive read to resume
            log.info("run_resumed", records=records, turns=len(state.turns))
            tracing.resumed(
                start,
                records=records,
                turns=len(state.turns),
                replayed=settled + sum(c.result is not None for c in state.calls.values()),
            )
        return created

    # --- ending ----------------------------------------------------------------------------

    async def _end(
        self, status: str, *, output: Any = None, error: str | None = None
    ) -> RunResult[Any]:
        await self.append(
            R.END,
            R.END,
            {"status": status, "output": output, "error": None if error is None else clean(error)},
            index={"status": status, "detail": None},
            release=self.holding.lease is not None,  # one transaction ends the run, frees the lease
        )
        return self._ended()

    def _ended(self) -> RunResult[Any]:
        end = self.state.end
        assert end is not None
        payload = end.payload
        output = recorded = payload.get("output")
        if self.agent.output is not None and recorded is not None:
            output = self.agent.output.load(recorded, run_id=self.run_id)
        return self._result(
            RunStatus(payload.get("status", "failed")),
            output=output,
            output_json=recorded,
            error=payload.get("error"),
        )

    def _result(self, status: RunStatus, **fields: Any) -> RunResult[Any]:
        return RunResult(
            run_id=self.run_id,
            status=status,
            usage=self.state.usage,
            turns=len(self.state.turns),
            **fields,
        )


def _tools_digest(specs: Sequence[ToolSpec]) -> dict[str, Any]:
    """The agent's tools as a run's start record keeps them: how many, and a digest of each
    name with its Safety, so the record stays small however many tools a server lists (each
    call journals the Safety it ran under itself)."""
    listing = sorted([spec.name, spec.safety.value] for spec in specs)
    encoded = json.dumps(listing, separators=(",", ":")).encode()
    return {"count": len(listing), "sha256": hashlib.sha256(encoded).hexdigest()}
