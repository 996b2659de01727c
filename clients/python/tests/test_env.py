"""`client.env` and `client.prepare` against a real service: components admitted inline or as assets
(the server's inline limit learned from its refusal), programs resolved from bytes, files and URLs
onto admitted runtimes, preparation, and prepared placements and agent loops used by sessions of
other clients.

The service here logs its requests, so the tests check what went over the wire; its inline limit
is 64 KiB, below the 1.5 MB QuickJS runtimes, so that their inline admission is refused."""

from __future__ import annotations

import functools
import hashlib
import tempfile
import threading
import uuid
from collections.abc import Iterator
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, assert_type

import pytest
from support import ScriptedProvider, Service, build_components, unique

from skillenv import (
    AgentLoop,
    Client,
    Component,
    Failure,
    Model,
    PlacementError,
    PreparedArtifact,
    ProgramError,
    ResolvedProgram,
    Returned,
    RunOptions,
    ServiceError,
    host_env,
    program,
    service_env,
    tool,
)

INLINE_LIMIT = 64 * 1024
SANDBOX = service_env("sandbox")

# A tool program (the js-program-tool convention) that doubles `n` in the configured unit.
DOUBLER = """function run(input, configuration) {
  if (input.n < 0) throw { code: "negative_input", message: "n must not be negative" };
  return { doubled: input.n * 2, unit: configuration.unit };
}"""
ADMISSION = ("ArtifactService/", "AssetService/", "object-store")


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def doubler() -> bytes:
    """The doubler's source with a comment of its own: a program the workspace has not admitted yet."""
    return f"{DOUBLER}\n// {uuid.uuid4()}\n".encode()


@pytest.fixture(scope="module")
def runtimes() -> dict[str, bytes]:
    """The QuickJS program runtimes, for tools (`run`) and for agent loops (`turn`)."""
    return build_components("qjs-program-tool", "qjs-program-agent-loop")


@pytest.fixture(scope="module")
def env_service(provider: ScriptedProvider) -> Iterator[Service]:
    settings = {
        "SERVICE_ENV_MAX_INLINE_BYTES": str(INLINE_LIMIT),
        "SERVICE_LOG_REQUESTS": "true",
        # For the runs of prepared agent loops.
        "SERVICE_ANTHROPIC_BASE_URL": provider.anthropic_base_url,
        "SERVICE_MODEL_MAX_RETRIES": "0",
    }
    with tempfile.TemporaryDirectory(prefix="skillenv-python-env-") as data_dir:
        running = Service.start(data_dir, settings)
        yield running
        running.process.stop()


@pytest.fixture
def env_client(env_service: Service) -> Iterator[Client]:
    with env_service.client() as opened:
        yield opened


# --- Components ---


def test_a_small_component_goes_inline_and_a_fresh_client_sends_it_no_more(env_service: Service, env_client: Client, echo_wasm: bytes) -> None:
    component = Component(unique(echo_wasm))
    mark = env_service.log_mark(env_client)
    assert env_client.env.admit_component(component) == sha256(component.data)
    assert env_service.requests_since(mark, env_client) == [("ArtifactService/GetTool", "not_found"), ("ArtifactService/AdmitTool", "ok")]
    with env_service.client() as fresh:
        mark = env_service.log_mark(fresh)
        assert fresh.env.admit_component(Component(component.data)) == sha256(component.data)
        assert env_service.requests_since(mark, fresh) == [("ArtifactService/GetTool", "ok")]


def test_a_component_refused_inline_goes_as_an_asset_and_the_limit_is_learned(env_service: Service, env_client: Client, runtimes: dict[str, bytes], echo_wasm: bytes) -> None:
    assert env_client.env.inline_limit == 4 * 1024 * 1024
    runtime = Component(unique(runtimes["qjs-program-tool"]))
    mark = env_service.log_mark(env_client)
    assert env_client.env.admit_component(runtime) == sha256(runtime.data)
    assert env_service.requests_since(mark, env_client) == [
        ("ArtifactService/GetTool", "not_found"),
        ("ArtifactService/AdmitTool", "component_too_large"),
        ("AssetService/Presign", "ok"),
        ("object-store PUT", "ok"),
        ("AssetService/Finalize", "ok"),
        ("ArtifactService/AdmitTool", "ok"),
    ]
    assert env_client.env.inline_limit == INLINE_LIMIT

    # From then on, what exceeds the server's limit goes as an asset straight away (here: an agent loop).
    loop = Component(unique(runtimes["qjs-program-agent-loop"]), kind="agentloop")
    mark = env_service.log_mark(env_client)
    assert env_client.env.admit_component(loop) == sha256(loop.data)
    assert env_service.requests_since(mark, env_client) == [
        ("ArtifactService/GetAgentLoop", "not_found"),
        ("AssetService/Presign", "ok"),
        ("object-store PUT", "ok"),
        ("AssetService/Finalize", "ok"),
        ("ArtifactService/AdmitAgentLoop", "ok"),
    ]
    # What fits still goes inline.
    small = Component(unique(echo_wasm))
    mark = env_service.log_mark(env_client)
    env_client.env.admit_component(small)
    assert env_service.requests_since(mark, env_client) == [("ArtifactService/GetTool", "not_found"), ("ArtifactService/AdmitTool", "ok")]


