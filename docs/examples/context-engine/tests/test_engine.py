import pytest
from hermes_example_engine import UserTurnsEngine

from hermes_core.testing.engine_suite import ContextEngineSuite


class TestUserTurnsEngine(ContextEngineSuite):
    expect_compressed = True

    @pytest.fixture
    def engine(self):
        return UserTurnsEngine(rounds=3)
