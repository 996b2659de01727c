"""Runs (docs/runs.md): one message to a model with the session's tools and skills, driven by an agent loop."""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal, Protocol, Union, cast

import grpc

from skillenv._gen.skillenv.sessions.v1 import common_pb2, runs_pb2
from skillenv._rpc import Rpc
from skillenv._wire import datetime_of, from_struct, from_value, is_json_value, optional_datetime_of, to_struct, to_value
from skillenv.assets import UploadResult
from skillenv.environments import ServiceEnvironment
from skillenv.errors import ServiceError
from skillenv.events import EventStream, SessionEvent
from skillenv.programs import Component, Program, ResolvedProgram
from skillenv.skill import Skill
from skillenv.skills import UploadedSkill
from skillenv.tools import Environment, PlacementError

# Uploads at once per pass (skills, files), as for skill uploads.
_UPLOAD_CONCURRENCY = 4

# What transports report for a call whose answer never arrived: a refused or reset connection, a broken stream.
_LOST_IN_TRANSPORT = frozenset({grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.ABORTED, grpc.StatusCode.INTERNAL, grpc.StatusCode.UNKNOWN})

# Exactly one of them is a run's last event.
_RUN_END_TYPES = frozenset({"turn.completed", "turn.failed", "run.cancelled"})

RunStatus = Literal["running", "completed", "failed", "cancelled"]

@dataclass(frozen=True)
class PinnedSkill:
    """A workspace skill at one of its versions (beyond the spec, whose reference has no version:
    the server's docs/runs.md)."""

    name: str
    version: int


RunSkill = Union[Skill, str, UploadedSkill, PinnedSkill]
"""A draft (uploaded before the run is submitted, once per object and client), the name of a
workspace skill, what `client.skills.upload` answered, or a workspace skill pinned to a version."""


@dataclass(frozen=True)
class Model:
    provider: str
    """"anthropic" or "openai"."""
    name: str
    """The provider's model name, e.g. "claude-sonnet-4-6"."""
    max_tokens: int = 0
    """Largest reply; 0 is the server's default, 4096."""
    parameters: Mapping[str, Any] | None = None
    """Passed to the provider as is, e.g. {"temperature": 0.2}."""


@dataclass(frozen=True)
class RunFile:
    """A file staged at /workspace/<path> before the first turn: bytes to upload, or an asset this
    workspace finalized already (`asset_sha256`)."""

    path: str
    data: bytes | None = None
    asset_sha256: str | None = None

    def __post_init__(self) -> None:
        if (self.data is None) == (self.asset_sha256 is None):
            raise ValueError(f"run file {self.path}: give exactly one of data and asset_sha256")


AgentLoopImplementation = Union[str, Component, Program, ResolvedProgram]
"""What a run's custom agent loop runs: an admitted agent loop's id (64 lowercase hex), an agent-loop
Component (`kind="agentloop"`), a Program on an agent-loop runtime, or a ResolvedProgram of one
(entrypoint "turn", e.g. from `client.prepare(program)`)."""

ResolvedAgentLoopImplementation = Union[str, ResolvedProgram]
"""An agent-loop implementation that needs no more admission: an agent loop's id or a resolved program."""

_AGENT_LOOP_ID = re.compile(r"^[0-9a-f]{64}\Z")


@dataclass(frozen=True)
class AgentLoop:
    """A custom agent loop for a run (docs/runs.md), in place of the service's default loop: it runs
    in a service environment of the run's session, its model and tool calls going the default
    loop's way. Does no I/O: `session.run` admits what the workspace lacks. Refuses
    (PlacementError) an implementation of a tool's form, an environment definition of another kind
    and a configuration that is no JSON value."""

    environment: ServiceEnvironment | str
    """The session's service environment: its definition, or its name in the session."""
    implementation: AgentLoopImplementation
    configuration: Any = None
    """Handed to the loop unread; None: the program's own configuration, if any."""

    def __post_init__(self) -> None:
        why = _agent_loop_problem(self)
        if why is not None:
            raise PlacementError(f"the agent loop: {why}")

    @property
    def environment_name(self) -> str:
        return self.environment if isinstance(self.environment, str) else self.environment.name


