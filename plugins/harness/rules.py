"""Which texts are harness constructs: a message whose text is ONLY such constructs.

A message counts as harness text when, after removing every known wrapper
block (``<system-reminder>...</system-reminder>``, ``<command-name>...``,
``<environment_context>...``, ...) and every known notice line
(``[Request interrupted by user]``, ``Approved command prefix saved:`` ...),
fewer than :data:`MIN_REAL_CHARS` characters of other text remain. A message
mixing a wrapper with real words is left unmarked: the person's words must
survive. The label names the first construct found.
"""

from __future__ import annotations

import re

MIN_REAL_CHARS = 12

#: (label, pattern of one whole construct), checked in order
BLOCKS: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (label, re.compile(pattern, re.DOTALL))
    for label, pattern in (
        ("claude_code.caveat", r"<local-command-caveat>.*?(?:</local-command-caveat>|\Z)"),
        ("claude_code.system_reminder", r"<system-reminder>.*?(?:</system-reminder>|\Z)"),
        (
            "claude_code.command",
            r"<(command-name|command-message|command-args|local-command-stdout|"
            r"local-command-stderr|bash-input|bash-stdout|bash-stderr)>.*?(?:</\1>|\Z)",
        ),
        ("claude_code.task_notification", r"<task-notification>.*?(?:</task-notification>|\Z)"),
        ("codex.environment_context", r"<environment_context>.*?(?:</environment_context>|\Z)"),
        ("codex.user_instructions", r"<user_instructions>.*?(?:</user_instructions>|\Z)"),
        ("codex.turn_aborted", r"<turn_aborted>.*?(?:</turn_aborted>|\Z)"),
        (
            "codex.developer_notice",
            r"<(permissions instructions|collaboration_mode|approval_policy|"
            r"sandbox_mode)>.*?(?:</\1>|\Z)",
        ),
        ("claude_code.interrupt", r"\[Request interrupted by user[^\]]*\]"),
        (
            "claude_code.compaction_summary",
            r"\AThis session is being continued from a previous conversation.*\Z",
        ),
        ("codex.developer_notice", r"\AApproved command prefix saved:.*\Z"),
        ("transcript.system_note", r"\A\[system note\]\n.*\Z"),
        ("gemini_cli.continue", r"\ASystem: Please continue\.\Z"),
    )
)


def classify(text: str) -> str | None:
    """The label of the harness construct ``text`` consists of, or None."""
    stripped = text.strip()
    if not stripped or stripped[0] not in "<[TAS":
        return None
    first: str | None = None
    rest = stripped
    for label, pattern in BLOCKS:
        rest, count = pattern.subn(" ", rest)
        if count and first is None:
            first = label
    if first is None:
        return None
    return first if len(rest.strip()) < MIN_REAL_CHARS else None
