"""Runs against the real service and the scripted model provider: drafts uploaded, tools called, events, result."""

from __future__ import annotations

import importlib
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any, assert_type, cast

import pytest
from support import ScriptedProvider, build_components, unique

import skillenv.sessions
from skillenv import (
    AgentLoop,
    Client,
    Component,
    HostToolContext,
    Model,
    PinnedSkill,
    PlacementError,
    PreparedArtifact,
    RunFile,
    RunOptions,
    ServiceError,
    Session,
    SessionEvent,
    SessionWithRun,
    Skill,
    host_env,
    program,
    service_env,
    tool,
)
from skillenv.bundle import sha256_hex

KEYS = {"anthropic": "sk-ant-scripted"}
NOTES = Skill.from_content("---\nname: py-release-notes\ndescription: Writes release notes.\n---\nList the changes, newest first.\n")


def clock(input: Any, context: HostToolContext) -> dict[str, str]:
    return {"date": "2026-11-22"}


LAPTOP = host_env("laptop", {"clock": clock})


def test_a_run_uploads_its_draft_skill_calls_tools_and_completes(client: Client, provider: ScriptedProvider, echo_wasm: bytes) -> None:
    provider.script("run-with-tools", [
        {"toolCalls": [
            {"id": "call_skill", "name": "skills", "input": {"action": "load", "name": "py-release-notes"}},
            {"id": "call_echo", "name": "echo", "input": {"text": "2.4.0"}},
            {"id": "call_clock", "name": "clock", "input": {}},
        ]},
        {"text": "Released 2.4.0 on 2026-11-22."},
    ])  # fmt: skip
    sandbox = service_env("sandbox")
    session = client.sessions.create(
        environments=[sandbox, LAPTOP],
        tools=[tool("echo", environment=sandbox, implementation=Component(echo_wasm)), tool("clock", environment=LAPTOP)],
    )
    run = session.run(message="Write the release notes.", model=Model("anthropic", "run-with-tools"), provider_keys=KEYS, skills=[NOTES])
    assert run.status == "running"

    events = list(run.events())
    types = [event.type for event in events]
    assert types[:2] == ["run.submitted", "turn.started"] and types[-1] == "turn.completed"
    results = {event.data["callId"]: event.data for event in events if event.type == "tool.result"}
    assert results["call_skill"]["output"].startswith("---\nname: py-release-notes\n")
    assert results["call_echo"]["output"] == {"text": "2.4.0"}
    assert results["call_clock"]["output"] == {"date": "2026-11-22"}

    record = run.result()
    assert (record.status, record.output_text, record.stop_reason, record.rounds, record.tool_calls) == ("completed", "Released 2.4.0 on 2026-11-22.", "end_turn", 2, 3)
    assert [(skill.name, skill.content_hash) for skill in record.skills] == [("py-release-notes", NOTES.bundle().content_hash)]
    assert record.error is None and record.finished_at is not None
    # The draft was upserted before the run, once per object and client: it is a workspace skill now.
    assert client.skills.get("py-release-notes").content_hash == NOTES.bundle().content_hash
    session.delete()


def test_a_failed_run_is_a_record_not_an_exception(client: Client, provider: ScriptedProvider) -> None:
    provider.script("run-overloaded", [{"error": {"status": 529, "type": "overloaded_error", "message": "Overloaded"}}])
    session = client.sessions.create(environments=[LAPTOP])
    run = session.run(message="Hello?", model=Model("anthropic", "run-overloaded"), provider_keys=KEYS)
    record = run.result()
    assert record.status == "failed"
    assert record.error is not None and record.error.code == "model_overloaded"
    assert [event.type for event in run.events()][-1] == "turn.failed"
    session.delete()


