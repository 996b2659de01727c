"""Host environments: tools that are Python functions of this process, served over the command stream.

A `HostConnection` holds `skillenv.env.v1.HostService/Connect` open on a thread of its own, runs
each command's handler on a thread of the command's own (so commands run concurrently), answers
accepted, progress, then returned or failure, and opens the stream again with backoff whenever it
drops. The service never sends a command twice: one in flight when the stream drops ends `unknown`.
"""

from __future__ import annotations

import queue
import random
import re
import threading
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, ClassVar, Literal

import grpc

from skillenv._gen.skillenv.env.v1 import host_pb2
from skillenv._rpc import Rpc
from skillenv._wire import datetime_of, from_value, to_value
from skillenv.environments import SetupMode
from skillenv.errors import ServiceError

HostState = Literal["connecting", "connected", "closed"]
""""connecting": opening the stream or waiting to open it again; "connected": attached and serving; "closed": for good."""

# Refusals that mean "not now": the host tries again. Any other coded refusal (the session ended
# or was deleted, no such host environment, a bad key) closes it. A failure without a code never
# reached the service's answer (a refused or reset connection) and is tried again too.
_TRY_AGAIN = frozenset({"unavailable", "server_busy", "storage_unavailable", "internal"})

# `closing` codes after which coming back is pointless or harmful: the session is over, or a newer
# host took the binding over (coming back would take it back, and the two would keep replacing
# each other). Any other close (the server restarting, a cut stream) is reconnected.
_FINAL_CLOSES = frozenset({"replaced", "session_ended", "session_deleted"})

_SNAKE_CASE = re.compile(r"^[a-z][a-z0-9_]*\Z")


class ToolFailure(Exception):
    """Raised by a handler: the tool's failure with its own snake_case code."""

    def __init__(self, code: str, message: str, *, retryable: bool = False, details: Mapping[str, str] | None = None) -> None:
        if not _SNAKE_CASE.match(code):
            raise ValueError(f"a tool failure's code is snake_case, got {code!r}")
        super().__init__(message)
        self.code = code
        self.message = message
        self.retryable = retryable
        self.details = dict(details or {})


class HostClosedError(Exception):
    """The service closed the command stream for good; `code` is its `closing` code (e.g. "session_ended")."""

    def __init__(self, code: str, reason: str) -> None:
        super().__init__(f"the service ended the command stream: {reason} ({code})")
        self.code = code


@dataclass(frozen=True)
class HostToolContext:
    """What a handler gets besides its input."""

    cancelled: threading.Event
    """Set when the service cancels the operation (a cancelled run, a deleted session, the
    deadline) or the stream closes. A handler that raises once it is set answers `cancelled`."""
    progress: Callable[[str], None]
    """Reports progress for people, journaled as `operation.progress` (at most 16 KiB a message)."""
    operation_id: str
    tool: str
    """The placed tool's name."""
    session_id: str
    deadline: datetime
    """When the service stops waiting, reports a timeout and cancels the operation."""
    implementation: Any
    """The placement's opaque implementation (None when it has none)."""
    configuration: Any


HostToolHandler = Callable[[Any, HostToolContext], Any]
"""Runs one call: takes the input (any JSON value) and the context, returns the output (any JSON
value). Raise ToolFailure for a failure with a code of its own; anything else raised is
`tool_error` with its message."""


@dataclass(frozen=True, eq=False)
class HostEnvironment:
    """The caller's own process as an environment (spec §1.4): the tools it serves. Two definitions
    are the same only when they are the same object: handlers cannot be compared."""

    kind: ClassVar[Literal["host"]] = "host"
    name: str
    tools: Mapping[str, HostToolHandler]
    setup: SetupMode = "automatic"


def host_env(name: str, tools: Mapping[str, HostToolHandler] | None = None, *, setup: SetupMode = "automatic") -> HostEnvironment:
    """Defines a host environment: the handlers this process serves, by placed tool name. Does no
    I/O: `client.sessions.create` serves it (or `session.serve`). A command for a tool without a
    handler is answered `failure { code: "tool_not_served" }`."""
    handlers = dict(tools or {})
    for tool, handler in handlers.items():
        if not callable(handler):
            raise TypeError(f"host environment {name}: the handler of tool {tool} is not callable")
    return HostEnvironment(name=name, tools=handlers, setup=setup)


