"""The hub's listening task: a notification source that fails is said in one log line, and its
followers are woken to poll the journal instead of waiting on a listener that is gone."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

from runtime.events.hub import Hub
from runtime.testing import capture_events


class Notifying:
    """A store whose commit notifications fail after the first one."""

    def record_wakeups(self) -> AsyncIterator[str | None]:
        async def source() -> AsyncIterator[str | None]:
            yield "r"
            raise OSError("the listening connection is gone for good")

        return source()


async def test_a_failing_notification_source_is_logged_and_its_followers_poll() -> None:
    store = Notifying()
    hub = Hub(store)
    with capture_events() as events:
        follower = hub.subscribe("r")
        for _ in range(100):
            await asyncio.sleep(0.01)
            if not hub.listens:
                break
        assert not hub.listens  # so followers poll the journal (events.live)
        assert follower.wake.is_set()
        await hub.unsubscribe(follower)
    failed = [e for e in events if e["event"] == "events_listener_failed"]
    assert len(failed) == 1 and "gone for good" in failed[0]["error"]
