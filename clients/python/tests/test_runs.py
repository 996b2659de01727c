"""Runs against the real service and the scripted model provider: drafts uploaded, tools called, events, result."""

from __future__ import annotations

from typing import Any

import pytest
from support import ScriptedProvider

from skillenv import Client, Component, HostToolContext, Model, RunFile, ServiceError, Skill, host_env, service_env, tool
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


def test_a_run_without_the_providers_key_is_refused(client: Client) -> None:
    session = client.sessions.create(environments=[LAPTOP])
    with pytest.raises(ServiceError) as refusal:
        session.run(message="Hi", model=Model("anthropic", "any"), provider_keys={})
    assert refusal.value.code == "provider_key_missing"
    session.delete()

