"""Approvals against the real service (docs/runs.md, "Approvals"): a tool placed with approval="always" waits for a decision."""

from __future__ import annotations

from typing import Any

import pytest
from support import ScriptedProvider

from skillenv import Client, HostToolContext, McpDefinitionError, Model, PlacementError, ServiceError, host_env, mcp_env, tool

KEYS = {"anthropic": "sk-ant-scripted"}


def test_pending_approvals_are_iterated_and_decided_once(client: Client, provider: ScriptedProvider) -> None:
    called: list[Any] = []

    def pay(input: Any, context: HostToolContext) -> dict[str, str]:
        called.append(input)
        return {"paid": str(input["amount"])}

    wallet = host_env("wallet", {"pay": pay})
    provider.script("py-approval-model", [
        {"toolCalls": [
            {"id": "small", "name": "pay", "input": {"amount": 5}},
            {"id": "large", "name": "pay", "input": {"amount": 5000}},
        ]},
        {"text": "Paid the small one."},
    ])  # fmt: skip
    session = client.sessions.create(environments=[wallet], tools=[tool("pay", environment=wallet, approval="always")])
    assert [placed.approval for placed in session.record.tools] == ["always"]
    run = session.run(message="Pay both.", model=Model("anthropic", "py-approval-model"), provider_keys=KEYS)

    seen = []
    for approval in run.pending_approvals(timeout=120):
        seen.append((approval.call_id, approval.tool, approval.input, approval.status))
        # Nothing was sent before a decision.
        assert called == [] or approval.call_id == "large"
        if approval.input["amount"] < 100:
            decided = run.approve(approval, label="py-test")
            assert (decided.status, decided.decided_by and decided.decided_by.label) == ("approved", "py-test")
        else:
            decided = run.deny(approval.id, label="py-test", message="too much")
            assert (decided.status, decided.message) == ("denied", "too much")
    assert seen == [("small", "pay", {"amount": 5}, "pending"), ("large", "pay", {"amount": 5000}, "pending")]

    record = run.result(timeout=120)
    assert record.status == "completed"
    assert called == [{"amount": 5}]
    assert [(approval.call_id, approval.status) for approval in run.approvals()] == [("small", "approved"), ("large", "denied")]
    results = {event.data["callId"]: event.data for event in run.events() if event.type == "tool.result"}
    assert results["large"]["error"] == {"code": "tool_call_denied", "message": "too much"}
    with pytest.raises(ServiceError) as refused:
        run.approve(run.approvals()[0])
    assert refused.value.code == "approval_decided"


def test_an_unknown_approval_setting_is_refused_before_anything_is_sent() -> None:
    with pytest.raises(PlacementError):
        tool("pay", environment=host_env("wallet", {}), approval="sometimes")  # type: ignore[arg-type]


def test_an_mcp_environment_takes_approval_for_every_tool_it_exposes() -> None:
    assert mcp_env("gated", url="http://127.0.0.1:1/mcp", approval="always").approval == "always"
    assert mcp_env("open", url="http://127.0.0.1:1/mcp").approval == "never"
    with pytest.raises(McpDefinitionError) as refused:
        mcp_env("gated", url="http://127.0.0.1:1/mcp", approval="sometimes")  # type: ignore[arg-type]
    assert refused.value.code == "invalid_approval"
