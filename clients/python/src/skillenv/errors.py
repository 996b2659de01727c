"""What the client raises when the service, or the object store, refuses a call."""

from __future__ import annotations

from typing import cast

import grpc

from skillenv._coded import CodedError
from skillenv._gen.google.rpc import error_details_pb2, status_pb2

_STATUS_DETAILS_KEY = "grpc-status-details-bin"


class ServiceError(Exception):
    """A call the service refused, or that never reached its answer.

    `code` is the service's stable error code (docs/errors.md, e.g. "session_not_found"), which it
    carries as google.rpc.ErrorInfo.reason in the gRPC status details; None when the call failed
    without one (the service could not be reached, the stream broke). `status` is the gRPC status
    code and `metadata` the ErrorInfo's metadata (e.g. a limit).
    """

    def __init__(self, code: str | None, message: str, status: grpc.StatusCode, metadata: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.status = status
        self.metadata = metadata or {}

    def __str__(self) -> str:
        return f"{self.code or self.status.name.lower()}: {self.message}"

    @classmethod
    def from_rpc_error(cls, error: grpc.RpcError) -> ServiceError:
        # Every RpcError grpcio raises from a call is also a grpc.Call with the status and trailers.
        call = cast(grpc.Call, error)
        info = _error_info(call.trailing_metadata() or ())
        return cls(
            code=info.reason if info else None,
            message=call.details() or "",
            status=call.code(),
            metadata=dict(info.metadata) if info else None,
        )


def _error_info(trailers: tuple[tuple[str, str | bytes], ...]) -> error_details_pb2.ErrorInfo | None:
    """The ErrorInfo among the details of the google.rpc.Status the service sends in the trailers."""
    for key, value in trailers:
        if key != _STATUS_DETAILS_KEY or not isinstance(value, bytes):
            continue
        for detail in status_pb2.Status.FromString(value).details:
            info = error_details_pb2.ErrorInfo()
            if detail.Unpack(info):
                return info
    return None


class UploadError(CodedError):
    """The object store refused an upload; `code` is the service's stable code (e.g. checksum_mismatch)."""

    def __init__(self, code: str, message: str, status: int) -> None:
        super().__init__(code, message)
        self.status = status