@dataclass(frozen=True)
class Reconnect:
    """The wait before opening a dropped stream again doubles from `initial_delay` up to `max_delay` (seconds)."""

    initial_delay: float = 0.25
    max_delay: float = 30.0

    def delay(self, attempt: int) -> float:
        """Drawn from the upper half of the doubled wait, so that hosts dropped together (a server
        restart) do not all come back at the same instant."""
        ceiling = min(self.max_delay, self.initial_delay * 2**attempt)
        return ceiling / 2 + random.random() * ceiling / 2


@dataclass(frozen=True)
class _StreamEnd:
    reconnect: bool
    error: Exception | None


@dataclass
class _Stream:
    """One open command stream: the receipts to send, and the operations running on it."""

    outbox: queue.Queue[host_pb2.ConnectRequest | None] = field(default_factory=queue.Queue)
    in_flight: dict[str, threading.Event] = field(default_factory=dict)

    def send(self, receipt: host_pb2.HostReceipt) -> None:
        self.outbox.put(host_pb2.ConnectRequest(receipt=receipt))

    def requests(self) -> Iterator[host_pb2.ConnectRequest]:
        """What grpcio sends, until the stream is closed with None."""
        while (request := self.outbox.get()) is not None:
            yield request

    def close(self) -> None:
        self.outbox.put(None)
        for cancelled in list(self.in_flight.values()):
            cancelled.set()


class HostConnection:
    """Serves one session's host environment until `stop()`, the end or deletion of the session,
    or a refusal that says the binding cannot be served. Its threads are daemon threads: a
    process that only serves waits with `wait()`."""

    def __init__(self, rpc: Rpc, session_id: str, definition: HostEnvironment, reconnect: Reconnect) -> None:
        self.session_id = session_id
        self.definition = definition
        self._rpc = rpc
        self._reconnect = reconnect
        self._state: HostState = "connecting"
        self._error: Exception | None = None
        self._changed = threading.Condition()
        self._listeners: list[Callable[[HostState], None]] = []
        self._stopping = threading.Event()
        self._call: grpc.Call | None = None
        self._thread = threading.Thread(target=self._serve, name=f"skillenv-host-{definition.name}", daemon=True)
        self._thread.start()

    @property
    def environment(self) -> str:
        return self.definition.name

    @property
    def state(self) -> HostState:
        return self._state

    @property
    def error(self) -> Exception | None:
        """Why the last stream ended (while reconnecting), or why the host closed; None after `stop()`."""
        return self._error

    def on_state_change(self, listener: Callable[[HostState], None]) -> Callable[[], None]:
        """Calls `listener` (on the host's thread) at every change of state; answers the function that unsubscribes it."""
        self._listeners.append(listener)
        return lambda: self._listeners.remove(listener)

    def wait_connected(self, timeout: float | None = None) -> None:
        """Returns once the host is attached and serving; raises why it closed if it closes first,
        TimeoutError after `timeout` seconds."""
        with self._changed:
            if not self._changed.wait_for(lambda: self._state != "connecting", timeout):
                raise TimeoutError(f"the host of environment {self.environment} did not connect within {timeout} s")
            if self._state == "closed":
                raise self._error or HostClosedError("stopped", f"the host of environment {self.environment} was stopped")

    def wait(self, timeout: float | None = None) -> bool:
        """Blocks until the host has closed for good; False when `timeout` seconds passed first."""
        self._thread.join(timeout)
        return not self._thread.is_alive()

    def stop(self) -> None:
        """Closes the command stream for good and cancels the handlers in flight (the service ends
        their operations unknown). Returns once the stream is closed; handlers are not waited for."""
        self._stopping.set()
        call = self._call
        if call is not None:
            call.cancel()
        if threading.current_thread() is not self._thread:
            self._thread.join()

    def _serve(self) -> None:
        attempt = 0
        while not self._stopping.is_set():
            end = self._serve_stream()
            if self._state == "connected":  # this stream attached: the backoff starts afresh
                attempt = 0
            self._error = end.error
            if not end.reconnect or self._stopping.is_set():
                break
            self._set_state("connecting")
            self._stopping.wait(self._reconnect.delay(attempt))
            attempt += 1
        # Stopped by the caller: what ended the last stream was the stop, not a failure.
        if self._stopping.is_set():
            self._error = None
        self._set_state("closed")

    def _serve_stream(self) -> _StreamEnd:
        """One command stream, from opening it to its end."""
        stream = _Stream()
        stream.outbox.put(host_pb2.ConnectRequest(attach=host_pb2.Attach(session_id=self.session_id, environment=self.environment)))
        # wait_for_ready: while the service cannot be reached, the attempt waits for the channel to
        # connect again. Failing fast instead, it would not make the channel try (seen with grpcio
        # 1.51: a host alone on its channel never came back after a restart of the service).
        self._call = call = self._rpc.hosts.Connect(stream.requests(), metadata=self._rpc.metadata, wait_for_ready=True)
        if self._stopping.is_set():  # stop() ran before the call could be cancelled
            call.cancel()
        closing = host_pb2.Closing()
        try:
            for response in call:
                closing = self._handle(response.message, stream) or closing
            return _StreamEnd(reconnect=closing.code not in _FINAL_CLOSES, error=HostClosedError(closing.code or "stream_ended", closing.reason or "no reason given"))
        except grpc.RpcError as failure:
            error = ServiceError.from_rpc_error(failure)
            return _StreamEnd(reconnect=error.code is None or error.code in _TRY_AGAIN, error=error)
        finally:
            self._call = None
            stream.close()

    def _handle(self, message: host_pb2.ServerMessage, stream: _Stream) -> host_pb2.Closing | None:
        """Acts on one message of the service; answers the `closing` message, which ends the stream."""
        kind = message.WhichOneof("message")
        if kind == "attached":
            self._error = None
            self._set_state("connected")
        elif kind == "command":
            self._start(message.command, stream)
        elif kind == "cancel":
            cancelled = stream.in_flight.get(message.cancel.operation_id)
            if cancelled is not None:
                cancelled.set()
        elif kind == "closing":
            return message.closing
        # "refused": a late receipt the service no longer waited for; nothing to do.
        return None

    def _start(self, command: host_pb2.Command, stream: _Stream) -> None:
        """Runs the command on a thread of its own: commands run concurrently."""
        cancelled = stream.in_flight[command.operation_id] = threading.Event()

        def run() -> None:
            try:
                _run_command(command, self.definition, cancelled, stream.send)
            finally:
                stream.in_flight.pop(command.operation_id, None)

        threading.Thread(target=run, name=f"skillenv-host-{command.tool}", daemon=True).start()

    def _set_state(self, state: HostState) -> None:
        with self._changed:
            if state == self._state:
                return
            self._state = state
            self._changed.notify_all()
        for listener in list(self._listeners):
            listener(state)