def test_admission_refusals_keep_the_services_code(env_client: Client, echo_wasm: bytes) -> None:
    with pytest.raises(ServiceError) as not_a_component:
        env_client.env.admit_component(Component(b"not a component"))
    assert not_a_component.value.code == "invalid_component"
    # A tool component is not an agent loop: the service names the right endpoint.
    with pytest.raises(ServiceError) as wrong_kind:
        env_client.env.admit_component(Component(unique(echo_wasm), kind="agentloop"))
    assert wrong_kind.value.code == "invalid_component"


# --- Programs ---


def test_program_does_no_io_and_checks_the_form_of_its_source(env_client: Client) -> None:
    unreachable = program(runtime="0" * 64, source="http://127.0.0.1:1/never")
    assert unreachable.configuration is None
    with pytest.raises(ProgramError) as unread:
        env_client.env.resolve(unreachable)
    assert unread.value.code == "source_unreadable"
    with pytest.raises(ProgramError) as text:
        program(runtime="0" * 64, source="function run() {}")  # program text goes as bytes
    assert text.value.code == "unsupported_source"
    with pytest.raises(ProgramError) as number:
        program(runtime="0" * 64, source=42)  # type: ignore[arg-type]
    assert number.value.code == "unsupported_source"


def test_a_program_resolves_admitting_its_source_and_runtime_once(env_service: Service, env_client: Client, runtimes: dict[str, bytes]) -> None:
    runtime = Component(unique(runtimes["qjs-program-tool"]))
    source = doubler()
    doubling = program(runtime=runtime, source=source, configuration={"unit": "cm"})
    mark = env_service.log_mark(env_client)
    resolved = env_client.env.resolve(doubling)
    assert resolved == ResolvedProgram(entrypoint="run", id=sha256(source), runtime=sha256(runtime.data), configuration={"unit": "cm"})
    assert resolved.type == "service_program"
    # The runtime and the source are admitted at once, so their calls interleave.
    assert sorted(env_service.requests_since(mark, env_client)) == sorted([
        ("ArtifactService/GetProgram", "not_found"),
        ("ArtifactService/AdmitProgram", "ok"),
        ("ArtifactService/GetTool", "not_found"),
        ("ArtifactService/AdmitTool", "component_too_large"),
        ("AssetService/Presign", "ok"),
        ("object-store PUT", "ok"),
        ("AssetService/Finalize", "ok"),
        ("ArtifactService/AdmitTool", "ok"),
    ])  # fmt: skip

    # Once per Program object and client; a fresh client checks admission and sends nothing more.
    mark = env_service.log_mark(env_client)
    assert env_client.env.resolve(doubling) is resolved
    assert env_service.requests_since(mark, env_client) == []
    with env_service.client() as fresh:
        mark = env_service.log_mark(fresh)
        assert fresh.env.resolve(program(runtime=Component(runtime.data), source=source, configuration={"unit": "cm"})) == resolved
        assert sorted(env_service.requests_since(mark, fresh)) == [("ArtifactService/GetProgram", "ok"), ("ArtifactService/GetTool", "ok")]


