"""A child process of the end-to-end suite: the docs/runtime.md loop, driven over stdin.

Commands, one per line, each answered with one line on stdout:

* ``open SESSION_ID``: open the session (kept for the next commands: a handle
  that may go stale when another process rotates the session);
* ``turn TEXT``: run ``agent_turn`` once; answers ``<session id>\\t<reply text>``;
* ``hold TEXT``: run ``agent_turn`` whose tools never return (answers ``holding``
  once the turn's lease is held and the model asked for tools);
* ``pause TEXT``: like ``hold``, but the tools return after half a second; then
  answers with the name of the exception the turn ended with (or ``committed``);
* ``quit``.
"""

from __future__ import annotations

import sys
import time

from e2e_support import docs_loop
from openai import OpenAI

from hermes_core import Hermes


def main() -> None:
    loop = docs_loop(OpenAI())
    hermes = Hermes.from_config()
    session = None
    for line in sys.stdin:
        command, _, arg = line.rstrip("\n").partition(" ")
        if command == "open":
            session = hermes.open_session(arg)
            print(session.id, flush=True)
        elif command == "turn":
            assert session is not None
            reply = loop["agent_turn"](session, arg)
            print(f"{session.id}\t{reply}", flush=True)
        elif command == "hold":
            assert session is not None

            def never(call: object) -> str:
                print("holding", flush=True)
                time.sleep(3600)
                return "unreachable"

            loop["run_tool"] = never  # agent_turn's globals are this namespace
            loop["agent_turn"](session, arg)
        elif command == "pause":
            assert session is not None

            def slow(call: object) -> str:
                print("holding", flush=True)
                time.sleep(0.5)
                return "late"

            loop["run_tool"] = slow
            try:
                loop["agent_turn"](session, arg)
                print("committed", flush=True)
            except Exception as exc:
                print(type(exc).__name__, flush=True)
        elif command == "quit":
            break
    hermes.close()


if __name__ == "__main__":
    main()
