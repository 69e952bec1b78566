"""langgraph.checkpoint.bounded.serving: BOUNDED_SAVER_* variables, and one saver per process however it is entered."""

from __future__ import annotations

import asyncio
import importlib.util
import math
import os
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Optional

import pytest
from prometheus_client import REGISTRY

from langgraph.checkpoint.bounded import BoundedInMemorySaver, InMemoryCheckpointConfig, SnapshotError, serving
from langgraph.checkpoint.bounded.serving import (
    ENV_PREFIX,
    ServingConfigError,
    checkpointer,
    config_from_env,
    fields_without_setting,
    reset_shared_saver,
    settings,
    shared_saver,
)
from tests.support.helpers import put

# --- variables ---------------------------------------------------------------------------------


def test_every_config_field_can_be_set_from_the_environment() -> None:
    # A field added to InMemoryCheckpointConfig with a type no parser handles fails here.
    assert fields_without_setting() == []
    assert sorted(settings()) == sorted(field.name for field in fields(InMemoryCheckpointConfig))
    for name, setting in settings().items():
        assert setting.variable == ENV_PREFIX + name.upper()


def written(value: object) -> str:
    """How a person writes a config value in an environment variable."""
    if value is None:
        return ""
    if callable(value):
        return f"{value.__module__}:{value.__qualname__}"
    return str(value)


@pytest.mark.parametrize("field", [field.name for field in fields(InMemoryCheckpointConfig)])
def test_each_variable_reads_its_default_written_out_back_as_the_default(field: str) -> None:
    default = getattr(InMemoryCheckpointConfig(), field)
    assert config_from_env({ENV_PREFIX + field.upper(): written(default)}) == InMemoryCheckpointConfig()


def test_values_in_the_units_the_config_uses() -> None:
    config = config_from_env(
        {
            "BOUNDED_SAVER_MAX_THREADS": "500",
            "BOUNDED_SAVER_MAX_TOTAL_BYTES": "268_435_456",
            "BOUNDED_SAVER_MAX_CHECKPOINTS_PER_THREAD": "inf",
            "BOUNDED_SAVER_IDLE_TTL_SECONDS": "1800",
            "BOUNDED_SAVER_AUTOSAVE_INTERVAL_SECONDS": "0.5",
            "BOUNDED_SAVER_ON_CHECKPOINT_LIMIT": "prune_oldest",
            "BOUNDED_SAVER_AUTOSAVE_PATH": "state.snapshot",
            "BOUNDED_SAVER_ON_EVICT": "tests.serving.test_serving:archive",
            "UNRELATED": "ignored",
        }
    )
    assert config == InMemoryCheckpointConfig(
        max_threads=500,
        max_total_bytes=256 * 1024 * 1024,
        max_checkpoints_per_thread=math.inf,
        idle_ttl_seconds=1800.0,
        autosave_interval_seconds=0.5,
        on_checkpoint_limit="prune_oldest",
        autosave_path="state.snapshot",
        on_evict=archive,
    )


def archive(dropped: object, export: object) -> None:
    """An on_evict hook for the import-path test."""


@pytest.mark.parametrize(
    ("variable", "value", "message"),
    [
        ("BOUNDED_SAVER_MAX_THREADS", "lots", "BOUNDED_SAVER_MAX_THREADS is 'lots': expected a whole number"),
        ("BOUNDED_SAVER_MAX_THREADS", "2.5", "BOUNDED_SAVER_MAX_THREADS is '2.5': expected a whole number"),
        ("BOUNDED_SAVER_MAX_THREADS", "-1", "BOUNDED_SAVER_MAX_THREADS is '-1': expected a whole number"),
        ("BOUNDED_SAVER_MAX_THREADS", "0", "BOUNDED_SAVER_MAX_THREADS: max_threads must be at least 1, got 0"),
        ("BOUNDED_SAVER_MAX_THREADS", "", "BOUNDED_SAVER_MAX_THREADS is '': expected a whole number"),
        ("BOUNDED_SAVER_MAX_TOTAL_BYTES", "64MiB", "is '64MiB': expected a whole number of bytes"),
        ("BOUNDED_SAVER_IDLE_TTL_SECONDS", "soon", "is 'soon': expected a number of seconds"),
        ("BOUNDED_SAVER_IDLE_TTL_SECONDS", "nan", "idle_ttl_seconds must be a positive number, got nan"),
        ("BOUNDED_SAVER_IDLE_TTL_SECONDS", "1e400", "too large to be a number of seconds; inf lifts the limit"),
        ("BOUNDED_SAVER_EVICTION_GRACE_SECONDS", "9" * 5000, "too large to be a number of seconds"),
        ("BOUNDED_SAVER_ON_CHECKPOINT_LIMIT", "drop", "is 'drop': expected one of reject, prune_oldest"),
        (
            "BOUNDED_SAVER_ON_EVICT",
            "tests.serving.test_serving.archive",
            "expected an import path package.module:attribute",
        ),
        ("BOUNDED_SAVER_ON_EVICT", "no_such_module:hook", "Importing 'no_such_module' failed: ModuleNotFoundError"),
        (
            "BOUNDED_SAVER_ON_EVICT",
            "tests.serving.test_serving:missing",
            "'tests.serving.test_serving' has no attribute 'missing'",
        ),
        ("BOUNDED_SAVER_ON_EVICT", "math:pi", "'math:pi' is a float, not a callable"),
        ("BOUNDED_SAVER_MAX_THREAD", "5", "BOUNDED_SAVER_MAX_THREAD names no InMemoryCheckpointConfig setting"),
        ("BOUNDED_SAVER_", "5", "BOUNDED_SAVER_ names no InMemoryCheckpointConfig setting"),
    ],
)
def test_a_bad_variable_is_an_error_that_names_it_and_what_it_expected(variable: str, value: str, message: str) -> None:
    with pytest.raises(ServingConfigError) as raised:
        config_from_env({variable: value})
    assert message in str(raised.value)
    assert str(raised.value).startswith(variable)


