"""MCP environments: `mcp_env` definitions, and a session mounting the reference MCP server
(@modelcontextprotocol/server-everything) over Streamable HTTP."""

from __future__ import annotations

import os
import socket
import tempfile
from collections.abc import Iterator

import pytest
from support import REPO, NodeProcess, Service

from skillenv import McpDefinitionError, McpEnvironment, PlacementError, Returned, ServiceError, mcp_env, tool

TOKEN = "python-mcp-credential-4e81"
EVERYTHING = REPO / "node_modules" / "@modelcontextprotocol" / "server-everything" / "dist" / "index.js"


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture(scope="module")
def everything() -> Iterator[str]:
    """The server's MCP endpoint."""
    port = _free_port()
    env = {"PATH": os.environ.get("PATH", ""), "PORT": str(port)}
    process, _ = NodeProcess.start([str(EVERYTHING), "streamableHttp"], env, r"listening on port", on_stderr=True)
    yield f"http://127.0.0.1:{port}/mcp"
    process.stop()


@pytest.fixture(scope="module")
def mcp_service(everything: str) -> Iterator[Service]:
    origin = everything.removesuffix("/mcp")
    with tempfile.TemporaryDirectory(prefix="skillenv-python-mcp-") as data_dir:
        running = Service.start(data_dir, {"SERVICE_MCP_ALLOW": origin})
        yield running
        running.process.stop()


def test_a_definition_keeps_its_credential_out_of_sight() -> None:
    definition = mcp_env("ev", url="http://127.0.0.1:1/mcp", credential=TOKEN, tools=["echo"])
    assert isinstance(definition, McpEnvironment)
    assert definition.kind == "mcp" and definition.tools == ("echo",) and definition.has_credential
    assert TOKEN not in repr(definition)
    with pytest.raises(McpDefinitionError) as refused:
        mcp_env("ev", url="ftp://example.com/mcp")
    assert refused.value.code == "invalid_url"
    with pytest.raises(PlacementError):
        tool("mine", environment=definition)


def test_a_session_mounts_the_server_and_calls_its_tools(mcp_service: Service, everything: str) -> None:
    with mcp_service.client() as client:
        session = client.sessions.create(environments=[mcp_env("ev", url=everything, credential=TOKEN, tools=["echo", "get-sum"])])
        assert [(environment.name, environment.kind, environment.state) for environment in session.record.environments] == [("ev", "mcp", "ready")]
        assert [placed.name for placed in session.record.tools] == ["ev__echo", "ev__get-sum"]
        result = session.call_tool("ev__get-sum", {"a": 3, "b": 4})
        assert isinstance(result, Returned)
        assert result.output == {"content": "The sum of 3 and 4 is 7."}
        session.delete()


def test_a_server_outside_the_allow_list_is_refused_with_its_code(mcp_service: Service) -> None:
    with mcp_service.client() as client, pytest.raises(ServiceError) as refused:
        client.sessions.create(environments=[mcp_env("ev", url="http://127.0.0.1:9/mcp")])
    assert refused.value.code == "mcp_url_not_allowed"
