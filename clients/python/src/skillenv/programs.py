"""What the service environment runs (spec §2.4): components given by their bytes, and programs."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Literal, Union, cast
from urllib.parse import urlsplit

from skillenv._coded import CodedError

ComponentKind = Literal["tool", "agentloop"]


class ProgramError(CodedError):
    """A program the client could not resolve, before or instead of calling the service. `code` is
    one of "unsupported_source" (a source that is neither bytes, a Path nor an http(s) or file: URL),
    "source_unreadable" (the file or URL could not be read), "source_not_utf8" and
    "runtime_not_admitted" (a runtime digest this workspace admitted neither as a tool nor as an
    agent loop)."""


@dataclass(frozen=True)
class Component:
    """A component given by its bytes: admitted when the workspace lacks it, as a tool (`run`) or
    as an agent-loop runtime (`turn`)."""

    data: bytes
    kind: ComponentKind = "tool"


ProgramSource = Union[bytes, Path, str]
"""The program's text: its UTF-8 bytes, a local file, or an http(s) or file: URL to read it from."""


@dataclass(frozen=True, eq=False)
class Program:
    """A program for the service environment: its source runs on a runtime component. Made by
    `program(...)`, which does no I/O; `client.env.resolve` reads the source and admits what the
    workspace lacks. Resolutions are kept per object and client, so two Programs are the same only
    when they are the same object (a URL's text may change between reads)."""

    runtime: str | Component
    """An admitted runtime's digest (64 hex), or the runtime component itself."""
    source: ProgramSource
    configuration: Any = None
    """Handed to the program with every invocation (tools); None: none."""


@dataclass(frozen=True)
class ResolvedProgram:
    """A program resolved to ids (spec §2.4): an implementation of a tool or of an agent loop,
    needing no more admission. Any session or client of the same workspace can use it."""

    type: ClassVar[Literal["service_program"]] = "service_program"
    entrypoint: Literal["turn", "run"]
    """"turn" when the runtime is an agent-loop runtime, "run" when it is a tool runtime."""
    id: str
    """Content address (SHA-256) of the admitted source."""
    runtime: str
    """Digest of the admitted runtime component."""
    configuration: Any = field(default=None, hash=False)


_SOURCE_SCHEMES = ("http", "https", "file")


def program(*, runtime: str | Component, source: ProgramSource, configuration: Any = None) -> Program:
    """A program on `runtime`: an admitted runtime's digest or a `Component` (a tool runtime such
    as js-program-tool for tools, an agent-loop runtime such as js-program-agent-loop for agent
    loops). `source` is the program's UTF-8 bytes, a Path, or an http(s) or file: URL. Does no I/O."""
    given = cast(object, source)
    if not isinstance(given, (bytes, Path, str)):
        raise ProgramError("unsupported_source", f"a program's source is bytes, a Path or a URL, not {type(given).__name__}")
    if isinstance(given, str) and urlsplit(given).scheme not in _SOURCE_SCHEMES:
        raise ProgramError("unsupported_source", f"a program's source given as text must be an http(s) or file: URL, not {given[:80]!r}; give the program text as bytes")
    return Program(runtime, source, configuration)
