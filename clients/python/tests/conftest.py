"""Fixtures: one service and one scripted provider for the whole run, a client per test."""

from __future__ import annotations

import subprocess
import tempfile
from collections.abc import Iterator

import pytest
from support import NODE, REPO, ScriptedProvider, Service

from skillenv import Client


@pytest.fixture(scope="session")
def echo_wasm() -> bytes:
    """The echo-wat tool component (`run` returns its input), built unless its build is current."""
    subprocess.run([NODE, "scripts/build-components.ts", "components/echo-wat"], cwd=REPO, check=True, capture_output=True)
    return (REPO / "build" / "components" / "echo-wat.wasm").read_bytes()


@pytest.fixture(scope="session")
def provider() -> Iterator[ScriptedProvider]:
    started = ScriptedProvider.start()
    yield started
    started.process.stop()


@pytest.fixture(scope="session")
def service(provider: ScriptedProvider) -> Iterator[Service]:
    with tempfile.TemporaryDirectory(prefix="skillenv-python-") as data_dir:
        running = Service.start(data_dir, {"SERVICE_ANTHROPIC_BASE_URL": provider.anthropic_base_url, "SERVICE_MODEL_MAX_RETRIES": "0"})
        yield running
        running.process.stop()


@pytest.fixture
def client(service: Service) -> Iterator[Client]:
    with service.client() as opened:
        yield opened
