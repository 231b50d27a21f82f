"""A session's ``Summary`` history (``runtime.sessions``) made by a drive: the earlier messages
before the last ``keep`` replaced by the summary the run journaled of them, the model asked for
it the first time."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from runtime import records as R
from runtime.drive import DrivenAgent
from runtime.messages import Message, UserMessage
from runtime.records import Appended
from runtime.sessions import SUMMARY, Summary, exchanges_of
from runtime.store.protocol import Store

__all__ = ["summarized"]


class SummaryDrive(Protocol):
    """What making a summary needs of its drive."""

    run_id: str
    store: Store

    @property
    def agent(self) -> DrivenAgent: ...

    async def append(
        self,
        key: str,
        kind: str,
        payload: Any,
        *,
        unless: str | None = None,
        index: Mapping[str, Any] | None = None,
        after_end: bool = False,
        release: bool = False,
    ) -> Appended: ...


async def summarized(
    drive: SummaryDrive, summary: Summary, prefix: Sequence[Message]
) -> list[Message]:
    """``prefix`` with its messages before the last ``keep`` replaced by the summary this run
    journaled of them, asking the model for it the first time."""
    exchanges = exchanges_of(prefix)
    if len(exchanges) <= summary.keep:
        return list(prefix)
    cut = len(exchanges) - summary.keep
    older = [m for exchange in exchanges[:cut] for m in exchange]
    kept = [m for exchange in exchanges[cut:] for m in exchange]
    record = await drive.store.get(drive.run_id, SUMMARY)
    if record is None:
        agent = drive.agent
        asked = [*older, UserMessage(summary.instruction)]
        turn = await agent._retrying_model.complete(agent.system_prompt, asked, ())
        payload = {"text": turn.text or "", "covers": cut, "usage": turn.usage.to_json()}
        record = (await drive.append(SUMMARY, SUMMARY, payload, unless=R.CANCEL)).record
        if record is None:  # refused by a cancel request: the drive ends without a turn
            return list(prefix)
    return [UserMessage(summary.preface + str(record.payload.get("text", ""))), *kept]