def test_sources_from_a_path_a_file_url_and_http_on_a_runtime_digest_of_either_kind(env_client: Client, runtimes: dict[str, bytes], tmp_path: Path) -> None:
    loop_runtime = env_client.env.admit_component(Component(runtimes["qjs-program-agent-loop"], kind="agentloop"))
    tool_runtime = env_client.env.admit_component(Component(runtimes["qjs-program-tool"]))
    loop_source = f"function turn(input, configuration, host) {{ return {{ echoed: input }}; }}\n// {uuid.uuid4()}\n".encode()
    (tmp_path / "loop.js").write_bytes(loop_source)

    by_path = env_client.env.resolve(program(runtime=loop_runtime, source=tmp_path / "loop.js"))
    assert (by_path.entrypoint, by_path.id, by_path.runtime) == ("turn", sha256(loop_source), loop_runtime)
    by_file_url = env_client.env.resolve(program(runtime=loop_runtime, source=(tmp_path / "loop.js").as_uri()))
    assert by_file_url == by_path
    with _serving(tmp_path) as base_url:
        by_http = env_client.env.resolve(program(runtime=tool_runtime, source=f"{base_url}/loop.js"))
        assert (by_http.entrypoint, by_http.id, by_http.runtime) == ("run", sha256(loop_source), tool_runtime)
        with pytest.raises(ProgramError, match="HTTP 404") as missing:
            env_client.env.resolve(program(runtime=tool_runtime, source=f"{base_url}/missing.js"))
        assert missing.value.code == "source_unreadable"


def test_a_program_that_cannot_be_resolved_is_refused_with_a_code(env_client: Client, runtimes: dict[str, bytes], tmp_path: Path) -> None:
    tool_runtime = env_client.env.admit_component(Component(runtimes["qjs-program-tool"]))
    refusals = {
        "runtime_not_admitted": program(runtime="f" * 64, source=doubler()),
        "source_not_utf8": program(runtime=tool_runtime, source=b"function run() {} // \xff\xfe"),
        "source_unreadable": program(runtime=tool_runtime, source=tmp_path / "absent.js"),
    }
    for code, refused in refusals.items():
        with pytest.raises(ProgramError) as refusal:
            env_client.env.resolve(refused)
        assert refusal.value.code == code


def test_a_prepared_program_runs_in_a_session_with_its_configuration(env_service: Service, env_client: Client, runtimes: dict[str, bytes]) -> None:
    mark = env_service.log_mark(env_client)
    resolved = env_client.env.prepare(program(runtime=Component(runtimes["qjs-program-tool"]), source=doubler(), configuration={"unit": "cm"}))
    assert ("ArtifactService/Prepare", "ok") in env_service.requests_since(mark, env_client)
    session = env_client.sessions.create(environments=[SANDBOX], tools=[tool("double", environment=SANDBOX, implementation=resolved)])
    doubled = session.call_tool("double", {"n": 21})
    assert isinstance(doubled, Returned) and doubled.output == {"doubled": 42, "unit": "cm"}
    refused = session.call_tool("double", {"n": -1})
    assert isinstance(refused, Failure) and refused.code == "negative_input"
    # A placement's own configuration wins over the program's.
    in_km = env_client.sessions.create(environments=[SANDBOX], tools=[tool("double", environment=SANDBOX, implementation=resolved, configuration={"unit": "km"})])
    km = in_km.call_tool("double", {"n": 2})
    assert isinstance(km, Returned) and km.output == {"doubled": 4, "unit": "km"}


def test_a_session_admits_a_program_placed_unprepared(env_client: Client, runtimes: dict[str, bytes]) -> None:
    doubling = program(runtime=Component(runtimes["qjs-program-tool"]), source=doubler(), configuration={"unit": "mm"})
    placed = tool("double", environment=SANDBOX, implementation=doubling)
    assert placed.configuration == {"unit": "mm"}
    session = env_client.sessions.create(environments=[SANDBOX], tools=[placed])
    doubled = session.call_tool("double", {"n": 5})
    assert isinstance(doubled, Returned) and doubled.output == {"doubled": 10, "unit": "mm"}


def test_client_prepare_answers_placements_any_client_can_use_without_admitting(
    env_service: Service, env_client: Client, runtimes: dict[str, bytes], echo_wasm: bytes
) -> None:
    doubling = tool("double", environment=SANDBOX, implementation=program(runtime=Component(runtimes["qjs-program-tool"]), source=doubler(), configuration={"unit": "mm"}))
    echo_bytes = unique(echo_wasm)
    prepared = env_client.prepare(doubling)
    prepared_echo = env_client.prepare(tool("echo", environment=SANDBOX, implementation=Component(echo_bytes), description="Echoes."))
    assert isinstance(prepared.implementation, ResolvedProgram) and prepared.implementation.entrypoint == "run"
    assert (prepared.name, prepared.environment, prepared.configuration) == ("double", SANDBOX, {"unit": "mm"})
    assert (prepared_echo.implementation, prepared_echo.description) == (sha256(echo_bytes), "Echoes.")

    with env_service.client() as other:
        mark = env_service.log_mark(other)
        session = other.sessions.create(environments=[SANDBOX], tools=[prepared, prepared_echo])
        assert [procedure for procedure, _ in env_service.requests_since(mark, other)] == ["SessionService/CreateSession"]
        doubled = session.call_tool("double", {"n": 4})
        assert isinstance(doubled, Returned) and doubled.output == {"doubled": 8, "unit": "mm"}
        echoed = session.call_tool("echo", {"same": True})
        assert isinstance(echoed, Returned) and echoed.output == {"same": True}


