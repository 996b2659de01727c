"""`client.env`: admitting components and programs into the workspace and preparing them on the
service environment's workers (docs/artifacts.md, spec §4.3 and §4.4)."""

from __future__ import annotations

import threading
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, cast
from urllib.parse import urlsplit

import grpc

from skillenv._gen.google.api import httpbody_pb2
from skillenv._gen.skillenv.env.v1 import artifacts_pb2
from skillenv._once import OncePerInstance
from skillenv._rpc import Rpc
from skillenv.assets import direct_opener, upload_asset
from skillenv.bundle import sha256_hex
from skillenv.errors import ServiceError
from skillenv.programs import Component, ComponentKind, Program, ProgramError, ProgramSource, ResolvedProgram
from skillenv.runs import AgentLoopImplementation, agent_loop_program
from skillenv.tools import ResolvedToolImplementation, ServiceToolImplementation, tool_program

# Components up to this size are offered inline in the admission call, which saves the upload's
# round trips; larger ones go as an asset. The server's inline limit (SERVICE_ENV_MAX_INLINE_BYTES)
# may be lower: the client learns it from the refusal and sends the component as an asset.
_PREFERRED_INLINE_BYTES = 4 * 1024 * 1024

# Reading a program's source from an http(s) URL.
_SOURCE_TIMEOUT = 60.0


@dataclass(frozen=True)
class PreparedArtifact:
    """One artifact `prepare_ids` loaded, as the service reports it."""

    id: str
    kind: Literal["tool", "agentloop", "program"]
    ready: bool


class EnvClient:
    """`client.env`: artifacts of the service environment. Admission is always checked before
    anything is uploaded (spec §4.4 rule 5), so a fresh client sends nothing the workspace has."""

    def __init__(self, rpc: Rpc) -> None:
        self._rpc = rpc
        # The largest component this client still sends inline: lowered by each refusal of an inline admission.
        self._inline_limit = _PREFERRED_INLINE_BYTES
        self._lock = threading.Lock()
        self._resolutions: OncePerInstance[Program, ResolvedProgram] = OncePerInstance(self._resolve)

    @property
    def inline_limit(self) -> int:
        """The largest component this client offers inline: 4 MiB, or less once the server refused one."""
        return self._inline_limit

    def admit_component(self, component: Component) -> str:
        """The component's id (its SHA-256), admitting it first as a tool or an agent-loop runtime
        (its `kind`) when the workspace lacks it: inline up to the inline limit, else, and after a
        `component_too_large` refusal of the inline form, uploaded as an asset."""
        component_id = sha256_hex(component.data)
        if self._is_admitted(component.kind, component_id):
            return component_id
        if len(component.data) <= self._inline_limit:
            try:
                return self._admit(component.kind, httpbody_pb2.HttpBody(content_type="application/wasm", data=component.data), None)
            except ServiceError as error:
                server_limit = _inline_refusal_limit(error, len(component.data))
                if server_limit is None:
                    raise
                with self._lock:
                    self._inline_limit = min(self._inline_limit, server_limit)
        upload_asset(self._rpc, component.data, component_id)
        return self._admit(component.kind, None, component_id)

    def resolve(self, program: Program) -> ResolvedProgram:
        """Reads the program's source and admits it, and its runtime when given as a Component,
        unless the workspace has them. Once per Program object and client."""
        return self._resolutions(program)

    def prepare(self, program: Program) -> ResolvedProgram:
        """Resolves the program, then loads its runtime on every worker (spec §4.3)."""
        resolved = self.resolve(program)
        if resolved.entrypoint == "turn":
            self.prepare_ids(programs=[resolved.id], agentloops=[resolved.runtime])
        else:
            self.prepare_ids(programs=[resolved.id], tools=[resolved.runtime])
        return resolved

    def prepare_ids(self, *, agentloops: Sequence[str] = (), programs: Sequence[str] = (), tools: Sequence[str] = ()) -> list[PreparedArtifact]:
        """Loads artifacts this workspace admitted on every worker; answers once they are ready.
        An id it did not admit (under that kind) is refused as not_found and nothing is prepared."""
        request = artifacts_pb2.PrepareRequest(agentloops=list(agentloops), programs=list(programs), tools=list(tools))
        response = self._rpc.call(self._rpc.artifacts.Prepare, request)
        return [PreparedArtifact(artifact.id, cast(Any, artifact.kind), artifact.ready) for artifact in response.artifacts]

    def _resolve(self, program: Program) -> ResolvedProgram:
        # The runtime's admission (a 12 MB upload, perhaps) and the source's go at once.
        with ThreadPoolExecutor(max_workers=1) as pool:
            runtime = pool.submit(self._runtime_of, program.runtime)
            source_id = self._admit_source(_read_source(program.source))
            runtime_id, entrypoint = runtime.result()
        return ResolvedProgram(entrypoint=entrypoint, id=source_id, runtime=runtime_id, configuration=program.configuration)

    def _runtime_of(self, runtime: str | Component) -> tuple[str, Literal["turn", "run"]]:
        if isinstance(runtime, Component):
            return self.admit_component(runtime), "turn" if runtime.kind == "agentloop" else "run"
        if self._is_admitted("agentloop", runtime):
            return runtime, "turn"
        if self._is_admitted("tool", runtime):
            return runtime, "run"
        raise ProgramError("runtime_not_admitted", f"runtime {runtime} is not admitted as an agent loop or a tool in this workspace")

    def _admit_source(self, source: bytes) -> str:
        program_id = sha256_hex(source)
        if self._lookup(self._rpc.artifacts.GetProgram, artifacts_pb2.GetProgramRequest(id=program_id)):
            return program_id
        try:
            text = source.decode("utf-8")
        except UnicodeDecodeError as error:
            raise ProgramError("source_not_utf8", f"the program's source is not UTF-8: {error}") from None
        return self._rpc.call(self._rpc.artifacts.AdmitProgram, artifacts_pb2.AdmitProgramRequest(source=text)).id

    def _admit(self, kind: ComponentKind, component: httpbody_pb2.HttpBody | None, asset_sha256: str | None) -> str:
        if kind == "tool":
            request = artifacts_pb2.AdmitToolRequest(component=component, asset_sha256=asset_sha256)
            return self._rpc.call(self._rpc.artifacts.AdmitTool, request).id
        loop_request = artifacts_pb2.AdmitAgentLoopRequest(component=component, asset_sha256=asset_sha256)
        return self._rpc.call(self._rpc.artifacts.AdmitAgentLoop, loop_request).id

    def _is_admitted(self, kind: ComponentKind, component_id: str) -> bool:
        if kind == "tool":
            return self._lookup(self._rpc.artifacts.GetTool, artifacts_pb2.GetToolRequest(id=component_id))
        return self._lookup(self._rpc.artifacts.GetAgentLoop, artifacts_pb2.GetAgentLoopRequest(id=component_id))

    def _lookup(self, method: Callable[..., Any], request: Any) -> bool:
        """Whether this workspace admitted the artifact; not_found is an answer, anything else a failure."""
        try:
            self._rpc.call(method, request)
            return True
        except ServiceError as error:
            if error.status == grpc.StatusCode.NOT_FOUND:
                return False
            raise


