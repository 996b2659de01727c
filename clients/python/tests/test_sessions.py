"""Sessions against the real service: the echo-wat tool in the service environment, receipts, events."""

from __future__ import annotations

import pytest

from skillenv import Client, Component, PlacementError, Returned, ServiceError, Session, host_env, service_env, tool
from skillenv.bundle import sha256_hex

SANDBOX = service_env("sandbox")


@pytest.fixture
def session(client: Client, echo_wasm: bytes) -> Session:
    echo = tool("echo", environment=SANDBOX, implementation=Component(echo_wasm), description="Echoes its input.")
    return client.sessions.create(environments=[SANDBOX], tools=[echo])


def test_create_admits_the_component_and_sets_the_environment_up(session: Session, echo_wasm: bytes, client: Client) -> None:
    assert session.state == "ready"
    assert [(environment.name, environment.kind, environment.state) for environment in session.environments] == [("sandbox", "service", "ready")]
    # Admitted: a placement by tool id now needs no bytes.
    by_id = tool("echo", environment=SANDBOX, implementation=sha256_hex(echo_wasm))
    assert client.sessions.create(environments=[SANDBOX], tools=[by_id]).state == "ready"


def test_call_tool_answers_the_terminal_receipt(session: Session) -> None:
    receipt = session.call_tool("echo", {"text": "hi", "n": 21, "nested": [True, None, 1.5]})
    assert isinstance(receipt, Returned)
    assert receipt.output == {"text": "hi", "n": 21, "nested": [True, None, 1.5]}
    assert receipt.operation_id.startswith("op_")


def test_refusals_are_service_errors_with_a_stable_code(session: Session, client: Client) -> None:
    with pytest.raises(ServiceError) as unknown_tool:
        session.call_tool("nope", {})
    assert unknown_tool.value.code == "tool_not_found"
    with pytest.raises(ServiceError) as unknown_session:
        client.sessions.get("ses_00000000000000000000000000")
    assert unknown_session.value.code == "session_not_found"


def test_events_replay_the_journal_then_end_after_the_session_ends(session: Session) -> None:
    receipt = session.call_tool("echo", {"text": "journaled"})
    session.end()
    events = list(session.events())
    types = [event.type for event in events]
    # The environment's setup is journaled like any operation.
    assert types[:4] == ["session.created", "operation.sent", "operation.receipt", "environment.ready"]
    assert types[-1] == "session.ended"
    assert [event.seq for event in events] == list(range(1, len(events) + 1))
    sent = next(event for event in events if event.type == "operation.sent" and event.data.get("tool") == "echo")
    assert sent.data["operationId"] == receipt.operation_id and sent.data["input"] == {"text": "journaled"}
    done = next(event for event in events if event.type == "operation.receipt" and event.data["operationId"] == receipt.operation_id)
    assert done.data["receipt"] == {"returned": {"output": {"text": "journaled"}}}
    # Resuming after a seq replays only what follows it.
    assert [event.seq for event in session.events(after=sent.seq)] == [event.seq for event in events if event.seq > sent.seq]


def test_a_live_stream_delivers_events_as_they_are_written_until_cancelled(session: Session) -> None:
    with session.events() as stream:
        replayed = [next(stream).type]
        while replayed[-1] != "environment.ready":
            replayed.append(next(stream).type)
        assert replayed == ["session.created", "operation.sent", "operation.receipt", "environment.ready"]
        receipt = session.call_tool("echo", {"text": "live"})
        assert next(stream).data["operationId"] == receipt.operation_id
        stream.cancel()
        assert list(stream) == []


def test_an_ended_session_refuses_new_work(session: Session) -> None:
    record = session.end()
    assert record.state == "ended" and record.ended_at is not None
    with pytest.raises(ServiceError) as refusal:
        session.call_tool("echo", {})
    assert refusal.value.code == "session_ended"


def test_a_deleted_session_is_unknown(session: Session, client: Client) -> None:
    session.delete()
    with pytest.raises(ServiceError) as refusal:
        session.refresh()
    assert refusal.value.code == "session_not_found"
    assert session.id not in [listed.id for listed in client.sessions.all()]


def test_a_placement_is_checked_before_anything_is_sent(client: Client) -> None:
    with pytest.raises(PlacementError):
        tool("echo", environment=SANDBOX)  # the service environment needs a tool id or a component
    with pytest.raises(PlacementError):
        client.sessions.create(environments=[SANDBOX], tools=[tool("echo", environment=host_env("elsewhere"))])
