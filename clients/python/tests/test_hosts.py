"""Host environments against the real service: Python functions served over HostService/Connect."""

from __future__ import annotations

import tempfile
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from support import Service

from skillenv import (
    Client,
    Failure,
    HostClosedError,
    HostState,
    HostToolContext,
    Opaque,
    Reconnect,
    Returned,
    Session,
    SessionEvent,
    ToolFailure,
    Unknown,
    host_env,
    tool,
)


def add(input: dict[str, int], context: HostToolContext) -> dict[str, Any]:
    context.progress(f"adding {input['a']} and {input['b']}")
    return {"sum": input["a"] + input["b"], "tool": context.tool, "implementation": context.implementation}


def divide(input: dict[str, int], context: HostToolContext) -> float:
    if input["by"] == 0:
        raise ToolFailure("division_by_zero", "cannot divide by zero", details={"dividend": str(input["n"])})
    return input["n"] / input["by"]


def crash(input: Any, context: HostToolContext) -> None:
    raise RuntimeError("the handler broke")


def wait_for_cancel(input: Any, context: HostToolContext) -> None:
    context.cancelled.wait()
    raise RuntimeError("stopped")


LAPTOP = host_env("laptop", {"add": add, "divide": divide, "crash": crash, "wait_for_cancel": wait_for_cancel})
TOOLS = [
    tool("add", environment=LAPTOP, implementation=Opaque({"handler": "math.add"})),
    tool("divide", environment=LAPTOP),
    tool("crash", environment=LAPTOP),
    tool("wait_for_cancel", environment=LAPTOP),
    tool("unserved", environment=LAPTOP),
]


@pytest.fixture
def session(client: Client) -> Iterator[Session]:
    created = client.sessions.create(environments=[LAPTOP], tools=TOOLS)
    yield created
    created.delete()


def test_create_answers_once_the_host_is_connected(session: Session) -> None:
    host = session.hosts["laptop"]
    assert (host.state, host.error) == ("connected", None)
    assert session.refresh().environments[0].host_attached is True


def test_a_host_tool_is_a_python_function_called_through_the_journal(session: Session) -> None:
    receipt = session.call_tool("add", {"a": 2, "b": 3})
    assert receipt == Returned({"sum": 5, "tool": "add", "implementation": {"handler": "math.add"}}, receipt.operation_id)
    events = operation_events(session, receipt.operation_id)
    assert [event.type for event in events] == ["operation.sent", "operation.accepted", "operation.progress", "operation.receipt"]
    assert events[2].data["data"] == "adding 2 and 3"


def test_a_tool_failure_keeps_its_code_and_other_errors_are_tool_errors(session: Session) -> None:
    failed = session.call_tool("divide", {"n": 1, "by": 0})
    assert isinstance(failed, Failure)
    assert (failed.code, failed.message, failed.retryable, failed.details) == ("division_by_zero", "cannot divide by zero", False, {"dividend": "1"})
    crashed = session.call_tool("crash", {})
    assert isinstance(crashed, Failure) and (crashed.code, crashed.message) == ("tool_error", "the handler broke")
    unserved = session.call_tool("unserved", {})
    assert isinstance(unserved, Failure) and unserved.code == "tool_not_served"


def test_the_deadline_cancels_the_handler(session: Session) -> None:
    receipt = session.call_tool("wait_for_cancel", {}, timeout=0.5)
    assert isinstance(receipt, Failure) and receipt.code == "timeout"


def test_commands_run_concurrently(client: Client) -> None:
    # Each handler returns only once both have started: served one after the other, the first would give up.
    meeting = threading.Barrier(2, timeout=30)
    pair = host_env("pair", {"meet": lambda input, context: meeting.wait()})
    session = client.sessions.create(environments=[pair], tools=[tool("meet", environment=pair)])
    receipts: list[Any] = []
    calls = [threading.Thread(target=lambda: receipts.append(session.call_tool("meet", {}))) for _ in range(2)]
    for call in calls:
        call.start()
    for call in calls:
        call.join()
    assert sorted(receipt.output for receipt in receipts) == [0, 1]
    session.delete()


def test_the_end_of_the_session_closes_its_host_for_good(client: Client) -> None:
    session = client.sessions.create(environments=[LAPTOP], tools=TOOLS, serve_hosts=False)
    host = client.sessions.get(session.id).serve(LAPTOP)  # served by another handle than the one that ends it
    host.wait_connected(timeout=30)
    session.end()
    assert host.wait(timeout=30)
    assert host.state == "closed"
    assert isinstance(host.error, HostClosedError) and host.error.code == "session_ended"


def test_a_newer_host_replaces_the_older_which_stays_closed(session: Session, service: Service) -> None:
    first = session.hosts["laptop"]
    with service.client() as elsewhere:
        second = elsewhere.sessions.get(session.id).serve(LAPTOP)
        second.wait_connected(timeout=10)
        assert first.wait(timeout=10)
        assert first.state == "closed"
        assert isinstance(first.error, HostClosedError) and first.error.code == "replaced"
        assert isinstance(session.call_tool("add", {"a": 1, "b": 1}), Returned)


def test_without_a_host_a_call_fails_host_unavailable(client: Client) -> None:
    session = client.sessions.create(environments=[LAPTOP], tools=TOOLS, serve_hosts=False)
    assert session.environments[0].host_attached is False
    receipt = session.call_tool("add", {"a": 1, "b": 2})
    assert isinstance(receipt, Failure) and (receipt.code, receipt.retryable) == ("host_unavailable", True)
    session.delete()


def test_the_host_reconnects_when_the_service_restarts() -> None:
    with tempfile.TemporaryDirectory(prefix="skillenv-python-restart-") as data_dir:
        service = Service.start(data_dir)
        try:
            with service.client(reconnect=Reconnect(initial_delay=0.05, max_delay=0.5)) as client:
                session = client.sessions.create(environments=[LAPTOP], tools=TOOLS)
                reconnected = threading.Event()

                def changed(state: HostState) -> None:
                    # Called at changes of state only: "connected" again means it went through "connecting".
                    if state == "connected":
                        reconnected.set()

                session.hosts["laptop"].on_state_change(changed)

                service = service.restart()
                assert reconnected.wait(timeout=60)
                receipt = session.call_tool("add", {"a": 20, "b": 22})
                assert isinstance(receipt, Returned) and receipt.output["sum"] == 42
                session.delete()
        finally:
            service.process.stop()


def test_a_command_in_flight_when_the_stream_drops_ends_unknown(session: Session) -> None:
    results: list[Any] = []
    call = threading.Thread(target=lambda: results.append(session.call_tool("wait_for_cancel", {})))
    call.start()
    events = session.events()
    next(event for event in events if event.type == "operation.accepted")
    events.cancel()
    session.hosts["laptop"].stop()
    call.join()
    assert isinstance(results[0], Unknown)


def operation_events(session: Session, operation_id: str) -> list[SessionEvent]:
    """The journal's events of one operation, up to its receipt."""
    events: list[SessionEvent] = []
    with session.events() as stream:
        for event in stream:
            if event.data.get("operationId") == operation_id:
                events.append(event)
                if event.type == "operation.receipt":
                    break
    return events