class ImplementationResolver:
    """Admits what a tool's implementation (or, with `role="agentloop"`, a run's agent loop's) needs
    and answers it by id. A Component is admitted once per object and client, a Program resolved
    once; ids and resolved programs need no round trip (the service checks their admission when a
    session is created or a run submitted). A Program must resolve onto a runtime of the role's
    kind (PlacementError)."""

    def __init__(self, env: EnvClient) -> None:
        self._env = env
        self._admit: OncePerInstance[Component, str] = OncePerInstance(env.admit_component)

    def __call__(self, implementation: ServiceToolImplementation | AgentLoopImplementation, role: Literal["tool", "agentloop"] = "tool") -> ResolvedToolImplementation:
        if isinstance(implementation, (str, ResolvedProgram)):
            return implementation
        if isinstance(implementation, Program):
            resolved = self._env.resolve(implementation)
            return tool_program(resolved) if role == "tool" else agent_loop_program(resolved)
        return self._admit(implementation)


def _inline_refusal_limit(error: ServiceError, size_bytes: int) -> int | None:
    """When the server refused an inline admission as component_too_large: the most it takes inline (its maxBytes)."""
    if error.code != "component_too_large":
        return None
    try:
        return int(error.metadata.get("maxBytes", size_bytes - 1))
    except ValueError:
        return size_bytes - 1


def _read_source(source: ProgramSource) -> bytes:
    if isinstance(source, bytes):
        return source
    if isinstance(source, Path):
        return _read_file(source)
    url = urlsplit(source)
    if url.scheme == "file":
        if url.netloc not in ("", "localhost"):
            raise ProgramError("unsupported_source", f"a file: URL names a file of this machine, not of {url.netloc}")
        return _read_file(Path(urllib.request.url2pathname(url.path)))
    try:
        with direct_opener.open(source, timeout=_SOURCE_TIMEOUT) as response:
            return cast(bytes, response.read())
    except urllib.error.HTTPError as refusal:
        raise ProgramError("source_unreadable", f"fetching the program source {source} failed: HTTP {refusal.code}") from None
    except (urllib.error.URLError, OSError) as failure:
        raise ProgramError("source_unreadable", f"fetching the program source {source} failed: {failure}") from None


def _read_file(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError as failure:
        raise ProgramError("source_unreadable", f"reading the program source {path} failed: {failure}") from None
