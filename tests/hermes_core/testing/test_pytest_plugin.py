"""The fixtures hermes-core's pytest plugin gives plugin authors."""

from __future__ import annotations

from typing import Any

import httpx

from hermes_hookspecs import hookimpl


class Greeter:
    @hookimpl
    def pre_llm_call(self) -> str:
        return "greetings from a test plugin"


def test_hermes_factory_registers_only_named_plugins(hermes_factory: Any) -> None:
    from hermes_plugin_sqlite_store import plugin as sqlite_plugin

    host = hermes_factory(sqlite_plugin, Greeter())
    names = {name for name, plugin in host.pm.list_name_plugin() if plugin is not None}
    assert not any(name == "compressor" for name in names)  # autoload is off
    session = host.new_session()
    with session.turn() as turn:
        request = turn.prepare("hi")
        assert "greetings from a test plugin" in request.messages[-1]["content"]
        turn.abort()


def test_fake_openai_fixture_serves_chat_completions(fake_openai: Any) -> None:
    body = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "ping"}]}
    reply = httpx.post(f"{fake_openai.base_url}/chat/completions", json=body, timeout=10)
    assert reply.status_code == 200
    assert reply.json()["choices"][0]["message"]["role"] == "assistant"


def test_hermes_factory_needs_only_the_plugin_under_test(hermes_factory: Any) -> None:
    # no store and no token counter passed: the factory adds the two defaults a host needs
    host = hermes_factory(Greeter())
    names = {name for name, plugin in host.pm.list_name_plugin() if plugin is not None}
    assert {"sqlite_store", "tiktoken_counter"} <= names
    assert host.tokens().exact is True
    session = host.new_session()
    with session.turn() as turn:
        assert "greetings from a test plugin" in turn.prepare("hi").messages[-1]["content"]
        turn.abort()
    bare = hermes_factory(Greeter(), defaults=())
    assert "sqlite" not in bare.registry.names("stores")
