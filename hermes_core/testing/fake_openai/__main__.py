"""Run the fake OpenAI server standalone, to test any agent loop against it.

::

    python -m hermes_core.testing.fake_openai --port 8099 --script replies.json

prints ``listening on http://127.0.0.1:8099/v1`` and serves until SIGINT or
SIGTERM; then every validation issue seen (a request the official ``openai``
package would not send, for example) is printed to stderr and the exit status
is 1 when there was any.

The script is JSON, per endpoint (default ``chat.completions``)::

    {"chat.completions": {
        "queue": [{"kind": "reply", "tool_calls": [{"name": "bash", "arguments": {"cmd": "ls"}}]}],
        "rules": [{"last_role": "tool", "reply": {"kind": "reply", "text": "done"}}],
        "default": {"kind": "reply", "text": "ok"}}}

``queue`` answers the first requests in order, then ``rules`` (first match on
the request's last message), then ``default``.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import threading
from pathlib import Path
from typing import Any

from pydantic import TypeAdapter

from .behaviours import _ENDPOINTS, Behaviour, Rule, Rules
from .server import FakeOpenAIServer

_BEHAVIOUR: TypeAdapter[Any] = TypeAdapter(Behaviour)


def load_script(server: FakeOpenAIServer, script: dict[str, Any]) -> None:
    """Queue, rules and default behaviours from a JSON document (see the module docstring)."""
    for endpoint, spec in script.items():
        if endpoint not in _ENDPOINTS:
            raise ValueError(f"script: unknown endpoint {endpoint!r}; expected one of {_ENDPOINTS}")
        if not isinstance(spec, dict):
            raise ValueError(f"script: {endpoint} must be an object, got {type(spec).__name__}")
        unknown = set(spec) - {"queue", "rules", "default"}
        if unknown:
            raise ValueError(f"script: {endpoint} has unknown keys {sorted(unknown)}")
        default = _BEHAVIOUR.validate_python(spec["default"]) if "default" in spec else None
        rules = [Rule.model_validate(rule) for rule in spec.get("rules", [])]
        if rules:
            server.set_default(endpoint, Rules(rules, default))
        elif default is not None:
            server.set_default(endpoint, default)
        server.script(endpoint, *(_BEHAVIOUR.validate_python(b) for b in spec.get("queue", [])))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m hermes_core.testing.fake_openai")
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on")
    parser.add_argument("--port", type=int, default=0, help="port (0: an ephemeral one)")
    parser.add_argument("--script", type=Path, help="JSON file of scripted replies")
    parser.add_argument("--api-key", help="require 'Authorization: Bearer KEY'")
    parser.add_argument(
        "--chars-per-token", type=float, default=4.0, help="request characters per usage token"
    )
    args = parser.parse_args(argv)
    server = FakeOpenAIServer(
        api_key=args.api_key,
        host=args.host,
        port=args.port,
        chars_per_token=args.chars_per_token,
        check_on_exit=False,
    )
    if args.script is not None:
        try:
            load_script(server, json.loads(args.script.read_text(encoding="utf-8")))
        except (OSError, ValueError) as exc:
            parser.error(f"--script {args.script}: {exc}")
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    with server:
        print(f"listening on {server.base_url}", flush=True)
        stop.wait()
    for issue in server.issues:
        print(f"fake-openai: {issue}", file=sys.stderr)
    return 1 if server.issues else 0


if __name__ == "__main__":
    sys.exit(main())
