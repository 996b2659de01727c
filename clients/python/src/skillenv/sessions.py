"""Sessions (docs/sessions.md): named environments, the tools placed in them, tool calls, runs, the journal."""

from __future__ import annotations

import weakref
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, ClassVar, Literal, NamedTuple, Union, cast, overload

from skillenv._gen.skillenv.sessions.v1 import common_pb2, runs_pb2, sessions_pb2
from skillenv._rpc import Rpc
from skillenv._wire import datetime_of, from_value, optional_datetime_of, to_struct, to_value
from skillenv.environments import ServiceEnvironment, SetupMode
from skillenv.errors import ServiceError
from skillenv.events import EventStream
from skillenv.extension import ExtensionEnvironment
from skillenv.mcp import McpEnvironment
from skillenv.hosts import HostConnection, HostEnvironment, Reconnect
from skillenv.programs import ResolvedProgram
from skillenv.runs import AgentLoop, Model, Run, RunFile, RunOptions, RunRecord, RunSkill, RunUploads, check_agent_loop_binding, check_agent_loop_placed_in, prepare_run_input, submit_run
from skillenv.tools import Environment, Opaque, PlacementError, ResolvedToolImplementation, ServiceToolImplementation, ToolImplementation, ToolPlacement, check_placed_in

# Implementations admitted at once while creating a session, as for skill uploads.
_RESOLVE_CONCURRENCY = 4

SessionState = Literal["setting_up", "ready", "failed", "ended"]
EnvironmentState = Literal["pending", "ready", "failed", "detached"]


# --- Receipts: how an environment operation ended (spec §3 rule 2) ---


@dataclass(frozen=True)
class Returned:
    outcome: ClassVar[Literal["returned"]] = "returned"
    output: Any
    operation_id: str = ""


@dataclass(frozen=True)
class Failure:
    outcome: ClassVar[Literal["failure"]] = "failure"
    code: str
    message: str
    retryable: bool = False
    """True only when nothing took effect and a later attempt may succeed."""
    details: Mapping[str, str] = field(default_factory=dict)
    operation_id: str = ""


@dataclass(frozen=True)
class Unknown:
    """It may or may not have taken effect; the service never replays it."""

    outcome: ClassVar[Literal["unknown"]] = "unknown"
    message: str
    operation_id: str = ""


Receipt = Union[Returned, Failure, Unknown]


def receipt_of(message: common_pb2.Receipt, operation_id: str = "") -> Receipt:
    outcome = message.WhichOneof("outcome")
    if outcome == "returned":
        return Returned(from_value(message.returned.output), operation_id)
    if outcome == "failure":
        failure = message.failure
        return Failure(failure.code, failure.message, failure.retryable, dict(failure.details), operation_id)
    if outcome == "unknown":
        return Unknown(message.unknown.message, operation_id)
    raise RuntimeError("the server answered a receipt without an outcome")


# --- Records: what the server answered ---


@dataclass(frozen=True)
class EnvironmentStatus:
    name: str
    kind: Literal["service", "host", "extension", "mcp"]
    setup: SetupMode
    state: EnvironmentState
    host_attached: bool | None = None
    """Host environments only: whether a host's command stream is open for it on the server that answered."""

    @classmethod
    def from_message(cls, message: sessions_pb2.Environment) -> EnvironmentStatus:
        kind = cast(Literal["service", "host", "extension", "mcp"], message.WhichOneof("kind"))
        host_attached = message.host.attached if kind == "host" else None
        return cls(message.name, kind, cast(SetupMode, message.setup), cast(EnvironmentState, message.state), host_attached)


@dataclass(frozen=True)
class PlacedTool:
    name: str
    description: str
    environment: str
    approval: Literal["always", "never"] = "never"
    """"always": each call of a run waits for a person's decision (docs/runs.md, "Approvals")."""