def test_skills_by_name_files_and_the_runs_of_a_session(client: Client, provider: ScriptedProvider) -> None:
    provider.script("run-files", [{"text": "Read."}, {"text": "Again."}])
    client.skills.upload(NOTES)
    session = client.sessions.create(environments=[LAPTOP])
    first = session.run(
        message="Read the changes.",
        model=Model("anthropic", "run-files"),
        provider_keys=KEYS,
        skills=["py-release-notes"],
        files=[RunFile("CHANGES.md", data=b"- exports CSV\n")],
    )
    assert first.result().output_text == "Read."
    submitted = next(event for event in first.events() if event.type == "run.submitted")
    assert submitted.data["files"] == [{"path": "CHANGES.md", "assetSha256": sha256_hex(b"- exports CSV\n")}]
    assert [skill["name"] for skill in submitted.data["skills"]] == ["py-release-notes"]

    second = session.run(message="Again.", model=Model("anthropic", "run-files"), provider_keys=KEYS)
    assert second.result().output_text == "Again."
    assert [run.id for run in session.runs.list().runs] == [second.id, first.id]
    assert session.runs.get(first.id).record.output_text == "Read."
    session.delete()


def test_a_run_pins_a_skill_version_and_records_the_version_it_used(client: Client, provider: ScriptedProvider) -> None:
    name = "py-pinned"
    client.skills.upload(Skill.from_content(f"---\nname: {name}\ndescription: One.\n---\nONE\n"))
    second = client.skills.upload(Skill.from_content(f"---\nname: {name}\ndescription: Two.\n---\nTWO\n"))
    load_then_answer: list[dict[str, object]] = [{"toolCalls": [{"id": "load", "name": "skills", "input": {"action": "load", "name": name}}]}, {"text": "Done."}]
    provider.script("run-pinned", load_then_answer)
    session = client.sessions.create(environments=[LAPTOP])

    pinned = session.run(message="Load.", model=Model("anthropic", "run-pinned"), provider_keys=KEYS, skills=[PinnedSkill(name, 1)])
    record = pinned.result()
    assert [(skill.name, skill.version, skill.pinned) for skill in record.skills] == [(name, 1, True)]
    loaded = next(event for event in pinned.events() if event.type == "tool.result")
    assert "ONE" in str(loaded.data["output"])

    provider.script("run-pinned", load_then_answer)
    current = session.run(message="Load.", model=Model("anthropic", "run-pinned"), provider_keys=KEYS, skills=[name]).result()
    assert [(skill.version, skill.pinned, skill.content_hash) for skill in current.skills] == [(2, False, second.content_hash)]
    session.delete()


def test_a_run_without_the_providers_key_is_refused(client: Client) -> None:
    session = client.sessions.create(environments=[LAPTOP])
    with pytest.raises(ServiceError) as refusal:
        session.run(message="Hi", model=Model("anthropic", "any"), provider_keys={})
    assert refusal.value.code == "provider_key_missing"
    session.delete()



# --- Custom agent loops (docs/runs.md) ---

# A synchronous agent-loop program (QuickJS): one model call on the message, answered in capitals with the configured suffix.
SHOUTING_LOOP = b"""function turn(input, configuration, host) {
  const answer = host.callModel({ v: 1, messages: [{ role: "user", content: input.message }] });
  host.emit({ v: 1, kind: "shouting" });
  return { v: 1, message: (answer.message.content + configuration.suffix).toUpperCase() };
}"""


@pytest.fixture(scope="module")
def loops() -> dict[str, bytes]:
    """agent-loop-js (an agent-loop component: model -> tools -> model, emitting {"kind": "turn_started"}) and the QuickJS program runtimes."""
    return build_components("agent-loop-js", "qjs-program-agent-loop", "qjs-program-tool")


def loop_operation(events: list[SessionEvent]) -> SessionEvent | None:
    """The loop's own execute operation, as the run's events show it: the default loop sends none."""
    return next((event for event in events if event.type == "operation.sent" and event.data.get("agentLoop") is True), None)