def _agent_loop_problem(loop: AgentLoop) -> str | None:
    # What was given, whatever the annotations say (a caller without a type checker).
    environment, implementation = cast(object, loop.environment), cast(object, loop.implementation)
    if not isinstance(environment, (str, ServiceEnvironment)):
        kind, name = getattr(environment, "kind", type(environment).__name__), getattr(environment, "name", "?")
        return f"it is placed in the {kind} environment {name}; an agent loop runs in a service environment (service_env)"
    if isinstance(implementation, str):
        if not _AGENT_LOOP_ID.match(implementation):
            return f"{implementation!r} is not an agent loop id (64 lowercase hex)"
    elif isinstance(implementation, Component):
        if implementation.kind != "agentloop":
            return 'a Component run as an agent loop must be an agent-loop component (kind="agentloop"), not a tool'
    elif isinstance(implementation, Program):
        if isinstance(implementation.runtime, Component) and implementation.runtime.kind != "agentloop":
            return "a program for an agent loop needs an agent-loop runtime, not a tool runtime"
    elif isinstance(implementation, ResolvedProgram):
        if implementation.entrypoint != "turn":
            return f"program {implementation.id} runs on a tool runtime; an agent loop needs an agent-loop runtime"
    else:
        return f"an agent loop's implementation is an id, a Component, a Program or a ResolvedProgram, not {type(implementation).__name__}"
    if loop.configuration is not None and not is_json_value(loop.configuration):
        return "its configuration must be a JSON value"
    return None


def check_agent_loop_binding(loop: AgentLoop, kind: str | None, session: str) -> None:
    """The loop's environment must be a service environment of its session: `kind` is that of the
    session's environment of that name, None when the session has none."""
    name = loop.environment_name
    if kind is None:
        raise PlacementError(f"the agent loop is placed in environment {name}, which {session} does not define")
    if kind != "service":
        raise PlacementError(f"the agent loop is placed in the {kind} environment {name} of {session}; an agent loop runs in a service environment (service_env)")


def check_agent_loop_placed_in(loop: AgentLoop, environments: Sequence[Environment]) -> None:
    """Before a session exists (`client.sessions.create(run=...)`): the loop's environment must be a
    service environment of `environments`, as they define it."""
    name = loop.environment_name
    defined = next((environment for environment in environments if environment.name == name), None)
    if defined is not None and not isinstance(loop.environment, str) and loop.environment != defined:
        raise PlacementError(f"the agent loop is placed in a definition of environment {name} that differs from the session's")
    check_agent_loop_binding(loop, None if defined is None else defined.kind, "the session")


def agent_loop_service_environment(loop: AgentLoop) -> ServiceEnvironment:
    """Only an agent loop placed in a service environment definition can be prepared (spec §4.3
    rule 3); AgentLoop itself refuses definitions of other kinds."""
    if isinstance(loop.environment, str):
        raise PlacementError(
            f"cannot prepare the agent loop: its environment is given only by name ({loop.environment}); "
            "only agent loops placed in a service environment definition (service_env) are prepared"
        )
    return loop.environment


def agent_loop_program(program: ResolvedProgram) -> ResolvedProgram:
    """A program resolved on a tool runtime (a digest can name either kind) cannot be an agent loop."""
    if program.entrypoint != "turn":
        raise PlacementError(f"program {program.id} runs on the tool runtime {program.runtime}; an agent loop needs an agent-loop runtime")
    return program


def agent_loop_configuration(loop: AgentLoop) -> Any:
    """The configuration the loop runs with, in a run and once prepared: its own, else its program's."""
    if loop.configuration is None and isinstance(loop.implementation, (Program, ResolvedProgram)):
        return loop.implementation.configuration
    return loop.configuration


def _agent_loop_message(loop: AgentLoop, implementation: ResolvedAgentLoopImplementation) -> runs_pb2.AgentLoop:
    message = runs_pb2.AgentLoop(environment=loop.environment_name)
    if isinstance(implementation, ResolvedProgram):
        message.implementation.CopyFrom(common_pb2.Implementation(program=common_pb2.ServiceProgram(id=implementation.id, runtime=implementation.runtime)))
    else:
        message.implementation.CopyFrom(common_pb2.Implementation(agentloop=implementation))
    configuration = agent_loop_configuration(loop)
    if configuration is not None:
        message.configuration.CopyFrom(to_value(configuration))
    return message


@dataclass(frozen=True, kw_only=True)
class RunOptions:
    """A run to submit, as one value: what `session.run` takes as keywords, for
    `client.sessions.create(run=...)` (the session's first run). Does no I/O."""

    message: str
    """The user's message."""
    model: Model
    provider_keys: Mapping[str, str]
    """The API key per model provider, e.g. {"anthropic": "sk-ant-..."}; for this run only, never stored."""
    skills: Sequence[RunSkill] = ()
    files: Sequence[RunFile] = ()
    agents_md: str = ""
    """Standing instructions for the model, part of its system prompt."""
    idempotency_key: str | None = None
    """Makes a resubmission answer the existing run; generated when None."""
    max_rounds: int = 0
    """Model calls at most; 0 is the server's default (and upper bound), SERVICE_RUN_MAX_ROUNDS."""
    agent_loop: AgentLoop | None = None
    """A custom agent loop in a service environment of the session, in place of the default loop."""


