"""Tool placements (spec §1.3): a tool, the environment it runs in, and what runs."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Union

from skillenv.environments import ServiceEnvironment
from skillenv.hosts import HostEnvironment

Environment = Union[ServiceEnvironment, HostEnvironment]


class PlacementError(ValueError):
    """A placement the client refuses before calling the service: a tool placed where it cannot run."""


@dataclass(frozen=True)
class Component:
    """A tool component given by its bytes; admitted when the workspace lacks it."""

    data: bytes


@dataclass(frozen=True)
class Opaque:
    """What a host tool runs, for the host to read: any JSON value, carried unread with every call."""

    value: Any


ToolImplementation = Union[str, Component, Opaque]
"""In the service environment, an admitted tool id (64 lowercase hex) or a Component; in a host
environment, an Opaque value or nothing."""


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
) -> ToolPlacement:
    """Places a tool. Does no I/O: `client.sessions.create` admits what is missing.

    `name` is what the model calls it: ^[a-zA-Z0-9_-]{1,64}$, no "__", not "skills". Without an
    `input_schema` the server's default is {"type": "object"}.
    """
    if isinstance(implementation, str) and not _TOOL_ID.match(implementation):
        raise PlacementError(f"tool {name}: {implementation!r} is not a tool id (64 lowercase hex)")
    placement = ToolPlacement(name, environment, implementation, description, input_schema, configuration)
    if not isinstance(environment, str):
        check_fits(placement, environment)
    return placement


def check_fits(placement: ToolPlacement, environment: Environment) -> None:
    """The service environment runs a tool id or a component; a host takes an opaque value or nothing."""
    where = f"tool {placement.name} is placed in the {environment.kind} environment {environment.name}"
    implementation = placement.implementation
    if isinstance(environment, ServiceEnvironment):
        if implementation is None or isinstance(implementation, Opaque):
            raise PlacementError(f"{where}, which runs a tool id or a Component")
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
