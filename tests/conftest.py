"""Shared fixtures and the deterministic hypothesis profiles."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, Phase, settings

from langgraph.checkpoint.bounded import BoundedInMemorySaver, InMemoryCheckpointConfig

settings.register_profile(
    "ci",
    derandomize=True,
    max_examples=60,
    deadline=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile(
    "soak",
    max_examples=5_000,
    deadline=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile(
    "no-shrink",  # reports a failure as found, without minimizing it: for quick checks
    parent=settings.get_profile("ci"),
    phases=[Phase.explicit, Phase.reuse, Phase.generate],
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


class FakeClock:
    """A monotonic clock that only moves when a test advances it."""

    def __init__(self, start: float = 1_000.0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def saver(clock: FakeClock) -> BoundedInMemorySaver:
    """A saver with the reference defaults and a fake clock."""
    return BoundedInMemorySaver(clock=clock)


def make_saver(clock: FakeClock | None = None, **limits: float) -> BoundedInMemorySaver:
    """A saver with some limits changed."""
    return BoundedInMemorySaver(config=InMemoryCheckpointConfig(**limits), clock=clock or FakeClock())


@pytest.fixture
def environment(monkeypatch: pytest.MonkeyPatch) -> Iterator[pytest.MonkeyPatch]:
    """A clean slate for the serving factory: no BOUNDED_SAVER_* variables and no shared saver, before and after."""
    from langgraph.checkpoint.bounded.serving import ENV_PREFIX, reset_shared_saver

    for name in [name for name in os.environ if name.startswith(ENV_PREFIX)]:
        monkeypatch.delenv(name)
    reset_shared_saver()
    yield monkeypatch
    reset_shared_saver()
