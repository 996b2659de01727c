"""The workspace's status (GetWorkspaceStatus) through the Python client."""

from __future__ import annotations

from skillenv import Client, host_env


def test_status_counts_the_workspaces_sessions_and_shows_the_pool(client: Client) -> None:
    before = client.status()
    session = client.sessions.create(environments=[host_env("laptop")])
    try:
        after = client.status()
        assert after.sessions.active == before.sessions.active + 1
        assert after.runs_last_hour.since.ToMilliseconds() > 0
        assert after.pool.available
        assert after.pool.tools.total > 0
        assert after.pool.tools.workspace_busy <= after.pool.tools.busy
    finally:
        session.end()