@dataclass(frozen=True)
class SkillSnapshot:
    """A skill as the run snapshotted it at submit (spec §3 rule 8)."""

    name: str
    content_hash: str
    description: str
    version: int = 0
    """The skill version the run used (0 for a skill bound before the server kept versions)."""
    pinned: bool = False
    """Whether the submission pinned that version."""


@dataclass(frozen=True)
class Usage:
    input_tokens: int
    output_tokens: int


@dataclass(frozen=True)
class RunError:
    code: str
    """e.g. model_auth_failed, max_rounds_exceeded, cancelled."""
    message: str


@dataclass(frozen=True)
class RunRecord:
    """A run as the server last reported it."""

    id: str
    session_id: str
    status: RunStatus
    model: Model
    skills: list[SkillSnapshot]
    created_at: datetime
    finished_at: datetime | None
    usage: Usage
    stop_reason: str | None
    """Why the model ended the turn ("end_turn", "max_tokens", ...); None unless completed."""
    rounds: int
    tool_calls: int
    """Tool calls dispatched, the skills tool included."""
    output_text: str
    error: RunError | None
    """Why a failed or cancelled run ended."""
    idempotency_key: str
    idempotency_hash: str

    @classmethod
    def from_message(cls, message: runs_pb2.Run) -> RunRecord:
        model = message.model
        return cls(
            id=message.id,
            session_id=message.session_id,
            status=cast(RunStatus, message.status),
            model=Model(model.provider, model.name, model.max_tokens, from_struct(model.parameters)),
            skills=[SkillSnapshot(skill.name, skill.content_hash, skill.description, skill.version, skill.pinned) for skill in message.skills],
            created_at=datetime_of(message.created_at),
            finished_at=optional_datetime_of(message, "finished_at"),
            usage=Usage(message.usage.input_tokens, message.usage.output_tokens),
            stop_reason=message.stop_reason or None,
            rounds=message.rounds,
            tool_calls=message.tool_calls,
            output_text=message.output_text,
            error=RunError(message.error.code, message.error.message) if message.HasField("error") else None,
            idempotency_key=message.idempotency_key,
            idempotency_hash=message.idempotency_hash,
        )


ApprovalStatus = Literal["pending", "approved", "denied", "expired"]


@dataclass(frozen=True)
class ApprovalDecider:
    """Who decided: the deciding key's workspace and the label the caller gave (not verified)."""

    workspace: str
    label: str


@dataclass(frozen=True)
class Approval:
    """A run's call of a tool placed with approval="always": waiting for a person's decision
    ("pending"), decided once ("approved", "denied"), or "expired" (the run ended first; the tool
    was not called)."""

    id: str
    run_id: str
    round: int
    """The model call whose reply asked for the tool."""
    call_id: str
    tool: str
    input: Any
    """The input the model gave the tool."""
    status: ApprovalStatus
    requested_at: datetime
    decided_at: datetime | None
    decided_by: ApprovalDecider | None
    message: str
    """A denial's message, as the model received it."""

    @classmethod
    def from_message(cls, message: runs_pb2.Approval) -> Approval:
        return cls(
            id=message.id,
            run_id=message.run_id,
            round=message.round,
            call_id=message.call_id,
            tool=message.tool,
            input=from_value(message.input) if message.HasField("input") else None,
            status=cast(ApprovalStatus, message.status),
            requested_at=datetime_of(message.requested_at),
            decided_at=optional_datetime_of(message, "decided_at"),
            decided_by=ApprovalDecider(message.decided_by.workspace, message.decided_by.label) if message.HasField("decided_by") else None,
            message=message.message,
        )


class RunUploads(Protocol):
    """What preparing a run uploads and admits through: the client's skills, assets and implementation flows."""

    def upload_skill(self, skill: Skill) -> UploadedSkill: ...

    def upload_asset(self, data: bytes) -> UploadResult: ...

    def admit_agent_loop(self, implementation: AgentLoopImplementation) -> ResolvedAgentLoopImplementation:
        """Admits what an agent loop's implementation needs, as for a tool placement's, and answers it by id."""
        ...


class RunSession(Protocol):
    """A session, as its runs see it: an id and a journal."""

    @property
    def id(self) -> str: ...

    def events(self, after: int = 0, timeout: float | None = None) -> EventStream: ...


