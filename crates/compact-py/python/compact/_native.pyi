"""Type stubs of the native half of `compact` (import `compact`, not this)."""

from collections.abc import Awaitable, Mapping, Sequence
from os import PathLike
from typing import Any, Literal

Format = Literal["auto", "chat", "responses", "anthropic"]
Message = dict[str, Any]
# A number (input tokens), or the provider's usage object: a dict (its cache details nested,
# `prompt_tokens_details`, `cache_creation`) or the SDK's pydantic model.
Usage = int | Mapping[str, int | Mapping[str, int | None] | None] | object

__version__: str

class Outcome:
    """What `preflight` returns: the messages to send and the report."""

    @property
    def messages(self) -> list[Message]:
        """The history to send to the model: provider-clean dicts (no `meta`,
        no `compacted`) unless `keep_meta=True`. Items compaction did not
        change are the objects that were passed in."""

    @property
    def report(self) -> dict[str, Any]:
        """What the call did: `triggered`, `reason`, `tokens_before`,
        `tokens_after`, `tiers`, `summary_version`, ... (docs/integrations.md)."""

    @property
    def tools(self) -> list[dict[str, Any]] | None:
        """The tools to send when the preflight changed them (the caller's and
        `compact_recall`, with `recall.advertise`); `None` when unchanged."""

class CompactManager:
    """Compacts an agent's history before each model call.

    `config` is a dict of configuration keys (docs/configuration.md);
    `config_file` a YAML file. Precedence, lowest first: defaults,
    `config_file`, `COMPACT_*` environment variables, `config`. Raises
    `ConfigError` naming the field at fault. One manager serves any number of
    sessions, threads and asyncio tasks; the GIL is released while compacting.
    """

    def __init__(
        self,
        config: Mapping[str, Any] | None = None,
        *,
        config_file: str | PathLike[str] | None = None,
    ) -> None: ...
    @property
    def config(self) -> dict[str, Any]:
        """The effective configuration."""
    @property
    def model(self) -> str:
        """The model budgeted for."""
    @property
    def max_tokens(self) -> int:
        """The model's context window in tokens."""
    def preflight(
        self,
        session_id: str,
        messages: Sequence[Message],
        tools: Sequence[Mapping[str, Any]] | None = None,
        *,
        usage: Usage | None = None,
        force: bool = False,
        format: Format = "auto",
        keep_meta: bool = False,
    ) -> Outcome:
        """Estimates, decides and, when the history is too big, compacts it.

        Raises `InvalidInput` (with `.path`) or `InsufficientBudget`."""
    def apreflight(
        self,
        session_id: str,
        messages: Sequence[Message],
        tools: Sequence[Mapping[str, Any]] | None = None,
        *,
        usage: Usage | None = None,
        force: bool = False,
        format: Format = "auto",
        keep_meta: bool = False,
    ) -> Awaitable[Outcome]:
        """`preflight` off the event loop and without the GIL."""
    def manual_compact(
        self,
        session_id: str,
        messages: Sequence[Message],
        tools: Sequence[Mapping[str, Any]] | None = None,
        *,
        note: str | None = None,
        usage: Usage | None = None,
        format: Format = "auto",
        keep_meta: bool = False,
    ) -> Outcome:
        """Compacts now, whatever the trigger says."""
    def amanual_compact(
        self,
        session_id: str,
        messages: Sequence[Message],
        tools: Sequence[Mapping[str, Any]] | None = None,
        *,
        note: str | None = None,
        usage: Usage | None = None,
        format: Format = "auto",
        keep_meta: bool = False,
    ) -> Awaitable[Outcome]:
        """`manual_compact` as an awaitable."""
    def on_context_overflow(
        self,
        session_id: str,
        messages: Sequence[Message],
        error: str | BaseException,
        tools: Sequence[Mapping[str, Any]] | None = None,
        *,
        usage: Usage | None = None,
        format: Format = "auto",
        keep_meta: bool = False,
    ) -> Outcome:
        """The reactive path after a provider's context-length error: compacts
        to `policy.reactive_target_pct`; returns messages for one retry."""
    def aon_context_overflow(
        self,
        session_id: str,
        messages: Sequence[Message],
        error: str | BaseException,
        tools: Sequence[Mapping[str, Any]] | None = None,
        *,
        usage: Usage | None = None,
        format: Format = "auto",
        keep_meta: bool = False,
    ) -> Awaitable[Outcome]:
        """`on_context_overflow` as an awaitable."""
    def estimate(
        self,
        messages: Sequence[Message],
        tools: Sequence[Mapping[str, Any]] | None = None,
        *,
        usage: Usage | None = None,
        format: Format = "auto",
    ) -> dict[str, Any]:
        """The token estimate (the dict `compact estimate` prints)."""
    def status(self, session_id: str) -> dict[str, Any]:
        """What the manager remembers about a session now (redacted)."""
    def astatus(self, session_id: str) -> Awaitable[dict[str, Any]]:
        """`status` as an awaitable."""
    def delete_session(self, session_id: str) -> bool:
        """Forgets a session (here and in the session store)."""
    def adelete_session(self, session_id: str) -> Awaitable[bool]:
        """`delete_session` as an awaitable."""
    def recall(
        self,
        session_id: str,
        query: str | None = None,
        *,
        id: str | None = None,
        limit: int | None = None,
        offset: int | None = None,
    ) -> dict[str, Any]:
        """What compaction took out of the session's context (`recall.enabled`):
        ranked `hits` for a `query`, the `entry` for an `id`."""
    def arecall(
        self,
        session_id: str,
        query: str | None = None,
        *,
        id: str | None = None,
        limit: int | None = None,
        offset: int | None = None,
    ) -> Awaitable[dict[str, Any]]:
        """`recall` as an awaitable."""
    def recall_tool_call(self, session_id: str, arguments: str | Mapping[str, Any]) -> str:
        """Runs one `compact_recall` tool call; the tool result's text."""
    def arecall_tool_call(self, session_id: str, arguments: str | Mapping[str, Any]) -> Awaitable[str]:
        """`recall_tool_call` as an awaitable."""
    @staticmethod
    def recall_tool_definition() -> dict[str, Any]:
        """The `compact_recall` tool: `name`, `description`, `parameters` (JSON schema)."""
    def flush(self, timeout: float = 5.0) -> bool:
        """Waits until every event emitted so far reached the exporters."""
    def close(self, timeout: float = 5.0) -> None:
        """Delivers what is queued and stops the event exporters."""
    def __enter__(self) -> CompactManager: ...
    def __exit__(self, *exc: object) -> bool: ...

def _at_exit() -> None: ...