def test_a_run_admits_its_agent_loop_component_first_and_runs_it_in_place_of_the_default_loop(client: Client, provider: ScriptedProvider, echo_wasm: bytes, loops: dict[str, bytes]) -> None:
    loop = Component(unique(loops["agent-loop-js"]), kind="agentloop")
    loop_id = sha256_hex(loop.data)
    with pytest.raises(ServiceError) as unadmitted:
        client.env.prepare_ids(agentloops=[loop_id])
    assert unadmitted.value.code == "not_found"
    provider.script("run-component-loop", [
        {"toolCalls": [{"id": "call_echo", "name": "echo", "input": {"text": "via the loop"}}]},
        {"text": "Echoed by a custom loop."},
    ])  # fmt: skip
    sandbox = service_env("sandbox")
    session = client.sessions.create(environments=[sandbox], tools=[tool("echo", environment=sandbox, implementation=Component(echo_wasm))])

    run = session.run(message="Echo it.", model=Model("anthropic", "run-component-loop"), provider_keys=KEYS, agent_loop=AgentLoop(environment=sandbox, implementation=loop))

    record = run.result()
    assert (record.status, record.output_text, record.rounds, record.tool_calls) == ("completed", "Echoed by a custom loop.", 2, 1)
    events = list(run.events())
    operation = loop_operation(events)
    assert operation is not None and (operation.data["kind"], operation.data["environment"]) == ("execute", "sandbox")
    assert [event.data["event"] for event in events if event.type == "turn.progress"] == [{"v": 1, "kind": "turn_started"}, {"v": 1, "kind": "tool_calls", "round": 1, "count": 1}]
    assert [event.data["output"] for event in events if event.type == "tool.result"] == [{"text": "via the loop"}]
    # The client admitted it before submitting: the workspace has it now.
    assert client.env.prepare_ids(agentloops=[loop_id]) == [PreparedArtifact(loop_id, "agentloop", True)]
    session.delete()


def test_an_agent_loop_program_runs_with_its_configuration_by_program_prepared_program_or_id(client: Client, provider: ScriptedProvider, loops: dict[str, bytes]) -> None:
    shouting = program(runtime=Component(loops["qjs-program-agent-loop"], kind="agentloop"), source=SHOUTING_LOOP, configuration={"suffix": "!"})
    sandbox = service_env("sandbox")
    session = client.sessions.create(environments=[sandbox])
    model = Model("anthropic", "run-program-loop")

    provider.script("run-program-loop", [{"text": "quiet answer"}])
    run = session.run(message="hi", model=model, provider_keys=KEYS, agent_loop=AgentLoop(environment=sandbox, implementation=shouting))
    assert (run.result().status, run.result().output_text) == ("completed", "QUIET ANSWER!")
    events = list(run.events())
    assert loop_operation(events) is not None
    assert [event.data["event"] for event in events if event.type == "turn.progress"] == [{"v": 1, "kind": "shouting"}]

    # The loop's own configuration wins over the program's; the environment by name.
    provider.script("run-program-loop", [{"text": "louder"}])
    louder = session.run(message="hey", model=model, provider_keys=KEYS, agent_loop=AgentLoop(environment="sandbox", implementation=shouting, configuration={"suffix": "?"}))
    assert louder.result().output_text == "LOUDER?"

    # A prepared program (nothing left to admit) and an admitted agent loop's id are sent as they are.
    prepared = client.prepare(shouting)
    assert prepared.entrypoint == "turn"
    provider.script("run-program-loop", [{"text": "prepared"}])
    assert session.run(message="go", model=model, provider_keys=KEYS, agent_loop=AgentLoop(environment="sandbox", implementation=prepared)).result().output_text == "PREPARED!"
    loop_id = client.env.admit_component(Component(loops["agent-loop-js"], kind="agentloop"))
    provider.script("run-program-loop", [{"text": "by id"}])
    by_id = session.run(message="go", model=model, provider_keys=KEYS, agent_loop=AgentLoop(environment="sandbox", implementation=loop_id))
    assert by_id.result().output_text == "by id"
    assert [event.data["event"] for event in by_id.events() if event.type == "turn.progress"] == [{"v": 1, "kind": "turn_started"}]
    session.delete()


