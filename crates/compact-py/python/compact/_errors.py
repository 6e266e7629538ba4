"""The exceptions of the `compact` package (raised by the native module)."""

from __future__ import annotations


class CompactError(Exception):
    """Base of every error `compact` raises.

    `kind` names what failed: `"State"` (the session store), `"Backend"` (a
    configured backend such as S3 could not be reached), `"Internal"`, or the
    subclass name.
    """

    def __init__(self, message: str, *, kind: str = "CompactError") -> None:
        super().__init__(message)
        self.message = message
        self.kind = kind

    def __reduce__(self):  # pickling keeps the attributes
        return (_rebuild, (type(self), self.args, self.__dict__))


class InvalidInput(CompactError, ValueError):
    """The messages (or another argument) are not what `compact` accepts.

    `path` is the JSON path of the offending value, rooted at the call's
    arguments: `$.messages[3].tool_call_id`, `$.tools[0]`, `$.usage`,
    `$.session_id`.
    """

    def __init__(self, message: str, *, path: str = "$") -> None:
        super().__init__(f"{path}: {message}", kind="InvalidInput")
        self.message = message
        self.path = path


class ConfigError(CompactError, ValueError):
    """The configuration cannot be used.

    `field` is the dotted path of the first key at fault
    (`policy.trigger_pct`), or None when the problem is the file itself
    (unreadable, not YAML). `errors` lists every problem as
    `(field, message)` pairs.
    """

    def __init__(
        self,
        message: str,
        *,
        field: str | None = None,
        errors: list[tuple[str, str]] | None = None,
    ) -> None:
        super().__init__(message, kind="ConfigError")
        self.field = field
        self.errors = list(errors or [])


class InsufficientBudget(CompactError):
    """What may never be dropped (pinned messages, the task, the latest user message
    and the last round of tool calls) does not fit the model's budget. `guidance`
    says what to change."""

    def __init__(
        self,
        message: str,
        *,
        pinned_tokens: int = 0,
        tail_tokens: int = 0,
        fixed_tokens: int = 0,
        budget: int = 0,
        max_tokens: int = 0,
        guidance: str = "",
    ) -> None:
        super().__init__(message, kind="InsufficientBudget")
        self.pinned_tokens = pinned_tokens
        self.tail_tokens = tail_tokens
        self.fixed_tokens = fixed_tokens
        self.budget = budget
        self.max_tokens = max_tokens
        self.guidance = guidance


def _rebuild(cls, args, state):
    error = cls.__new__(cls)
    Exception.__init__(error, *args)
    error.__dict__.update(state)
    return error