def test_an_unknown_variable_lists_the_known_ones() -> None:
    with pytest.raises(ServingConfigError, match=r"known: .*BOUNDED_SAVER_MAX_THREADS"):
        config_from_env({"BOUNDED_SAVER_MAXTHREADS": "5"})


@dataclass(frozen=True)
class LaterConfig(InMemoryCheckpointConfig):
    """Fields other branches are adding, to show they are covered by their types alone."""

    max_memory_bytes: int = 256 * 1024 * 1024
    on_namespace_limit: str = "reject"
    snapshot_key: str | bytes | None = None
    on_saved: Optional[Callable[[], object]] = None  # noqa: UP045 - the older spelling must work too
    strict: bool = False

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.on_namespace_limit not in ("reject", "prune_oldest"):
            raise ValueError(f"on_namespace_limit must be 'reject' or 'prune_oldest', got {self.on_namespace_limit!r}")
        if isinstance(self.snapshot_key, str) and len(self.snapshot_key) < 16:
            raise ValueError(f"snapshot_key is too short: {self.snapshot_key!r}")  # a careless echo, on purpose


@pytest.fixture
def later_config(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setattr(serving, "InMemoryCheckpointConfig", LaterConfig)
    settings.cache_clear()
    yield
    monkeypatch.undo()
    settings.cache_clear()


@pytest.mark.usefixtures("later_config")
def test_fields_added_later_are_read_by_their_types() -> None:
    assert fields_without_setting() == []
    config = config_from_env(
        {
            "BOUNDED_SAVER_MAX_MEMORY_BYTES": "1_073_741_824",
            "BOUNDED_SAVER_ON_NAMESPACE_LIMIT": "prune_oldest",
            "BOUNDED_SAVER_SNAPSHOT_KEY": " a key of 32 characters, kept. ",
            "BOUNDED_SAVER_ON_SAVED": "tests.serving.test_serving:archive",
            "BOUNDED_SAVER_STRICT": "true",
        }
    )
    assert config == LaterConfig(
        max_memory_bytes=1024**3,
        on_namespace_limit="prune_oldest",
        snapshot_key=" a key of 32 characters, kept. ",  # secrets are not stripped
        on_saved=archive,
        strict=True,
    )
    with pytest.raises(ServingConfigError, match="BOUNDED_SAVER_ON_NAMESPACE_LIMIT: on_namespace_limit must be"):
        config_from_env({"BOUNDED_SAVER_ON_NAMESPACE_LIMIT": "evict"})


@pytest.mark.usefixtures("later_config")
def test_a_secret_is_never_echoed() -> None:
    assert settings()["snapshot_key"].secret
    with pytest.raises(ServingConfigError) as raised:
        config_from_env({"BOUNDED_SAVER_SNAPSHOT_KEY": "hunter2"})
    assert str(raised.value) == "BOUNDED_SAVER_SNAPSHOT_KEY: snapshot_key is too short: (value hidden)"
    assert raised.value.__cause__ is None and raised.value.__suppress_context__  # no traceback shows it either


def test_a_field_of_a_type_without_parser_is_reported(monkeypatch: pytest.MonkeyPatch) -> None:
    @dataclass(frozen=True)
    class Odd(InMemoryCheckpointConfig):
        weights: tuple[float, ...] = (1.0,)

    monkeypatch.setattr(serving, "InMemoryCheckpointConfig", Odd)
    settings.cache_clear()
    try:
        assert fields_without_setting() == ["weights"]
        with pytest.raises(ServingConfigError, match=r"BOUNDED_SAVER_WEIGHTS .*weights has no parser for its type"):
            config_from_env({"BOUNDED_SAVER_WEIGHTS": "1,2"})
    finally:
        monkeypatch.undo()
        settings.cache_clear()


# --- the process-wide saver ----------------------------------------------------------------------


def enter_in_a_new_event_loop(results: list[BoundedInMemorySaver], entered: threading.Barrier) -> None:
    async def hold() -> None:
        async with checkpointer() as saver, checkpointer() as again:  # nested entries, one loop
            assert again is saver
            results.append(saver)
            await asyncio.to_thread(entered.wait)  # every thread inside at once

    asyncio.run(hold())


def test_every_entry_from_every_thread_and_loop_yields_the_same_saver(environment: pytest.MonkeyPatch) -> None:
    environment.setenv("BOUNDED_SAVER_MAX_THREADS", "7")
    results: list[BoundedInMemorySaver] = []
    entered = threading.Barrier(8)
    workers = [threading.Thread(target=enter_in_a_new_event_loop, args=(results, entered)) for _ in range(8)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=60)
    assert len(results) == 8
    assert all(saver is results[0] for saver in results)
    assert shared_saver() is results[0]
    assert results[0].config.max_threads == 7


async def test_a_bad_variable_fails_the_first_entry_and_creates_nothing(environment: pytest.MonkeyPatch) -> None:
    environment.setenv("BOUNDED_SAVER_MAX_THREADS", "lots")
    with pytest.raises(ServingConfigError, match="BOUNDED_SAVER_MAX_THREADS"):
        async with checkpointer():
            pass
    environment.setenv("BOUNDED_SAVER_MAX_THREADS", "3")
    async with checkpointer() as saver:
        assert saver.config.max_threads == 3


def stored_threads(path: Path) -> list[str]:
    return BoundedInMemorySaver.load(path).store.thread_ids()


async def test_the_snapshot_is_loaded_at_the_first_entry_and_saved_when_the_last_exits(
    environment: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    path = tmp_path / "state.snapshot"
    earlier = BoundedInMemorySaver()
    put(earlier, "from-last-time", {"n": 1})
    earlier.save(path)
    environment.setenv("BOUNDED_SAVER_AUTOSAVE_PATH", str(path))
    environment.setenv("BOUNDED_SAVER_AUTOSAVE_INTERVAL_SECONDS", "3600")  # only the exits save here

    async with checkpointer() as saver:
        assert saver.store.thread_ids() == ["from-last-time"]
        async with checkpointer():
            put(saver, "written", {"n": 2})
        assert stored_threads(path) == ["from-last-time"]  # another entry still holds it: no save yet
    assert stored_threads(path) == ["from-last-time", "written"]


async def test_a_later_entry_resumes_autosaving(environment: pytest.MonkeyPatch, tmp_path: Path) -> None:
    path = tmp_path / "state.snapshot"
    environment.setenv("BOUNDED_SAVER_AUTOSAVE_PATH", str(path))
    environment.setenv("BOUNDED_SAVER_AUTOSAVE_INTERVAL_SECONDS", "0.05")
    async with checkpointer() as saver:
        pass
    assert stored_threads(path) == []
    async with checkpointer() as again:
        assert again is saver
        put(saver, "after-the-reentry", {"n": 1})
        await wait_until(lambda: stored_threads(path) == ["after-the-reentry"])


async def wait_until(condition: Callable[[], bool], timeout: float = 30.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not condition():
        assert asyncio.get_running_loop().time() < deadline, "condition not met in time"
        await asyncio.sleep(0.02)  # polling interval; the deadline bounds the wait


def test_an_unreadable_snapshot_stops_the_start_and_is_left_untouched(
    environment: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    path = tmp_path / "state.snapshot"
    path.write_bytes(b"not a snapshot")
    environment.setenv("BOUNDED_SAVER_AUTOSAVE_PATH", str(path))
    with pytest.raises(SnapshotError, match=r"BOUNDED_SAVER_AUTOSAVE_PATH.*left untouched"):
        shared_saver()
    assert path.read_bytes() == b"not a snapshot"


def test_an_autosave_path_in_a_missing_folder_stops_the_start(environment: pytest.MonkeyPatch, tmp_path: Path) -> None:
    environment.setenv("BOUNDED_SAVER_AUTOSAVE_PATH", str(tmp_path / "no-such-folder" / "state.snapshot"))
    with pytest.raises(ServingConfigError, match=r"BOUNDED_SAVER_AUTOSAVE_PATH: the folder of .* does not exist"):
        shared_saver()


def test_metrics_are_registered_once_and_leave_with_the_saver(environment: pytest.MonkeyPatch) -> None:
    environment.setenv("BOUNDED_SAVER_MAX_THREADS", "9")
    saver = shared_saver()
    put(saver, "t", {"n": 1})
    assert REGISTRY.get_sample_value("langgraph_checkpoint_bounded_max_threads") == 9
    assert REGISTRY.get_sample_value("langgraph_checkpoint_bounded_threads") == 1
    reset_shared_saver()
    assert REGISTRY.get_sample_value("langgraph_checkpoint_bounded_max_threads") is None
    environment.setenv("BOUNDED_SAVER_MAX_THREADS", "10")
    shared_saver()  # a new saver registers in its place
    assert REGISTRY.get_sample_value("langgraph_checkpoint_bounded_max_threads") == 10


def test_the_module_run_from_its_file_hands_out_the_package_module_s_saver(environment: pytest.MonkeyPatch) -> None:
    # langgraph-api runs a "./path/serving.py:checkpointer" file under a name of its own.
    spec = importlib.util.spec_from_file_location("__saver__serving", serving.__file__)
    assert spec is not None and spec.loader is not None
    copy = importlib.util.module_from_spec(spec)
    environment.setitem(sys.modules, spec.name, copy)  # as langgraph-api does before running it
    spec.loader.exec_module(copy)
    assert copy.checkpointer is checkpointer and copy.shared_saver is shared_saver


def test_the_saver_is_saved_at_interpreter_exit(tmp_path: Path) -> None:
    path = tmp_path / "state.snapshot"
    script = (
        "from langgraph.checkpoint.bounded.serving import shared_saver\n"
        "from tests.support.helpers import put\nput(shared_saver(), 't', {'n': 1})\n"
    )
    env = {**os.environ, "BOUNDED_SAVER_AUTOSAVE_PATH": str(path)}
    env["BOUNDED_SAVER_AUTOSAVE_INTERVAL_SECONDS"] = "3600"
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert stored_threads(path) == ["t"]


async def test_aprune_accepts_the_strategy_the_agent_server_s_grpc_path_sends() -> None:
    saver = BoundedInMemorySaver()
    put(saver, "t", {"n": 1})
    await saver.aprune(["t"], strategy="delete_all")
    assert saver.stats().threads == 0


WHOLE_NUMBER_VARIABLES = sorted(
    setting.variable
    for setting in settings().values()
    if setting.parse.__name__ in ("_whole_number", "parse_optional") and "whole number" in setting.expected
)


@pytest.mark.parametrize("variable", WHOLE_NUMBER_VARIABLES)
def test_a_value_of_thousands_of_digits_is_refused_naming_its_variable(variable: str) -> None:
    with pytest.raises(ServingConfigError, match=rf"^{variable} is '9999.*digits is far past any limit"):
        config_from_env({variable: "9" * 5_000})
    with pytest.raises(ServingConfigError, match=rf"^{variable}: .*use math.inf to lift the limit"):
        config_from_env({variable: "9" * 20})  # parses, but is past what a limit may be


def test_there_are_whole_number_variables_to_try() -> None:
    assert len(WHOLE_NUMBER_VARIABLES) >= 11 and "BOUNDED_SAVER_MAX_THREADS" in WHOLE_NUMBER_VARIABLES


def test_an_autosave_path_naming_a_folder_stops_the_start(environment: pytest.MonkeyPatch, tmp_path: Path) -> None:
    environment.setenv("BOUNDED_SAVER_AUTOSAVE_PATH", str(tmp_path))
    with pytest.raises(ServingConfigError, match=r"BOUNDED_SAVER_AUTOSAVE_PATH: .* is a folder; name a file in it"):
        shared_saver()


def test_an_autosave_path_where_nothing_can_be_written_stops_the_start(environment: pytest.MonkeyPatch) -> None:
    environment.setenv("BOUNDED_SAVER_AUTOSAVE_PATH", "/sys/state.snapshot")  # read-only, even for root
    with pytest.raises(ServingConfigError, match=r"BOUNDED_SAVER_AUTOSAVE_PATH: cannot write in the folder of"):
        shared_saver()
