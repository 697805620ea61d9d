"""Per-session bookkeeping of the compressor: usage seen, cooldown, circuit breaker.

* **Cooldown** - every summary failure (aborting or not) starts a cooldown of
  ``cooldown_seconds * 2 ** (failures - 1)``, capped at
  ``max_cooldown_seconds``, where ``failures`` counts consecutive failed
  compressions; a compression whose summary succeeds resets it. Automatic
  compressions are skipped while it runs; a manual one bypasses it.
* **Circuit breaker** - a compression is *ineffective* when it saves less than
  ``min_savings_ratio`` of the tokens (or aborts because the result would not
  be smaller). After ``breaker_after`` ineffective ones in a row the breaker
  opens and automatic compressions are skipped; an effective compression
  (manual ones included) closes it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from hermes_hookspecs import EngineStatus

from .settings import CompressorSettings


@dataclass
class SessionState:
    """What the engine remembers about one session."""

    last_prompt_tokens: int = 0
    last_tokens_before: int = 0
    last_tokens_after: int = 0
    compressions: int = 0
    failures: int = 0
    consecutive_failures: int = 0
    cooldown_until: float | None = None
    ineffective_streak: int = 0
    circuit_open: bool = False
    last_status: str = ""
    last_reason: str = ""
    last_summarizer: str = ""
    last_fallback_used: bool = False
    last_summary_usage: dict[str, Any] = field(default_factory=dict)

    def in_cooldown(self, now: float) -> bool:
        return self.cooldown_until is not None and now < self.cooldown_until

    def record_summary_failure(self, now: float, settings: CompressorSettings) -> float:
        """Count a failed summary and start the (growing) cooldown; returns its length."""
        self.failures += 1
        self.consecutive_failures += 1
        seconds = float(settings.cooldown_seconds) * (2 ** (self.consecutive_failures - 1))
        seconds = min(seconds, float(settings.max_cooldown_seconds))
        self.cooldown_until = now + seconds
        return float(seconds)

    def record_summary_success(self) -> None:
        self.consecutive_failures = 0
        self.cooldown_until = None

    def record_effect(self, before: int, after: int, settings: CompressorSettings) -> bool:
        """Update the breaker with one compression's savings; returns True when effective."""
        saved = (before - after) / before if before > 0 else 0.0
        effective = after < before and saved >= settings.min_savings_ratio
        if effective:
            self.ineffective_streak = 0
            self.circuit_open = False
        else:
            self.ineffective_streak += 1
            if self.ineffective_streak >= settings.breaker_after:
                self.circuit_open = True
        return effective

    def status(self, engine: str, threshold_tokens: int) -> EngineStatus:
        return EngineStatus(
            engine=engine,
            threshold_tokens=threshold_tokens,
            last_prompt_tokens=self.last_prompt_tokens,
            last_tokens_before=self.last_tokens_before,
            last_tokens_after=self.last_tokens_after,
            compressions=self.compressions,
            failures=self.failures,
            cooldown_until=self.cooldown_until,
            circuit_open=self.circuit_open,
            detail={
                "consecutive_failures": self.consecutive_failures,
                "ineffective_streak": self.ineffective_streak,
                "last_status": self.last_status,
                "last_reason": self.last_reason,
                "last_summarizer": self.last_summarizer,
                "last_fallback_used": self.last_fallback_used,
                "last_savings": self.last_tokens_before - self.last_tokens_after,
                "last_summary_usage": dict(self.last_summary_usage),
            },
        )
