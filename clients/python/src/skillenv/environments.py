"""Where a session's tools run: the service environment with its grants (spec §2.3)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Literal, TypedDict

AccessMode = Literal["read", "write"]

SetupMode = Literal["automatic", "manual"]
""""automatic": set up before the session is created; "manual": waits for `session.setup_environment(name)`."""


class Filesystem(TypedDict, total=False):
    workspace: AccessMode
    """The retained /workspace of the session and environment."""
    scratch: AccessMode
    """An empty /scratch per invocation."""


@dataclass(frozen=True)
class ServiceEnvironment:
    """The service environment: admitted components in the server's worker pool. Omitted access is denied."""

    kind: ClassVar[Literal["service"]] = "service"
    name: str
    setup: SetupMode
    workspace: AccessMode | None
    scratch: AccessMode | None
    network: tuple[str, ...]
    secrets: tuple[str, ...]


def service_env(
    name: str,
    *,
    filesystem: Filesystem | None = None,
    network: tuple[str, ...] | list[str] = (),
    secrets: tuple[str, ...] | list[str] = (),
    setup: SetupMode = "automatic",
) -> ServiceEnvironment:
    """Defines a service environment. Does no I/O: the server checks the grants against its
    allow-lists when a session binds the environment.

    `network` holds HTTP(S) origins ("https://api.example.com", "https://*.example.com"), `secrets`
    names of the server's environment variables, mounted read-only under /secrets.
    """
    filesystem = filesystem or {}
    return ServiceEnvironment(
        name=name,
        setup=setup,
        workspace=filesystem.get("workspace"),
        scratch=filesystem.get("scratch"),
        network=tuple(network),
        secrets=tuple(secrets),
    )