@dataclass(frozen=True)
class SessionRecord:
    """A session as the server last reported it."""

    id: str
    state: SessionState
    """"ready" once every automatic environment is set up."""
    environments: list[EnvironmentStatus]
    tools: list[PlacedTool]
    created_at: datetime
    ended_at: datetime | None

    @classmethod
    def from_message(cls, message: sessions_pb2.Session) -> SessionRecord:
        return cls(
            id=message.id,
            state=cast(SessionState, message.state),
            environments=[EnvironmentStatus.from_message(environment) for environment in message.environments],
            tools=[PlacedTool(tool.name, tool.description, tool.environment, "always" if tool.approval == "always" else "never") for tool in message.tools],
            created_at=datetime_of(message.created_at),
            ended_at=optional_datetime_of(message, "ended_at"),
        )


@dataclass(frozen=True)
class SetupResult:
    environment: EnvironmentStatus
    receipt: Receipt | None
    """The setup operation's receipt; None when the environment was ready already."""


@dataclass(frozen=True)
class SessionPage:
    sessions: list[Session]
    """Newest first."""
    next_page_token: str
    """Empty on the last page."""


@dataclass(frozen=True)
class RunPage:
    runs: list[Run]
    """Newest first."""
    next_page_token: str
    """Empty on the last page."""


@dataclass(frozen=True)
class SessionDeps:
    """What session handles need from their client."""

    rpc: Rpc
    uploads: RunUploads
    reconnect: Reconnect
    hosts: weakref.WeakSet[HostConnection] = field(default_factory=weakref.WeakSet)
    """The hosts served through the client, so that closing it stops them."""


class SessionRuns:
    """`session.runs`: the runs of one session."""

    def __init__(self, deps: SessionDeps, session: Session) -> None:
        self._rpc = deps.rpc
        self._session = session

    def list(self, page_size: int = 0, page_token: str = "") -> RunPage:
        """A page of runs, newest first: 50 by default, at most 1000."""
        request = runs_pb2.ListRunsRequest(session_id=self._session.id, page_size=page_size, page_token=page_token)
        page = self._rpc.call(self._rpc.runs.ListRuns, request)
        return RunPage([Run(self._rpc, self._session, RunRecord.from_message(run)) for run in page.runs], page.next_page_token)

    def get(self, run_id: str) -> Run:
        response = self._rpc.call(self._rpc.runs.GetRun, runs_pb2.GetRunRequest(session_id=self._session.id, run_id=run_id))
        return Run(self._rpc, self._session, RunRecord.from_message(response.run))


