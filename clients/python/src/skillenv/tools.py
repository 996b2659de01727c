"""Tool placements (spec §1.3): a tool, the environment it runs in, and what runs."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal, Union

from skillenv._wire import is_json_value
from skillenv.environments import ServiceEnvironment
from skillenv.extension import ExtensionEnvironment
from skillenv.mcp import McpEnvironment
from skillenv.hosts import HostEnvironment
from skillenv.programs import Component, Program, ResolvedProgram

Environment = Union[ServiceEnvironment, HostEnvironment, ExtensionEnvironment, McpEnvironment]


class PlacementError(ValueError):
    """A placement the client refuses before calling the service: a tool placed where it cannot run."""


@dataclass(frozen=True)
class Opaque:
    """What a host or extension tool runs, for that environment to read: any JSON value, carried
    unread with every call."""

    value: Any


ServiceToolImplementation = Union[str, Component, Program, ResolvedProgram]
"""What a tool in the service environment runs: an admitted tool id (64 lowercase hex), a tool
Component, a Program on a tool runtime, or a ResolvedProgram."""

ResolvedToolImplementation = Union[str, ResolvedProgram]
"""An implementation that needs no more admission: a tool id or a resolved program."""

ToolApproval = Literal["always", "never"]
"""Whether a person decides each call of a tool before it is sent."""

ToolImplementation = Union[ServiceToolImplementation, Opaque]
"""A service environment's implementation, or, in a host or extension environment, an Opaque
value (or nothing: the environment then serves the tool by its name alone)."""


@dataclass(frozen=True)
class ToolPlacement:
    name: str
    environment: Environment | str
    """The environment's definition, or its name in the session."""
    implementation: ToolImplementation | None
    description: str
    input_schema: Mapping[str, Any] | None
    configuration: Any
    """Handed to every invocation unread."""
    approval: ToolApproval = "never"
    """"always": each call a run's model makes waits for a person's decision before it is sent
    (`run.approve` / `run.deny`, docs/runs.md "Approvals"); "never": sent at once."""

    @property
    def environment_name(self) -> str:
        return self.environment if isinstance(self.environment, str) else self.environment.name


_TOOL_ID = re.compile(r"^[0-9a-f]{64}\Z")


def tool(
    name: str,
    *,
    environment: Environment | str,
    implementation: ToolImplementation | None = None,
    description: str = "",
    input_schema: Mapping[str, Any] | None = None,
    configuration: Any = None,
    approval: ToolApproval = "never",
) -> ToolPlacement:
    """Places a tool. Does no I/O: `client.sessions.create` and `client.prepare` admit what is missing.

    `name` is what the model calls it: ^[a-zA-Z0-9_-]{1,64}$, no "__", not "skills". Without an
    `input_schema` the server's default is {"type": "object"}. Without a `configuration`, a
    program's own configuration is handed to it. With `approval="always"` each call a run's model
    makes waits for a person's decision (docs/runs.md, "Approvals").
    """
    _check_implementation(name, implementation)
    if approval not in ("always", "never"):
        raise PlacementError(f'tool {name}: approval must be "always" or "never", not {approval!r}')
    if configuration is None and isinstance(implementation, (Program, ResolvedProgram)):
        configuration = implementation.configuration
    placement = ToolPlacement(name, environment, implementation, description, input_schema, configuration, approval)
    if not isinstance(environment, str):
        check_fits(placement, environment)
    return placement


def check_fits(placement: ToolPlacement, environment: Environment) -> None:
    """The service environment runs a tool id, a component or a program; host and extension
    environments take an opaque value or nothing."""
    where = f"tool {placement.name} is placed in the {environment.kind} environment {environment.name}"
    implementation = placement.implementation
    if isinstance(environment, McpEnvironment):
        raise PlacementError(f"{where}, whose tools come from its server when the session sets it up")
    if isinstance(environment, ServiceEnvironment):
        if implementation is None or isinstance(implementation, Opaque):
            raise PlacementError(f"{where}, which runs a tool id, a Component or a program")
    elif implementation is not None and not isinstance(implementation, Opaque):
        raise PlacementError(f"{where}, which takes an Opaque implementation or none")


def check_placed_in(placement: ToolPlacement, environments: list[Environment]) -> None:
    """A tool is placed in one of the session's environments, as the session defines it."""
    name = placement.environment_name
    defined = next((environment for environment in environments if environment.name == name), None)
    if defined is None:
        raise PlacementError(f"tool {placement.name} is placed in environment {name}, which the session does not define")
    # Two definitions under one name would leave the tool with authority other than it was placed with.
    if not isinstance(placement.environment, str) and placement.environment != defined:
        raise PlacementError(f"tool {placement.name} is placed in a definition of environment {name} that differs from the session's")
    check_fits(placement, defined)


def service_environment_of(placement: ToolPlacement) -> tuple[ServiceEnvironment, ServiceToolImplementation]:
    """Only a placement whose definition says "service environment" can be prepared (spec §4.3 rule 3)."""
    environment, implementation = placement.environment, placement.implementation
    if isinstance(environment, str):
        where = f"its environment is given only by name ({environment}), so it may be any kind"
    elif not isinstance(environment, ServiceEnvironment):
        where = f"it is placed in the {environment.kind} environment {environment.name}"
    elif implementation is None or isinstance(implementation, Opaque):
        raise PlacementError(f"cannot prepare tool {placement.name}: it has no component or program")
    else:
        return environment, implementation
    raise PlacementError(f"cannot prepare tool {placement.name}: {where}; only placements in the service environment (service_env) are prepared")


def tool_program(program: ResolvedProgram) -> ResolvedProgram:
    """A program resolved on an agent-loop runtime (a digest can name either kind) cannot be a tool."""
    if program.entrypoint != "run":
        raise PlacementError(f"program {program.id} runs on the agent-loop runtime {program.runtime}; a tool needs a tool runtime")
    return program


def _check_implementation(name: str, implementation: ToolImplementation | None) -> None:
    """Refuses an implementation that cannot run as a tool."""
    why: str | None = None
    if isinstance(implementation, str):
        if not _TOOL_ID.match(implementation):
            why = f"{implementation!r} is not a tool id (64 lowercase hex)"
    elif isinstance(implementation, Component):
        if implementation.kind != "tool":
            why = 'a Component placed as a tool must be a tool component (kind "tool"), not an agent-loop runtime'
    elif isinstance(implementation, Program):
        if isinstance(implementation.runtime, Component) and implementation.runtime.kind != "tool":
            why = "a program for a tool needs a tool runtime, not an agent-loop runtime"
    elif isinstance(implementation, ResolvedProgram):
        if implementation.entrypoint != "run":
            why = f"program {implementation.id} runs on an agent-loop runtime; a tool needs a tool runtime"
    elif isinstance(implementation, Opaque) and not is_json_value(implementation.value):
        why = "an opaque implementation must be a JSON value"
    if why is not None:
        raise PlacementError(f"tool {name}: {why}")
