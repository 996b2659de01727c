"""MCP environments: a Model Context Protocol server reached over Streamable HTTP (docs/mcp.md)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import ClassVar, Literal, cast
from urllib.parse import urlsplit

from skillenv._coded import CodedError
from skillenv.environments import SetupMode
from skillenv.extension import Credential


class McpDefinitionError(CodedError, ValueError):
    """A mistake in an MCP environment's definition, found before any call. `code`: "invalid_url",
    "invalid_credential", "invalid_tools" or "invalid_approval"."""


@dataclass(frozen=True)
class McpEnvironment:
    """An MCP server. Its tools are placed when a session sets it up, each as `<name>__<tool>`
    (see the session's tools); none is placed by hand. Made by `mcp_env`."""

    kind: ClassVar[Literal["mcp"]] = "mcp"
    name: str
    """At most 32 characters of [A-Za-z0-9_-], without "__": it prefixes its tools' names."""
    url: str
    """The server's MCP endpoint; the service's SERVICE_MCP_ALLOW must include its origin."""
    credential: Credential | None = None
    """Sent by the service as `Authorization: Bearer <credential>` on every request to the server."""
    tools: tuple[str, ...] = ()
    """The server's own names of the tools to expose; empty: every tool it lists."""
    setup: SetupMode = "automatic"
    approval: Literal["always", "never"] = "never"
    """"always": a run's every call of the server's tools waits for a person's decision (docs/runs.md, "Approvals")."""

    @property
    def has_credential(self) -> bool:
        return self.credential is not None


def mcp_env(
    name: str,
    *,
    url: str,
    credential: str | None = None,
    tools: Iterable[str] = (),
    setup: SetupMode = "automatic",
    approval: Literal["always", "never"] = "never",
) -> McpEnvironment:
    """Defines an MCP environment. Does no I/O: the service checks `url` against SERVICE_MCP_ALLOW,
    then sets it up (lists the server's tools), when a session binds it."""
    what = f"MCP environment {name!r}"
    if not _is_http_url(url):
        raise McpDefinitionError("invalid_url", f"{what}: the url must be an http(s) URL, not {url!r}")
    given = cast(object, credential)
    if given is not None and (not isinstance(given, str) or given == ""):
        raise McpDefinitionError("invalid_credential", f"{what}: the credential must be a non-empty string or None")
    names = tuple(cast(Iterable[object], tools))
    if any(not isinstance(tool, str) or tool == "" for tool in names):
        raise McpDefinitionError("invalid_tools", f"{what}: tools are the server's tool names (non-empty strings)")
    if approval not in ("always", "never"):
        raise McpDefinitionError("invalid_approval", f'{what}: approval must be "always" or "never", not {approval!r}')
    return McpEnvironment(
        name=name,
        url=url,
        credential=None if credential is None else Credential(credential),
        tools=cast(tuple[str, ...], names),
        setup=setup,
        approval=approval,
    )


def _is_http_url(url: object) -> bool:
    if not isinstance(url, str):
        return False
    try:
        parts = urlsplit(url)
    except ValueError:
        return False
    return parts.scheme in ("http", "https") and bool(parts.hostname)