class Run:
    """A handle on one run. `record` is what the server last answered (on submission, `refresh`,
    `cancel` or `result`); the run's progress is its events."""

    def __init__(self, rpc: Rpc, session: RunSession, record: RunRecord) -> None:
        self.id = record.id
        self.session_id = record.session_id
        self.record = record
        self._rpc = rpc
        self._session = session
        # Where reading the journal starts: just before the run's run.submitted, once it was seen.
        self._after = 0

    @property
    def status(self) -> RunStatus:
        return self.record.status

    def events(self, timeout: float | None = None) -> Iterator[SessionEvent]:
        """This run's events in journal order, replayed and then live, from its `run.submitted` to
        its last (`turn.completed`, `turn.failed` or `run.cancelled`): the session's events that
        carry the run's id, and the operation events of the operations it sent. Ends early when
        the session is deleted or `timeout` seconds have passed."""
        with self._session.events(after=self._after, timeout=timeout) as stream:
            yield from self._own(stream)

    def result(self, timeout: float | None = None) -> RunRecord:
        """Waits until the run has ended and answers its final record; a failed run is a record
        too, not an exception. TimeoutError after `timeout` seconds."""
        if self.record.status != "running":
            return self.record
        with self._session.events(after=self._after, timeout=timeout) as stream:
            for _ in self._own(stream):
                pass
        if stream.timed_out:
            raise TimeoutError(f"run {self.id} did not end within {timeout} s")
        return self.refresh()

    def cancel(self) -> RunRecord:
        """Stops the run: the model call is abandoned and the operations in flight are sent a
        cancel. Answers once the run has ended; cancelling a finished run changes nothing."""
        response = self._rpc.call(self._rpc.runs.CancelRun, runs_pb2.CancelRunRequest(session_id=self.session_id, run_id=self.id))
        return self._remember(response.run)

    def approvals(self) -> list[Approval]:
        """The run's approvals, oldest first, pending and decided (docs/runs.md, "Approvals")."""
        response = self._rpc.call(self._rpc.runs.ListApprovals, runs_pb2.ListApprovalsRequest(session_id=self.session_id, run_id=self.id))
        return [Approval.from_message(approval) for approval in response.approvals]

    def pending_approvals(self, timeout: float | None = None) -> Iterator[Approval]:
        """The run's approvals waiting for a decision, as they come: those pending now, then each
        call that asks for one while the run runs (its `tool.approval_requested` events). Ends with
        the run, or after `timeout` seconds. One decided elsewhere after it was yielded is refused
        with approval_decided when decided here."""
        known = {approval.id: approval for approval in self.approvals()}
        yield from (approval for approval in list(known.values()) if approval.status == "pending")
        for event in self.events(timeout=timeout):
            approval_id = event.data.get("approvalId")
            if event.type != "tool.approval_requested" or not isinstance(approval_id, str) or approval_id in known:
                continue
            approval = Approval(
                id=approval_id,
                run_id=self.id,
                round=int(event.data.get("round", 0)),
                call_id=str(event.data.get("callId", "")),
                tool=str(event.data.get("tool", "")),
                input=event.data.get("input"),
                status="pending",
                requested_at=event.at,
                decided_at=None,
                decided_by=None,
                message="",
            )
            known[approval_id] = approval
            yield approval

    def approve(self, approval: Approval | str, label: str = "") -> Approval:
        """Lets a pending tool call be sent. Decided once: a second decision is refused
        (approval_decided), as is one after the run ended (approval_expired)."""
        approval_id = approval if isinstance(approval, str) else approval.id
        request = runs_pb2.ApproveToolCallRequest(session_id=self.session_id, run_id=self.id, approval_id=approval_id, label=label)
        return Approval.from_message(self._rpc.call(self._rpc.runs.ApproveToolCall, request).approval)

    def deny(self, approval: Approval | str, label: str = "", message: str = "") -> Approval:
        """Refuses a pending tool call: it is never sent, and the model receives `message` as the
        tool's error result (code tool_call_denied; the server has a default). Decided once, as
        `approve`."""
        approval_id = approval if isinstance(approval, str) else approval.id
        request = runs_pb2.DenyToolCallRequest(session_id=self.session_id, run_id=self.id, approval_id=approval_id, label=label, message=message)
        return Approval.from_message(self._rpc.call(self._rpc.runs.DenyToolCall, request).approval)

    def refresh(self) -> RunRecord:
        response = self._rpc.call(self._rpc.runs.GetRun, runs_pb2.GetRunRequest(session_id=self.session_id, run_id=self.id))
        return self._remember(response.run)

    def delete(self) -> None:
        """Removes a finished run, its part of the session's conversation and its skill snapshots."""
        self._rpc.call(self._rpc.runs.DeleteRun, runs_pb2.DeleteRunRequest(session_id=self.session_id, run_id=self.id))

    def _own(self, stream: EventStream) -> Iterator[SessionEvent]:
        """The run's events of the stream, up to its last."""
        operations: set[str] = set()
        for event in stream:
            if not self._owns(event, operations):
                continue
            if event.type == "run.submitted":
                self._after = event.seq - 1
            yield event
            if event.type in _RUN_END_TYPES:
                return

    def _owns(self, event: SessionEvent, operations: set[str]) -> bool:
        """An event is the run's when it carries the run's id, or concerns an operation the run sent."""
        operation_id = event.data.get("operationId")
        if event.data.get("runId") == self.id:
            if event.type == "operation.sent" and isinstance(operation_id, str):
                operations.add(operation_id)
            return True
        return operation_id in operations

    def _remember(self, message: runs_pb2.Run) -> RunRecord:
        self.record = RunRecord.from_message(message)
        return self.record