def test_an_agent_loop_is_refused_outside_the_sessions_service_environments_and_in_a_tools_form(client: Client, echo_wasm: bytes, loops: dict[str, bytes]) -> None:
    sandbox = service_env("sandbox")
    session = client.sessions.create(environments=[sandbox, LAPTOP], tools=[tool("clock", environment=LAPTOP)])
    loop = Component(loops["agent-loop-js"], kind="agentloop")

    def run_with(agent_loop: AgentLoop) -> None:
        session.run(message="hi", model=Model("anthropic", "never-called"), provider_keys=KEYS, agent_loop=agent_loop)

    # Checked against the session before anything is sent (nothing is admitted, no run exists).
    with pytest.raises(PlacementError, match=r"host environment laptop .*service environment"):
        run_with(AgentLoop(environment="laptop", implementation=loop))
    with pytest.raises(PlacementError, match=r"environment elsewhere, which session \S+ does not define"):
        run_with(AgentLoop(environment="elsewhere", implementation=loop))
    assert session.runs.list().runs == []
    # Refused when made: a host definition, a tool component, a program for a tool runtime, a malformed id.
    with pytest.raises(PlacementError, match="host environment laptop"):
        AgentLoop(environment=cast(Any, LAPTOP), implementation=loop)
    with pytest.raises(PlacementError, match='kind="agentloop"'):
        AgentLoop(environment=sandbox, implementation=Component(echo_wasm))
    with pytest.raises(PlacementError, match="needs an agent-loop runtime"):
        AgentLoop(environment=sandbox, implementation=program(runtime=Component(loops["qjs-program-tool"]), source=SHOUTING_LOOP))
    with pytest.raises(PlacementError, match="not an agent loop id"):
        AgentLoop(environment=sandbox, implementation="not-an-id")
    # A runtime digest that turns out to be a tool runtime is refused once resolved, before submitting.
    tool_runtime = client.env.admit_component(Component(loops["qjs-program-tool"]))
    with pytest.raises(PlacementError, match="runs on the tool runtime"):
        run_with(AgentLoop(environment=sandbox, implementation=program(runtime=tool_runtime, source=SHOUTING_LOOP)))
    assert session.runs.list().runs == []
    # The client cannot tell ids apart: the service refuses a tool's id as an agent loop with its code.
    with pytest.raises(ServiceError) as refusal:
        run_with(AgentLoop(environment=sandbox, implementation=client.env.admit_component(Component(echo_wasm))))
    assert refusal.value.code == "not_found"
    session.delete()


# --- client.sessions.create(run=...): a session and its first run in one call ---


def session_ids(client: Client) -> set[str]:
    return {session.id for session in client.sessions.all()}


@pytest.fixture
def submissions(client: Client, monkeypatch: pytest.MonkeyPatch) -> list[dict[str, bool | None]]:
    """Every CreateRun the client sends apart from CreateSession (`submit_run`): each time, whether
    the session's host environments are attached, as the service reports it at that moment."""
    seen: list[dict[str, bool | None]] = []
    submit_run = skillenv.sessions.submit_run

    def recording(rpc: Any, session_id: str, run_input: Any) -> Any:
        seen.append({environment.name: environment.host_attached for environment in client.sessions.get(session_id).environments if environment.kind == "host"})
        return submit_run(rpc, session_id, run_input)

    monkeypatch.setattr(skillenv.sessions, "submit_run", recording)
    return seen


def test_create_with_a_run_answers_the_session_and_its_first_run_uploading_the_runs_skill_first(
    client: Client, provider: ScriptedProvider, echo_wasm: bytes, submissions: list[dict[str, bool | None]]
) -> None:
    provider.script("first-run", [
        {"toolCalls": [
            {"id": "call_list", "name": "skills", "input": {"action": "list"}},
            {"id": "call_echo", "name": "echo", "input": {"text": "together"}},
        ]},
        {"text": "Started together."},
    ])  # fmt: skip
    first_steps = Skill.from_content("---\nname: py-first-steps\ndescription: Gets a session going.\n---\n# First steps\n")
    sandbox = service_env("sandbox")

    created = client.sessions.create(
        environments=[sandbox],
        tools=[tool("echo", environment=sandbox, implementation=Component(echo_wasm))],
        run=RunOptions(message="Begin.", model=Model("anthropic", "first-run"), provider_keys=KEYS, skills=[first_steps]),
    )

    assert_type(created, SessionWithRun)
    session, run = created
    assert submissions == []  # the run went with CreateSession, in one call
    assert (created.session, created.run) == (session, run)
    assert session.state == "ready" and session.hosts == {}
    assert (run.session_id, run.status) == (session.id, "running")
    record = run.result()
    assert (record.status, record.output_text, record.tool_calls) == ("completed", "Started together.", 2)
    results = {event.data["callId"]: event.data for event in run.events() if event.type == "tool.result"}
    assert results["call_list"]["output"] == {"skills": [{"name": "py-first-steps", "description": "Gets a session going."}]}
    assert results["call_echo"]["output"] == {"text": "together"}
    # The draft was upserted first: a workspace skill, snapshotted by the run.
    assert [(skill.name, skill.content_hash) for skill in record.skills] == [("py-first-steps", first_steps.bundle().content_hash)]
    assert client.skills.get("py-first-steps").content_hash == first_steps.bundle().content_hash
    assert [listed.id for listed in session.runs.list().runs] == [run.id]
    assert session.runs.get(run.id).record.output_text == "Started together."
    # Without a run, create answers the session alone.
    alone = client.sessions.create(environments=[sandbox])
    assert_type(alone, Session)
    alone.delete()
    session.delete()