class Session:
    """A handle on one session. `record` is what the server last answered (on creation, `refresh`,
    `setup_environment` or `end`). Refusals (an ended session, an unknown tool, another workspace's
    id) raise ServiceErrors with the service's code; a tool's own failure is a receipt."""

    def __init__(self, deps: SessionDeps, record: SessionRecord) -> None:
        self.id = record.id
        self.record = record
        self.runs = SessionRuns(deps, self)
        self._deps = deps
        self._rpc = deps.rpc
        self._hosts: dict[str, HostConnection] = {}

    @property
    def state(self) -> SessionState:
        return self.record.state

    @property
    def environments(self) -> list[EnvironmentStatus]:
        return self.record.environments

    @property
    def hosts(self) -> Mapping[str, HostConnection]:
        """The host environments this handle serves (or served), by environment name."""
        return self._hosts

    def call_tool(self, name: str, input: Any = None, *, timeout: float | None = None) -> Receipt:
        """Runs a placed tool once through the session's journal and answers its terminal receipt.
        The service never retries it. `timeout` (seconds) is capped by SERVICE_MAX_TURN_SECS."""
        request = sessions_pb2.CallToolRequest(session_id=self.id, tool=name)
        if input is not None:
            request.input.CopyFrom(to_value(input))
        if timeout is not None:
            request.timeout.FromNanoseconds(int(timeout * 1e9))
        response = self._rpc.call(self._rpc.sessions.CallTool, request)
        return receipt_of(response.receipt, response.operation_id)

    def events(self, after: int = 0, timeout: float | None = None) -> EventStream:
        """The journal as events: those after `after` (0 replays it all), then live ones. Ends after
        `session.ended`, when the session is deleted, after `timeout` seconds or on `cancel()`."""
        request = sessions_pb2.WatchSessionRequest(session_id=self.id, after=after)
        return EventStream(self._rpc.stream(self._rpc.sessions.WatchSession, request, timeout), timeout)

    def run(
        self,
        *,
        message: str,
        model: Model,
        provider_keys: Mapping[str, str],
        skills: Sequence[RunSkill] = (),
        files: Sequence[RunFile] = (),
        agents_md: str = "",
        idempotency_key: str | None = None,
        max_rounds: int = 0,
        agent_loop: AgentLoop | None = None,
    ) -> Run:
        """Submits a run (spec §4.1): draft skills (`Skill.from_*`) are upserted and file bytes
        uploaded first, then the run is submitted with skills by name. One run runs at a time in a
        session: another is refused as run_in_progress. Provider keys serve this run only.

        With an `agent_loop`, its environment must be a service environment of this session
        (PlacementError before anything is sent); its Component or Program is admitted alongside
        the uploads when the workspace lacks it, and the loop runs in place of the default one."""
        if agent_loop is not None:
            name = agent_loop.environment_name
            bound = next((environment for environment in self.record.environments if environment.name == name), None)
            check_agent_loop_binding(agent_loop, None if bound is None else bound.kind, f"session {self.id}")
        options = RunOptions(
            message=message,
            model=model,
            provider_keys=provider_keys,
            skills=skills,
            files=files,
            agents_md=agents_md,
            idempotency_key=idempotency_key,
            max_rounds=max_rounds,
            agent_loop=agent_loop,
        )
        run_input = prepare_run_input(self._deps.uploads, options)
        return Run(self._rpc, self, RunRecord.from_message(submit_run(self._rpc, self.id, run_input)))

    def serve(self, definition: HostEnvironment) -> HostConnection:
        """Serves the tools of one of the session's host environments from this process, until
        `stop()` on the answer, the end or deletion of the session, or a refusal. Serving an
        environment this handle serves already answers the same connection."""
        serving = self._hosts.get(definition.name)
        if serving is not None and serving.state != "closed":
            if serving.definition is definition:
                return serving
            raise PlacementError(f"environment {definition.name} of session {self.id} is served already, by another definition")
        bound = next((environment for environment in self.record.environments if environment.name == definition.name), None)
        if bound is None or bound.kind != "host":
            raise PlacementError(f"session {self.id} has no host environment named {definition.name}")
        host = self._hosts[definition.name] = HostConnection(self._rpc, self.id, definition, self._deps.reconnect)
        self._deps.hosts.add(host)
        return host

    def setup_environment(self, name: str) -> SetupResult:
        """Sets up a manual environment, or one whose setup failed; a ready one is left as it is."""
        request = sessions_pb2.SetupEnvironmentRequest(session_id=self.id, environment=name)
        response = self._rpc.call(self._rpc.sessions.SetupEnvironment, request)
        # The session's own state may change with the environment's.
        self.refresh()
        receipt = receipt_of(response.receipt) if response.HasField("receipt") else None
        return SetupResult(EnvironmentStatus.from_message(response.environment), receipt)

    def end(self) -> SessionRecord:
        """Detaches every environment; the session then refuses new work. Its journal is kept.
        This handle's hosts stop, after the service has answered (stopping first would end their
        commands in flight unknown instead of letting the end wait for them)."""
        response = self._rpc.call(self._rpc.sessions.EndSession, sessions_pb2.EndSessionRequest(session_id=self.id))
        self._stop_hosts()
        return self._remember(response.session)

    def delete(self) -> None:
        """Tears every environment down and removes the session and its journal. This handle's hosts stop."""
        self._rpc.call(self._rpc.sessions.DeleteSession, sessions_pb2.DeleteSessionRequest(session_id=self.id))
        self._stop_hosts()

    def refresh(self) -> SessionRecord:
        response = self._rpc.call(self._rpc.sessions.GetSession, sessions_pb2.GetSessionRequest(session_id=self.id))
        return self._remember(response.session)

    def _stop_hosts(self) -> None:
        for host in self._hosts.values():
            host.stop()

    def _remember(self, message: sessions_pb2.Session) -> SessionRecord:
        self.record = SessionRecord.from_message(message)
        return self.record


