"""The gRPC channel to the service: its stubs, the API key on every call, every failure a ServiceError."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any, TypeVar
from urllib.parse import urlsplit

import grpc

from skillenv._gen.skillenv.assets.v1 import assets_pb2_grpc
from skillenv._gen.skillenv.env.v1 import artifacts_pb2_grpc, host_pb2_grpc
from skillenv._gen.skillenv.sessions.v1 import runs_pb2_grpc, sessions_pb2_grpc
from skillenv._gen.skillenv.skills.v1 import skills_pb2_grpc
from skillenv._gen.skillenv.status.v1 import status_pb2_grpc
from skillenv.errors import ServiceError

Response = TypeVar("Response")


class Rpc:
    """The service's stubs over one HTTP/2 channel (gRPC, plaintext for http:// and TLS for https://)."""

    def __init__(self, base_url: str, api_key: str, reconnect_delays: tuple[float, float]) -> None:
        target, secure = _target_of(base_url)
        initial_delay, max_delay = reconnect_delays
        options = [
            # Like the TypeScript client, ignore http_proxy and friends: the service is reached directly.
            ("grpc.enable_http_proxy", 0),
            # After a connection fails, grpcio waits before the channel tries again (1 s growing to
            # 120 s by default), and calls fail at once meanwhile: keep that within a host's backoff.
            ("grpc.initial_reconnect_backoff_ms", int(initial_delay * 1000)),
            ("grpc.max_reconnect_backoff_ms", int(max_delay * 1000)),
        ]
        self._channel = grpc.secure_channel(target, grpc.ssl_channel_credentials(), options) if secure else grpc.insecure_channel(target, options)
        self.metadata = (("authorization", f"Bearer {api_key}"),)
        self.assets = assets_pb2_grpc.AssetServiceStub(self._channel)
        self.skills = skills_pb2_grpc.SkillServiceStub(self._channel)
        self.artifacts = artifacts_pb2_grpc.ArtifactServiceStub(self._channel)
        self.sessions = sessions_pb2_grpc.SessionServiceStub(self._channel)
        self.runs = runs_pb2_grpc.RunServiceStub(self._channel)
        self.hosts = host_pb2_grpc.HostServiceStub(self._channel)
        self.status = status_pb2_grpc.StatusServiceStub(self._channel)

    def call(self, method: Callable[..., Response], request: Any, timeout: float | None = None) -> Response:
        """A unary call."""
        try:
            return method(request, metadata=self.metadata, timeout=timeout)
        except grpc.RpcError as error:
            raise ServiceError.from_rpc_error(error) from None

    def stream(self, method: Callable[..., Any], request: Any, timeout: float | None = None) -> Any:
        """Opens a server stream; the answer is the call, to iterate (with `responses`) and to cancel."""
        return method(request, metadata=self.metadata, timeout=timeout)

    def close(self) -> None:
        self._channel.close()


def responses(call: Iterator[Response]) -> Iterator[Response]:
    """The messages of a stream, a failure raised as a ServiceError."""
    try:
        yield from call
    except grpc.RpcError as error:
        raise ServiceError.from_rpc_error(error) from None


def _target_of(base_url: str) -> tuple[str, bool]:
    """host:port for grpcio from the service's base URL, and whether it speaks TLS."""
    url = urlsplit(base_url)
    if url.scheme not in ("http", "https") or not url.hostname or url.path not in ("", "/"):
        raise ValueError(f"the base URL must be http(s)://host[:port], got {base_url!r}")
    secure = url.scheme == "https"
    host = f"[{url.hostname}]" if ":" in url.hostname else url.hostname
    return f"{host}:{url.port or (443 if secure else 80)}", secure