def test_create_with_a_run_admits_tools_and_uploads_skills_and_files_in_passes_that_overlap_each_at_most_4_at_a_time(
    client: Client, provider: ScriptedProvider, echo_wasm: bytes, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Spec §4.1 rule 4. Each pass's item ends in one call of its own, held for a while at the
    client's transport: a tool's AdmitTool, a draft skill's PutSkill, a file's Finalize. At any
    moment each pass has at most its bound of them in flight; passes that overlap have theirs in
    flight together."""
    items, tag = 8, uuid.uuid4().hex
    sandbox = service_env("sandbox")
    tools = [tool(f"echo{i}", environment=sandbox, implementation=Component(unique(echo_wasm))) for i in range(items)]
    skills = [Skill.from_content(f"---\nname: py-overlap-{i}\ndescription: Skill {i}.\n---\n# {tag}\n") for i in range(items)]
    files = [RunFile(f"overlap/{i}.txt", data=f"{tag} {i}".encode()) for i in range(items)]
    file_hashes = {sha256_hex(file.data) for file in files if file.data is not None}

    def pass_of(request: Any) -> str | None:
        kind = type(request).__name__
        if kind == "AdmitToolRequest":
            return "tools"
        if kind == "PutSkillRequest":
            return "skills"
        if kind == "FinalizeRequest" and request.sha256 in file_hashes:
            return "files"
        return None

    lock = threading.Lock()
    in_flight = {"tools": 0, "skills": 0, "files": 0}
    seen = {"tools": 0, "skills": 0, "files": 0}
    peak = {"tools": 0, "skills": 0, "files": 0, "together": 0}
    rpc_class: Any = importlib.import_module("skillenv._rpc").Rpc
    call: Callable[..., Any] = rpc_class.call

    def holding(rpc: Any, method: Any, request: Any, timeout: float | None = None) -> Any:
        kind = pass_of(request)
        if kind is None:
            return call(rpc, method, request, timeout)
        with lock:
            seen[kind] += 1
            in_flight[kind] += 1
            peak[kind] = max(peak[kind], in_flight[kind])
            peak["together"] = max(peak["together"], sum(in_flight.values()))
        try:
            time.sleep(0.4)
            return call(rpc, method, request, timeout)
        finally:
            with lock:
                in_flight[kind] -= 1

    monkeypatch.setattr(rpc_class, "call", holding)
    provider.script("py-overlap", [{"text": "All staged."}])

    session, run = client.sessions.create(
        environments=[sandbox], tools=tools, run=RunOptions(message="Go.", model=Model("anthropic", "py-overlap"), provider_keys=KEYS, skills=skills, files=files)
    )

    assert seen == {"tools": items, "skills": items, "files": items}
    assert peak == {"tools": 4, "skills": 4, "files": 4, "together": 12}
    record = run.result()
    assert (record.status, record.output_text) == ("completed", "All staged.")
    assert len(session.record.tools) == items
    session.delete()


def test_create_with_a_run_serves_its_hosts_before_the_run_can_call_them(client: Client, provider: ScriptedProvider, submissions: list[dict[str, bool | None]]) -> None:
    provider.script("first-run-host", [
        {"toolCalls": [{"id": "call_clock", "name": "clock", "input": {}}]},
        {"text": "Today is 2026-11-22."},
    ])  # fmt: skip
    laptop = host_env("laptop", {"clock": clock})

    session, run = client.sessions.create(
        environments=[laptop],
        tools=[tool("clock", environment=laptop)],
        run=RunOptions(message="What day is it?", model=Model("anthropic", "first-run-host"), provider_keys=KEYS),
    )

    # The session first, then its host, then the run: submitted (with CreateRun) once the service had the host attached.
    assert submissions == [{"laptop": True}]
    assert session.hosts["laptop"].state == "connected"
    assert run.session_id == session.id
    record = run.result()
    assert (record.status, record.output_text) == ("completed", "Today is 2026-11-22.")
    # The host was attached when the model called its tool: a returned result, not host_unavailable.
    results = [event.data for event in run.events() if event.type == "tool.result"]
    assert [(result["callId"], result["outcome"], result.get("output")) for result in results] == [("call_clock", "returned", {"date": "2026-11-22"})]
    assert [listed.id for listed in session.runs.list().runs] == [run.id]
    session.delete()


@pytest.mark.parametrize("serve_hosts", [False, True], ids=["in-one-call", "hosts-served-first"])
def test_a_first_run_the_service_refuses_leaves_no_session_behind(client: Client, serve_hosts: bool) -> None:
    laptop = host_env("laptop", {"clock": clock})
    model = Model("anthropic", "never-called")
    before = session_ids(client)

    def create_with(run: RunOptions) -> None:
        client.sessions.create(environments=[laptop], tools=[tool("clock", environment=laptop)], serve_hosts=serve_hosts, run=run)

    with pytest.raises(ServiceError) as missing_key:
        create_with(RunOptions(message="Hi", model=model, provider_keys={}))
    assert missing_key.value.code == "provider_key_missing"
    with pytest.raises(ServiceError) as unknown_skill:
        create_with(RunOptions(message="Hi", model=model, provider_keys=KEYS, skills=["py-no-such-skill"]))
    assert unknown_skill.value.code == "skill_not_found"

    assert session_ids(client) == before


def test_create_with_a_run_checks_its_agent_loop_against_the_definitions_before_anything_is_sent(client: Client, loops: dict[str, bytes]) -> None:
    sandbox = service_env("sandbox")
    draft = Skill.from_content("---\nname: py-never-uploaded\ndescription: Refused before upload.\n---\nNever.\n")
    loop = Component(loops["agent-loop-js"], kind="agentloop")
    before = session_ids(client)

    def create_with(agent_loop: AgentLoop) -> None:
        run = RunOptions(message="hi", model=Model("anthropic", "never-called"), provider_keys=KEYS, skills=[draft], agent_loop=agent_loop)
        client.sessions.create(environments=[sandbox, LAPTOP], tools=[tool("clock", environment=LAPTOP)], run=run)

    with pytest.raises(PlacementError, match=r"host environment laptop of the session.*service environment"):
        create_with(AgentLoop(environment="laptop", implementation=loop))
    with pytest.raises(PlacementError, match=r"environment elsewhere, which the session does not define"):
        create_with(AgentLoop(environment="elsewhere", implementation=loop))
    with pytest.raises(PlacementError, match=r"a definition of environment sandbox that differs from the session's"):
        create_with(AgentLoop(environment=service_env("sandbox", network=["https://example.com"]), implementation=loop))
    # Nothing was uploaded and no session was created.
    with pytest.raises(ServiceError) as never_uploaded:
        client.skills.get("py-never-uploaded")
    assert never_uploaded.value.code == "skill_not_found"
    assert session_ids(client) == before


def test_create_with_a_run_admits_its_agent_loop_and_runs_it(client: Client, provider: ScriptedProvider, loops: dict[str, bytes]) -> None:
    shouting = program(runtime=Component(loops["qjs-program-agent-loop"], kind="agentloop"), source=SHOUTING_LOOP, configuration={"suffix": "!"})
    sandbox = service_env("sandbox")
    provider.script("first-run-loop", [{"text": "first words"}])

    session, run = client.sessions.create(
        environments=[sandbox],
        run=RunOptions(message="hi", model=Model("anthropic", "first-run-loop"), provider_keys=KEYS, agent_loop=AgentLoop(environment=sandbox, implementation=shouting)),
    )

    assert (run.result().status, run.result().output_text) == ("completed", "FIRST WORDS!")
    assert [event.data["event"] for event in run.events() if event.type == "turn.progress"] == [{"v": 1, "kind": "shouting"}]
    session.delete()