class SessionWithRun(NamedTuple):
    """What `client.sessions.create(run=...)` answers: the session and its first run
    (`session, run = client.sessions.create(...)`)."""

    session: Session
    run: Run


class SessionsClient:
    """`client.sessions`."""

    def __init__(self, deps: SessionDeps, resolve: Callable[[ServiceToolImplementation], ResolvedToolImplementation]) -> None:
        self._deps = deps
        self._rpc = deps.rpc
        self._resolve = resolve

    @overload
    def create(self, *, environments: Sequence[Environment], tools: Sequence[ToolPlacement] = (), serve_hosts: bool = True, run: None = None) -> Session: ...

    @overload
    def create(self, *, environments: Sequence[Environment], tools: Sequence[ToolPlacement] = (), serve_hosts: bool = True, run: RunOptions) -> SessionWithRun: ...

    def create(
        self,
        *,
        environments: Sequence[Environment],
        tools: Sequence[ToolPlacement] = (),
        serve_hosts: bool = True,
        run: RunOptions | None = None,
    ) -> Session | SessionWithRun:
        """Admits the components and programs the tools need (once per Component or Program and
        client), then creates the session; automatic environments (service and extension ones) are
        set up before it answers. Nothing is created when the server refuses.

        With `serve_hosts` (the default), this process serves every host environment of
        `environments` as soon as the session exists, and `create` answers once each is connected
        (`session.hosts`); a failure on the way deletes the session again. Without it, serve them
        later with `session.serve`, or from another process.

        With a `run`, its draft skills and files are uploaded (and its agent loop's Component or
        Program admitted) alongside the tools' admissions, and the session is created with its first
        run: the answer is a `SessionWithRun`. That call is not retried (a session has no
        idempotency key), and a refused run (e.g. provider_key_missing, skill_not_found) leaves no
        session behind. With host environments to serve, the session is created first and the run
        submitted once they are connected (so that it cannot call a host tool before its host is
        there), and a failure on the way deletes the session again.
        """
        environments = list(environments)
        # Every placement, and the run's agent loop, is checked before anything is admitted.
        for placement in tools:
            check_placed_in(placement, environments)
        if run is not None and run.agent_loop is not None:
            check_agent_loop_placed_in(run.agent_loop, environments)
        # The run's uploads have bounds of their own (prepare_run_input), beside the admissions.
        with ThreadPoolExecutor(max_workers=1) as first_run, ThreadPoolExecutor(max_workers=_RESOLVE_CONCURRENCY) as pool:
            prepared = None if run is None else first_run.submit(prepare_run_input, self._deps.uploads, run)
            tool_messages = list(pool.map(self._tool_message, tools))
            run_input = None if prepared is None else prepared.result()
        request = sessions_pb2.CreateSessionRequest(environments=[_environment_message(environment) for environment in environments], tools=tool_messages)
        hosts = [environment for environment in environments if isinstance(environment, HostEnvironment)] if serve_hosts else []
        if hosts:
            return self._create_served(request, hosts, run_input)
        if run_input is not None:
            request.run.CopyFrom(run_input)
        response = self._rpc.call(self._rpc.sessions.CreateSession, request)
        session = self._session(response.session)
        if run_input is None:
            return session
        return SessionWithRun(session, Run(self._rpc, session, RunRecord.from_message(response.run)))

    def get(self, session_id: str) -> Session:
        """A session of this workspace; another workspace's id is refused as session_not_found."""
        response = self._rpc.call(self._rpc.sessions.GetSession, sessions_pb2.GetSessionRequest(session_id=session_id))
        return self._session(response.session)

    def list(self, page_size: int = 0, page_token: str = "") -> SessionPage:
        """A page of sessions, newest first: 50 by default, at most 1000."""
        page = self._rpc.call(self._rpc.sessions.ListSessions, sessions_pb2.ListSessionsRequest(page_size=page_size, page_token=page_token))
        return SessionPage([self._session(session) for session in page.sessions], page.next_page_token)

    def all(self, page_size: int = 0) -> Iterator[Session]:
        """Every session of the workspace, newest first, fetching a page at a time."""
        page_token = ""
        while True:
            page = self.list(page_size, page_token)
            yield from page.sessions
            page_token = page.next_page_token
            if page_token == "":
                return

    def delete(self, session_id: str) -> None:
        self._rpc.call(self._rpc.sessions.DeleteSession, sessions_pb2.DeleteSessionRequest(session_id=session_id))

    def _create_served(self, request: sessions_pb2.CreateSessionRequest, hosts: list[HostEnvironment], run_input: runs_pb2.RunInput | None) -> Session | SessionWithRun:
        """The session, then its hosts, then its first run: nothing is left behind when a step fails."""
        session = self._session(self._rpc.call(self._rpc.sessions.CreateSession, request).session)
        try:
            for connection in [session.serve(host) for host in hosts]:
                connection.wait_connected()
            if run_input is None:
                return session
            return SessionWithRun(session, Run(self._rpc, session, RunRecord.from_message(submit_run(self._rpc, session.id, run_input))))
        except BaseException:
            try:
                session.delete()
            except ServiceError:
                # The original failure is the one to report; the hosts stop all the same.
                for connection in session.hosts.values():
                    connection.stop()
            raise

    def _session(self, message: sessions_pb2.Session) -> Session:
        return Session(self._deps, SessionRecord.from_message(message))

    def _tool_message(self, placement: ToolPlacement) -> sessions_pb2.ToolPlacement:
        message = sessions_pb2.ToolPlacement(name=placement.name, description=placement.description, environment=placement.environment_name)
        if placement.approval == "always":
            message.approval = "always"
        implementation = self._implementation(placement.implementation)
        if implementation is not None:
            message.implementation.CopyFrom(implementation)
        if placement.input_schema is not None:
            message.input_schema.CopyFrom(to_struct(placement.input_schema))
        if placement.configuration is not None:
            message.configuration.CopyFrom(to_value(placement.configuration))
        return message

    def _implementation(self, implementation: ToolImplementation | None) -> common_pb2.Implementation | None:
        """Components and programs are admitted when the workspace lacks them; None: a host or
        extension tool served by its name alone."""
        if implementation is None:
            return None
        if isinstance(implementation, Opaque):
            return common_pb2.Implementation(opaque=to_value(implementation.value))
        resolved = self._resolve(implementation)
        if isinstance(resolved, ResolvedProgram):
            return common_pb2.Implementation(program=common_pb2.ServiceProgram(id=resolved.id, runtime=resolved.runtime))
        return common_pb2.Implementation(tool=resolved)


def _environment_message(environment: Environment) -> sessions_pb2.Environment:
    message = sessions_pb2.Environment(name=environment.name, setup=environment.setup)
    if isinstance(environment, ServiceEnvironment):
        filesystem = sessions_pb2.FilesystemGrants(workspace=environment.workspace or "", scratch=environment.scratch or "")
        grants = sessions_pb2.ServiceGrants(filesystem=filesystem, network=environment.network, secrets=environment.secrets)
        message.service.grants.CopyFrom(grants)
    elif isinstance(environment, ExtensionEnvironment):
        extension = message.extension
        extension.url = environment.url
        if environment.credential is not None:
            extension.credential = environment.credential.reveal()
        if environment.configuration is not None:
            extension.configuration.CopyFrom(to_value(environment.configuration))
        extension.SetInParent()
    elif isinstance(environment, McpEnvironment):
        mcp = message.mcp
        mcp.url = environment.url
        if environment.credential is not None:
            mcp.credential = environment.credential.reveal()
        mcp.tools.extend(environment.tools)
        if environment.approval == "always":
            mcp.approval = "always"
        mcp.SetInParent()
    else:
        message.host.SetInParent()
    return message
