"""The client: one gRPC channel to the service, its skills, artifacts (`env`) and sessions."""

from __future__ import annotations

import dataclasses
from types import TracebackType
from typing import overload

from skillenv._gen.skillenv.status.v1 import status_pb2
from skillenv._rpc import Rpc
from skillenv.assets import UploadResult, upload_asset
from skillenv.bundle import DEFAULT_BUNDLE_LIMITS, BundleLimits
from skillenv.env import EnvClient, ImplementationResolver
from skillenv.hosts import Reconnect
from skillenv.programs import Program, ResolvedProgram
from skillenv.runs import AgentLoop, AgentLoopImplementation, ResolvedAgentLoopImplementation, agent_loop_configuration, agent_loop_service_environment
from skillenv.sessions import SessionDeps, SessionsClient
from skillenv.skill import Skill
from skillenv.skills import SkillsClient, UploadedSkill
from skillenv.tools import ToolPlacement, service_environment_of


class Client:
    """A client of the service at `base_url` ("http://127.0.0.1:8080": gRPC over plaintext HTTP/2;
    https: over TLS), authenticated with a workspace's API key.

    `bundle_limits` are the server's SERVICE_SKILL_* limits when they differ from the documented
    defaults: skill uploads breaking them are refused before anything is sent. `reconnect` is the
    backoff of host environments served through this client, and of the channel's own
    reconnections. `close()` (or leaving a `with` block)
    stops those hosts and closes the channel.
    """

    def __init__(self, base_url: str, api_key: str, *, bundle_limits: BundleLimits = DEFAULT_BUNDLE_LIMITS, reconnect: Reconnect = Reconnect()) -> None:
        self._rpc = Rpc(base_url, api_key, (reconnect.initial_delay, reconnect.max_delay))
        self.skills = SkillsClient(self._rpc, bundle_limits)
        self.env = EnvClient(self._rpc)
        # One resolver for both, so an implementation prepared here is not admitted again by a session.
        self._resolve = ImplementationResolver(self.env)
        self._deps = SessionDeps(rpc=self._rpc, uploads=_Uploads(self, self._resolve), reconnect=reconnect)
        self.sessions = SessionsClient(self._deps, self._resolve)

    def upload_asset(self, data: bytes) -> UploadResult:
        """Uploads bytes as a workspace asset (presign, PUT, finalize); nothing is sent when the workspace has them."""
        return upload_asset(self._rpc, data)

    def status(self) -> status_pb2.GetWorkspaceStatusResponse:
        """The workspace's numbers (GetWorkspaceStatus, docs/api.md "Workspace status"): its sessions
        by state on the answering server, its runs of the last hour by status, and the worker pool's
        slots with this workspace's share."""
        return self._rpc.call(self._rpc.status.GetWorkspaceStatus, status_pb2.GetWorkspaceStatusRequest())

    @overload
    def prepare(self, placed: ToolPlacement) -> ToolPlacement: ...
    @overload
    def prepare(self, placed: AgentLoop) -> AgentLoop: ...
    @overload
    def prepare(self, placed: Program) -> ResolvedProgram: ...
    def prepare(self, placed: ToolPlacement | AgentLoop | Program) -> ToolPlacement | AgentLoop | ResolvedProgram:
        """Admits what a tool placed in a service environment definition, a run's agent loop placed
        in one, or a Program needs and loads it on every worker (spec §4.3), without a session and
        without granting anything. Answers the same placement (or AgentLoop) with its
        implementation resolved to ids and its configuration kept (an agent loop's: its own, else
        the program's), which any session of any client of the same workspace can use without
        admitting anything: a tool among a session's `tools`, an agent loop as a run's
        `agent_loop`. A placement whose environment is given by name, or is of another kind, is
        refused (PlacementError) before any call. Preparing again checks current readiness."""
        if isinstance(placed, Program):
            return self.env.prepare(placed)
        if isinstance(placed, AgentLoop):
            return self._prepare_agent_loop(placed)
        environment, given = service_environment_of(placed)
        implementation = self._resolve(given)
        if isinstance(implementation, str):
            self.env.prepare_ids(tools=[implementation])
        else:
            self.env.prepare_ids(programs=[implementation.id], tools=[implementation.runtime])
        return dataclasses.replace(placed, environment=environment, implementation=implementation)

    def _prepare_agent_loop(self, loop: AgentLoop) -> AgentLoop:
        environment = agent_loop_service_environment(loop)
        implementation = self._resolve(loop.implementation, "agentloop")
        if isinstance(implementation, str):
            self.env.prepare_ids(agentloops=[implementation])
        else:
            self.env.prepare_ids(programs=[implementation.id], agentloops=[implementation.runtime])
        return dataclasses.replace(loop, environment=environment, implementation=implementation, configuration=agent_loop_configuration(loop))

    def close(self) -> None:
        for host in list(self._deps.hosts):
            host.stop()
        self._rpc.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, traceback: TracebackType | None) -> None:
        self.close()


class _Uploads:
    """Runs upload through the client's skills client, so a skill uploaded explicitly is not uploaded again by a run,
    and admit agent loops through the resolver tools use, so a Component or Program is admitted once for both."""

    def __init__(self, client: Client, resolve: ImplementationResolver) -> None:
        self._client = client
        self._resolve = resolve

    def upload_skill(self, skill: Skill) -> UploadedSkill:
        return self._client.skills.upload(skill)

    def upload_asset(self, data: bytes) -> UploadResult:
        return self._client.upload_asset(data)

    def admit_agent_loop(self, implementation: AgentLoopImplementation) -> ResolvedAgentLoopImplementation:
        return self._resolve(implementation, "agentloop")
