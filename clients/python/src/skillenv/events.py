"""A session's journal as a stream of events (docs/events.md)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from types import TracebackType
from typing import Any

import grpc

from skillenv._gen.skillenv.sessions.v1 import sessions_pb2
from skillenv._wire import datetime_of, from_struct
from skillenv.errors import ServiceError


@dataclass(frozen=True)
class SessionEvent:
    """One entry of a session's journal."""

    seq: int
    """Position in the journal: 1, 2, 3, ..."""
    at: datetime
    type: str
    """e.g. "operation.sent", "operation.receipt", "turn.completed", "session.ended"."""
    data: dict[str, Any]
    """The type's fields, as docs/events.md lists them."""

    @classmethod
    def from_message(cls, message: sessions_pb2.SessionEvent) -> SessionEvent:
        return cls(seq=message.seq, at=datetime_of(message.at), type=message.type, data=from_struct(message.data))


class EventStream(Iterator[SessionEvent]):
    """The events after a sequence number, replayed and then live, as they are written.

    Iteration ends after `session.ended`, when the session is deleted, when the stream's
    `timeout` passes, or after `cancel()` (from any thread). A failure raises a ServiceError.
    Used as a context manager, the stream is cancelled on leaving the block.
    """

    def __init__(self, call: Any, timeout: float | None) -> None:
        self._call = call
        self._timeout = timeout
        self._cancelled = threading.Event()
        self.timed_out = False
        """True when iteration ended because the timeout passed."""

    def __iter__(self) -> EventStream:
        return self

    def __next__(self) -> SessionEvent:
        try:
            response = next(self._call)
        except grpc.RpcError as error:
            if self._ended_quietly(error):
                raise StopIteration from None
            raise ServiceError.from_rpc_error(error) from None
        return SessionEvent.from_message(response.event)

    def cancel(self) -> None:
        self._cancelled.set()
        self._call.cancel()

    def __enter__(self) -> EventStream:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, traceback: TracebackType | None) -> None:
        self.cancel()

    def _ended_quietly(self, error: grpc.RpcError) -> bool:
        """The caller stopped watching, or let it run for as long as it wanted: that is how a live stream ends."""
        if self._cancelled.is_set():
            return True
        self.timed_out = self._timeout is not None and error.code() == grpc.StatusCode.DEADLINE_EXCEEDED
        return self.timed_out
