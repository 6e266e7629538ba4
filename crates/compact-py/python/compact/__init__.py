"""compact: exact, tool-pair-safe context compaction for LLM agents, in-process.

    import compact

    manager = compact.CompactManager({"model": "gpt-4o"})
    outcome = manager.preflight("session-1", messages, tools)
    response = client.chat.completions.create(model="gpt-4o", messages=outcome.messages)

`CompactManager` counts tokens exactly, and when the history no longer fits
caps tool outputs, clears old tool I/O, folds old turns into one rolling
summary, never separating a tool call from its result. It is the Rust core
of the `compact` CLI and server, with the same configuration
(docs/configuration.md), events and archive.

Adapters (optional imports, the core needs neither framework):
`compact.agents` for the OpenAI Agents SDK, `compact.langchain` for
LangChain v1 agents.
"""

from __future__ import annotations

import atexit

from ._errors import CompactError, ConfigError, InsufficientBudget, InvalidInput
from ._native import CompactManager, Outcome, __version__, _at_exit

# Before the interpreter finalizes: async calls in flight finish with Python,
# and events still queued are delivered (a few seconds at most per manager),
# as the CLI does before it exits.
atexit.register(_at_exit)

__all__ = [
    "CompactError",
    "CompactManager",
    "ConfigError",
    "InsufficientBudget",
    "InvalidInput",
    "Outcome",
    "__version__",
]