def test_what_cannot_be_placed_as_a_tool_or_prepared_is_refused_before_any_call(env_service: Service, env_client: Client, runtimes: dict[str, bytes]) -> None:
    loop_runtime = Component(runtimes["qjs-program-agent-loop"], kind="agentloop")
    mark = env_service.log_mark(env_client)
    placements: list[Any] = [
        lambda: tool("x", environment=SANDBOX, implementation=loop_runtime),
        lambda: tool("x", environment=SANDBOX, implementation=program(runtime=loop_runtime, source=b"function turn() {}")),
        lambda: tool("x", environment=SANDBOX, implementation=ResolvedProgram(entrypoint="turn", id="a" * 64, runtime="b" * 64)),
        lambda: env_client.prepare(tool("x", environment="sandbox", implementation="0" * 64)),
        lambda: env_client.prepare(tool("x", environment=host_env("laptop"))),
    ]
    for place in placements:
        with pytest.raises(PlacementError):
            place()
    assert [request for request in env_service.requests_since(mark, env_client) if request[0].startswith(ADMISSION)] == []


def test_a_program_on_an_agent_loop_runtime_digest_is_no_tool(env_client: Client, runtimes: dict[str, bytes]) -> None:
    loop_runtime = env_client.env.admit_component(Component(runtimes["qjs-program-agent-loop"], kind="agentloop"))
    # A digest names either kind of runtime: only resolving tells.
    placed = tool("x", environment=SANDBOX, implementation=program(runtime=loop_runtime, source=doubler()))
    with pytest.raises(PlacementError, match="agent-loop runtime"):
        env_client.sessions.create(environments=[SANDBOX], tools=[placed])
    with pytest.raises(PlacementError, match="agent-loop runtime"):
        env_client.prepare(placed)


# --- client.prepare of a run's agent loop ---

KEYS = {"anthropic": "sk-ant-scripted"}
# A synchronous agent-loop program (QuickJS): one model call on the message, answered in capitals with the configured suffix.
SHOUTING_LOOP = b"""function turn(input, configuration, host) {
  const answer = host.callModel({ v: 1, messages: [{ role: "user", content: input.message }] });
  return { v: 1, message: (answer.message.content + configuration.suffix).toUpperCase() };
}"""


def test_client_prepare_answers_an_agent_loop_that_runs_of_any_session_and_client_use_without_admitting(
    env_service: Service, env_client: Client, provider: ScriptedProvider
) -> None:
    loop_bytes = unique(build_components("agent-loop-js")["agent-loop-js"])
    mark = env_service.log_mark(env_client)

    prepared = env_client.prepare(AgentLoop(environment=SANDBOX, implementation=Component(loop_bytes, kind="agentloop"), configuration={"note": "kept"}))

    assert_type(prepared, AgentLoop)
    assert prepared == AgentLoop(environment=SANDBOX, implementation=sha256(loop_bytes), configuration={"note": "kept"})
    # Looked up, admitted (as an asset: 12 MB), then prepared as an agent loop: the service has it ready.
    admitted = [request for request in env_service.requests_since(mark, env_client) if request[0].startswith("ArtifactService/")]
    assert admitted == [("ArtifactService/GetAgentLoop", "not_found"), ("ArtifactService/AdmitAgentLoop", "ok"), ("ArtifactService/Prepare", "ok")]
    assert env_client.env.prepare_ids(agentloops=[sha256(loop_bytes)]) == [PreparedArtifact(sha256(loop_bytes), "agentloop", True)]

    # A session of this client runs it, and a session of another client created with its run: nothing is admitted again.
    model = Model("anthropic", "py-prepared-loop")
    session = env_client.sessions.create(environments=[SANDBOX])
    provider.script("py-prepared-loop", [{"text": "ran the prepared loop"}])
    mark = env_service.log_mark(env_client)
    run = session.run(message="go", model=model, provider_keys=KEYS, agent_loop=prepared)
    assert (run.result().status, run.result().output_text) == ("completed", "ran the prepared loop")
    events = list(run.events())
    assert any(event.type == "operation.sent" and event.data.get("agentLoop") is True for event in events)
    assert [event.data["event"] for event in events if event.type == "turn.progress"] == [{"v": 1, "kind": "turn_started"}]
    assert [request for request in env_service.requests_since(mark, env_client) if request[0].startswith(ADMISSION)] == []
    with env_service.client() as other:
        provider.script("py-prepared-loop", [{"text": "and again elsewhere"}])
        mark = env_service.log_mark(other)
        other_session, other_run = other.sessions.create(environments=[SANDBOX], run=RunOptions(message="go", model=model, provider_keys=KEYS, agent_loop=prepared))
        assert other_run.result().output_text == "and again elsewhere"
        assert [request for request in env_service.requests_since(mark, other) if request[0].startswith(ADMISSION)] == []
        other_session.delete()
    session.delete()


