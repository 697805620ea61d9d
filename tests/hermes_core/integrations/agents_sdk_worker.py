"""Child-process program for the Agents SDK session tests.

Run as ``python agents_sdk_worker.py CONFIG_JSON``; CONFIG_JSON holds the
settings mapping (``settings``), the session id, the fake server's base URL,
the user input, ``lease_wait`` and ``lease_ttl``. One ``Runner.run`` on a
:class:`~hermes_core.integrations.agents_sdk.HermesSession` under its lease;
prints one JSON line: the final output and the items the session holds after.

Not a test module: the tests start it as a real process.
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

from agents import Agent, OpenAIChatCompletionsModel, Runner, function_tool, set_tracing_disabled
from openai import AsyncOpenAI

from hermes_core.config import settings_from
from hermes_core.host import Hermes
from hermes_core.integrations.agents_sdk import HermesSession


@function_tool
def lookup(city: str) -> str:
    """Look up the weather of a city."""
    return f"sunny in {city}"


def make_agent(base_url: str, extra_tools: tuple[Any, ...] = ()) -> tuple[Agent[Any], AsyncOpenAI]:
    """The test agent and its client (close the client in the loop that used it)."""
    client = AsyncOpenAI(base_url=base_url, api_key="test-key", max_retries=0)
    model = OpenAIChatCompletionsModel(model="gpt-4o-mini", openai_client=client)
    tools = [lookup, *extra_tools]
    agent = Agent(name="helper", instructions="Answer briefly.", model=model, tools=tools)
    return agent, client


async def run(config: dict[str, Any]) -> dict[str, Any]:
    set_tracing_disabled(True)
    hermes = Hermes(settings_from(config["settings"]))
    agent, client = make_agent(config["base_url"])
    try:
        session = HermesSession(config["session_id"], hermes)
        async with session.lease(wait=config.get("lease_wait"), ttl=config.get("lease_ttl")):
            result = await Runner.run(agent, config["input"], session=session)
        return {"final": result.final_output, "items": await session.get_items()}
    finally:
        await client.close()
        hermes.close()


def main() -> None:
    config = json.loads(sys.argv[1])
    try:
        out = asyncio.run(run(config))
    except Exception as exc:
        print(json.dumps({"error": f"{type(exc).__name__}: {exc}"}))
        sys.exit(3)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
