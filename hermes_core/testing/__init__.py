"""Test support for plugin authors: conformance suites, a loopback OpenAI server, fixtures.

* :class:`~hermes_core.testing.store_suite.SessionStoreSuite`: any session store;
* :class:`~hermes_core.testing.engine_suite.ContextEngineSuite`: any context engine;
* :class:`~hermes_core.testing.memory_suite.MemoryProviderSuite`: any memory provider;
* :class:`~hermes_core.testing.tail_suite.TailStrategySuite`: any tail strategy;
* :class:`~hermes_core.testing.summarizer_suite.SummarizerSuite`: any summarizer;
* :class:`~hermes_core.testing.importer_suite.ImporterSuite`: any transcript importer;
* :class:`~hermes_core.testing.fake_openai.FakeOpenAIServer`: a loopback server speaking
  chat completions, Responses and ``/responses/compact``, validated with the ``openai`` types.

The pytest plugin (``hermes_core.testing.pytest_plugin``, loaded automatically)
adds the ``hermes_settings`` and ``hermes_factory`` fixtures (``hermes_factory(my_plugin)``
adds the default store and token counter itself). Suites are imported
on demand (they import pytest), so this module stays cheap to import.
"""
