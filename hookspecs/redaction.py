"""Redaction rules: what is scrubbed before text leaves for a memory provider."""

from __future__ import annotations

import re

from pydantic import BaseModel, ConfigDict, field_validator, model_validator


class RedactionRule(BaseModel):
    """A named regular expression and its replacement (``\\g<1>`` style groups allowed)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    #: names the rule in reports
    name: str
    #: a Python regular expression
    pattern: str
    #: what each match becomes
    replacement: str = "[REDACTED]"

    @field_validator("pattern")
    @classmethod
    def _compiles(cls, value: str) -> str:
        try:
            re.compile(value)
        except re.error as exc:
            raise ValueError(f"pattern does not compile: {exc}") from None
        return value

    @model_validator(mode="after")
    def _replacement_fits(self) -> RedactionRule:
        # a group the pattern lacks (``\\2``) or a bad escape fails when the rule is
        # made, not on the first text that needs redacting
        try:
            re.compile(self.pattern).sub(self.replacement, "")
        except (re.error, IndexError) as exc:
            raise ValueError(
                f"replacement {self.replacement!r} does not fit the pattern: {exc}"
            ) from None
        return self
