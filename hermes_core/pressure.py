"""How full a session's context is: the figures the compression checks read.

The provider's reported input tokens are more exact than the runtime's own
estimate; :class:`ContextPressure` keeps the difference between the two for
the last answered request and carries it forward, and remembers when a
response pushed the session past its threshold.
"""

from __future__ import annotations


class ContextPressure:
    """The compression trigger's state for one session (owned by its Session)."""

    def __init__(self) -> None:
        #: tokens of the last request (raised to the provider's count when it reports one)
        self.last_prompt_tokens = 0
        #: a response pushed the session past its threshold: compress at the next check
        self.due = False
        #: reported input tokens minus our estimate of the same request (0 until a usage)
        self.usage_offset = 0

    def measured(self, estimated: int) -> int:
        """``estimated`` corrected by the offset of the last reported usage."""
        return max(0, estimated + self.usage_offset)

    def request_prepared(self, tokens: int) -> int:
        """A request of ``tokens`` was prepared; returns the figure it replaced."""
        before, self.last_prompt_tokens = self.last_prompt_tokens, tokens
        return before

    def request_dropped(self, before: int) -> None:
        """A prepared request got no response: the figure before it holds again."""
        self.last_prompt_tokens = before

    def usage_reported(self, input_tokens: int, estimate: int | None) -> None:
        """The provider counted ``input_tokens`` for a request we estimated at ``estimate``."""
        self.last_prompt_tokens = max(self.last_prompt_tokens, input_tokens)
        if input_tokens > 0 and estimate is not None:
            self.usage_offset = input_tokens - estimate

    def view_replaced(self) -> None:
        """The active view was compacted or rotated: the last usage measured the old one."""
        self.usage_offset = 0
