"""OAuth tokens kept in a file, so a restarted host does not authorize again from scratch.

``FileTokenStorage`` is the SDK's ``TokenStorage`` on one JSON file holding the tokens and the
registered client. The file is the host's secret: created with mode 0600, refused (never read)
when anyone but its owner may read or write it, and replaced atomically on every write (a
temporary file in the same directory, flushed to disk, then renamed over it), so a crash leaves
the old content or the new, never a mix. Errors name the file, never its content.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import stat
import tempfile
from pathlib import Path
from typing import Any

import pydantic
from mcp.client.auth import TokenStorage
from mcp.shared.auth import OAuthClientInformationFull, OAuthToken

from runtime.errors import ConfigError

__all__ = ["FileTokenStorage"]

_TOKENS = "tokens"
_CLIENT = "client_info"


class FileTokenStorage(TokenStorage):
    """Tokens and the registered client in the JSON file at ``path`` (created on first write,
    with its directory, mode 0600). One storage per server: two servers sharing a file would
    overwrite each other's tokens."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self._lock = asyncio.Lock()

    async def get_tokens(self) -> OAuthToken | None:
        saved = (await asyncio.to_thread(self._read)).get(_TOKENS)
        return None if saved is None else self._parse(OAuthToken, saved, _TOKENS)

    async def set_tokens(self, tokens: OAuthToken) -> None:
        await self._update(_TOKENS, tokens.model_dump(mode="json", exclude_none=True))

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        saved = (await asyncio.to_thread(self._read)).get(_CLIENT)
        return None if saved is None else self._parse(OAuthClientInformationFull, saved, _CLIENT)

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        await self._update(_CLIENT, client_info.model_dump(mode="json", exclude_none=True))

    def __repr__(self) -> str:
        return f"<FileTokenStorage {str(self.path)!r}>"  # never the tokens

    async def _update(self, field: str, value: dict[str, Any]) -> None:
        async with self._lock:  # one read-modify-write at a time in this process
            await asyncio.to_thread(self._write_field, field, value)

    def _write_field(self, field: str, value: dict[str, Any]) -> None:
        saved = self._read()
        saved[field] = value
        self._write(saved)

    def _read(self) -> dict[str, Any]:
        try:
            fd = os.open(self.path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
        except FileNotFoundError:
            return {}
        except OSError as exc:
            raise ConfigError(
                f"token file {str(self.path)!r} cannot be read: {exc.strerror}"
            ) from None
        with os.fdopen(fd, "rb") as f:
            mode = os.fstat(f.fileno()).st_mode
            if not stat.S_ISREG(mode):
                raise ConfigError(f"token file {str(self.path)!r} is not a regular file")
            if mode & 0o077:
                raise ConfigError(
                    f"token file {str(self.path)!r} may be read or written by others (mode "
                    f"{stat.S_IMODE(mode):o}); it holds credentials: chmod 600 it"
                )
            body = f.read()
        try:
            saved = json.loads(body)
        except ValueError:
            saved = None
        if not isinstance(saved, dict):
            raise ConfigError(
                f"token file {str(self.path)!r} is not a JSON object (content not shown)"
            )
        return saved

    def _write(self, saved: dict[str, Any]) -> None:
        directory = self.path.parent
        directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        # mkstemp creates the file 0600: the tokens are never readable by others, not even
        # for the moment between writing and renaming.
        fd, temporary = tempfile.mkstemp(dir=directory, prefix=f".{self.path.name}.", suffix=".tmp")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                json.dump(saved, f)
                f.flush()
                os.fsync(f.fileno())
            os.replace(temporary, self.path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(temporary)
            raise
        _sync_directory(directory)

    def _parse(self, model: Any, saved: object, field: str) -> Any:
        try:
            return model.model_validate(saved)
        except pydantic.ValidationError:
            raise ConfigError(
                f"token file {str(self.path)!r}: {field} is not what was written there "
                "(content not shown); delete the file to authorize again"
            ) from None


def _sync_directory(directory: Path) -> None:
    """Make the rename durable (POSIX); a platform that cannot open a directory skips it."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