def _run_command(command: host_pb2.Command, definition: HostEnvironment, cancelled: threading.Event, send: Callable[[host_pb2.HostReceipt], None]) -> None:
    """Answers one command: `accepted` at once, then the handler's output as `returned`, or its
    failure. Whatever the handler does ends in a receipt."""
    operation_id = command.operation_id
    handler = definition.tools.get(command.tool)
    if handler is None:
        served = ", ".join(definition.tools) or "no tools"
        failure = host_pb2.Failure(code="tool_not_served", message=f"this host does not serve tool {command.tool}; it serves {served}")
        send(host_pb2.HostReceipt(operation_id=operation_id, failure=failure))
        return
    send(host_pb2.HostReceipt(operation_id=operation_id, accepted=host_pb2.Accepted()))
    finished = threading.Event()

    def progress(message: str) -> None:
        # After the terminal receipt the service would refuse it.
        if not finished.is_set():
            send(host_pb2.HostReceipt(operation_id=operation_id, progress=host_pb2.Progress(message=message)))

    try:
        output = handler(from_value(command.input), _context(command, cancelled, progress))
        terminal = host_pb2.HostReceipt(operation_id=operation_id, returned=host_pb2.Returned(output=_output_value(output)))
    except Exception as error:  # every failure of a handler is the tool's failure
        terminal = host_pb2.HostReceipt(operation_id=operation_id, failure=_failure_of(error, cancelled))
    finished.set()
    send(terminal)


def _context(command: host_pb2.Command, cancelled: threading.Event, progress: Callable[[str], None]) -> HostToolContext:
    return HostToolContext(
        cancelled=cancelled,
        progress=progress,
        operation_id=command.operation_id,
        tool=command.tool,
        session_id=command.session_id,
        deadline=datetime_of(command.deadline),
        implementation=from_value(command.implementation) if command.HasField("implementation") else None,
        configuration=from_value(command.configuration),
    )


def _output_value(output: Any) -> Any:
    try:
        return to_value(output)
    except TypeError as error:
        raise TypeError(f"the tool's output is not JSON: {error}") from error


def _failure_of(error: Exception, cancelled: threading.Event) -> host_pb2.Failure:
    if isinstance(error, ToolFailure):
        return host_pb2.Failure(code=error.code, message=error.message, retryable=error.retryable, details=error.details)
    return host_pb2.Failure(code="cancelled" if cancelled.is_set() else "tool_error", message=str(error))