def test_client_prepare_keeps_an_agent_loops_configuration_and_refuses_one_it_cannot_prepare(
    env_service: Service, env_client: Client, provider: ScriptedProvider, runtimes: dict[str, bytes]
) -> None:
    shouting = program(runtime=Component(runtimes["qjs-program-agent-loop"], kind="agentloop"), source=SHOUTING_LOOP, configuration={"suffix": "!"})

    own = env_client.prepare(AgentLoop(environment=SANDBOX, implementation=shouting))
    overridden = env_client.prepare(AgentLoop(environment=SANDBOX, implementation=shouting, configuration={"suffix": "?"}))

    assert (own.configuration, overridden.configuration) == ({"suffix": "!"}, {"suffix": "?"})
    for prepared in (own, overridden):
        assert isinstance(prepared.implementation, ResolvedProgram)
        assert (prepared.environment, prepared.implementation.entrypoint) == (SANDBOX, "turn")
        runtime = prepared.implementation.runtime
        assert env_client.env.prepare_ids(agentloops=[runtime]) == [PreparedArtifact(runtime, "agentloop", True)]
    session = env_client.sessions.create(environments=[SANDBOX])
    mark = env_service.log_mark(env_client)
    for prepared, answer in ((own, "PREPARED!"), (overridden, "PREPARED?")):
        provider.script("py-prepared-program-loop", [{"text": "prepared"}])
        assert session.run(message="go", model=Model("anthropic", "py-prepared-program-loop"), provider_keys=KEYS, agent_loop=prepared).result().output_text == answer
    assert [request for request in env_service.requests_since(mark, env_client) if request[0].startswith(ADMISSION)] == []
    session.delete()

    # Refused before any call: a loop whose environment is given by name only (its kind unknown without a session).
    mark = env_service.log_mark(env_client)
    with pytest.raises(PlacementError) as by_name:
        env_client.prepare(AgentLoop(environment="sandbox", implementation=shouting))
    assert str(by_name.value) == (
        "cannot prepare the agent loop: its environment is given only by name (sandbox); only agent loops placed in a service environment definition (service_env) are prepared"
    )
    assert [request for request in env_service.requests_since(mark, env_client) if request[0].startswith(ADMISSION)] == []


def test_prepare_ids_loads_admitted_artifacts_and_refuses_unknown_ones(env_client: Client, runtimes: dict[str, bytes], echo_wasm: bytes) -> None:
    echo_id = env_client.env.admit_component(Component(echo_wasm))
    loop_id = env_client.env.admit_component(Component(runtimes["qjs-program-agent-loop"], kind="agentloop"))
    loop_program = env_client.env.prepare(program(runtime=loop_id, source=b"function turn(input) { return input; }"))
    assert loop_program.entrypoint == "turn"
    assert env_client.env.prepare_ids(agentloops=[loop_id], programs=[loop_program.id], tools=[echo_id]) == [
        PreparedArtifact(loop_id, "agentloop", True),
        PreparedArtifact(loop_program.id, "program", True),
        PreparedArtifact(echo_id, "tool", True),
    ]
    with pytest.raises(ServiceError) as unknown:
        env_client.env.prepare_ids(tools=["0" * 64])
    assert unknown.value.code == "not_found"
    with pytest.raises(ServiceError) as wrong_kind:
        env_client.env.prepare_ids(agentloops=[echo_id])
    assert wrong_kind.value.code == "not_found"


class _Quiet(SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass


class _serving:
    """Serves a directory over HTTP on loopback: `with _serving(path) as base_url:`."""

    def __init__(self, directory: Path) -> None:
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_Quiet, directory=str(directory)))

    def __enter__(self) -> str:
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def __exit__(self, *_: object) -> None:
        self._server.shutdown()
        self._server.server_close()