def prepare_run_input(uploads: RunUploads, options: RunOptions) -> runs_pb2.RunInput:
    """The submission (spec §4.1): draft skills upserted, file bytes uploaded and the agent loop's
    component or program admitted first, the passes at once and each with bounded concurrency
    (at most 4 skills and 4 files at a time), so that it carries only skill names, asset hashes
    and ids. The caller checks the agent loop's environment against the session.

    Without an idempotency key one is generated, so that a submission whose answer was lost can be
    sent again safely. Zero and empty fields take the server's defaults.
    """
    agent_loop, model = options.agent_loop, options.model
    # A pool per pass: each pass is bounded on its own, and none waits for another's (rule 4).
    with (
        ThreadPoolExecutor(max_workers=1) as loop_pass,
        ThreadPoolExecutor(max_workers=_UPLOAD_CONCURRENCY) as skills_pass,
        ThreadPoolExecutor(max_workers=_UPLOAD_CONCURRENCY) as files_pass,
    ):
        loop = None if agent_loop is None else loop_pass.submit(uploads.admit_agent_loop, agent_loop.implementation)
        references = [skills_pass.submit(_skill_reference, skill, uploads) for skill in options.skills]
        staged = [files_pass.submit(_staged_file, file, uploads) for file in options.files]
        run_input = runs_pb2.RunInput(
            model=runs_pb2.Model(provider=model.provider, name=model.name, max_tokens=model.max_tokens),
            skills=[reference.result() for reference in references],
            message=options.message,
            agents_md=options.agents_md,
            files=[file.result() for file in staged],
            provider_keys=dict(options.provider_keys),
            idempotency_key=options.idempotency_key or str(uuid.uuid4()),
            max_rounds=options.max_rounds,
        )
        if agent_loop is not None and loop is not None:
            run_input.agentloop.CopyFrom(_agent_loop_message(agent_loop, loop.result()))
    if model.parameters is not None:
        run_input.model.parameters.CopyFrom(to_struct(model.parameters))
    return run_input


def _skill_reference(skill: RunSkill, uploads: RunUploads) -> runs_pb2.SkillReference:
    if isinstance(skill, str):
        return runs_pb2.SkillReference(kind="skill", name=skill)
    if isinstance(skill, Skill):
        return runs_pb2.SkillReference(kind="skill", name=uploads.upload_skill(skill).name)
    if isinstance(skill, PinnedSkill):
        return runs_pb2.SkillReference(kind="skill", name=skill.name, version=skill.version)
    return runs_pb2.SkillReference(kind="skill", name=skill.name)


def _staged_file(file: RunFile, uploads: RunUploads) -> runs_pb2.RunFile:
    sha256 = file.asset_sha256 if file.data is None else uploads.upload_asset(file.data).sha256
    return runs_pb2.RunFile(path=file.path, asset_sha256=sha256)


def submit_run(rpc: Rpc, session_id: str, run_input: runs_pb2.RunInput) -> runs_pb2.Run:
    """CreateRun, sent once more when its answer was lost on the way. The idempotency key makes that
    safe: had the first try started the run, the second answers that run instead of starting another."""
    request = runs_pb2.CreateRunRequest(session_id=session_id, run=run_input)
    try:
        return rpc.call(rpc.runs.CreateRun, request).run
    except ServiceError as error:
        # The service answers every refusal with its code; a failure without one never reached an answer.
        if error.code is not None or error.status not in _LOST_IN_TRANSPORT:
            raise
        return rpc.call(rpc.runs.CreateRun, request).run
