"""Uploading bytes as a workspace asset: presign -> PUT to the signed URL -> finalize."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from dataclasses import dataclass

from skillenv._gen.skillenv.assets.v1 import assets_pb2
from skillenv._rpc import Rpc
from skillenv.bundle import sha256_hex
from skillenv.errors import UploadError

# The signed URL is the authority for the PUT; like the gRPC channel (and the TypeScript client's
# fetch), it is reached directly, not through http_proxy. So is a program's source URL (env.py).
direct_opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))


@dataclass(frozen=True)
class UploadResult:
    sha256: str
    size_bytes: int
    uploaded: bool
    """False when the workspace already had the bytes and nothing was sent."""


def upload_asset(rpc: Rpc, data: bytes, known_sha256: str | None = None, timeout: float = 300.0) -> UploadResult:
    """presign -> PUT (skipped on a dedup hit) -> finalize. Safe to repeat: every step is idempotent.

    Pass `known_sha256` when the bytes are hashed already (a skill bundle is); the object store
    verifies it on the PUT in any case.
    """
    sha256 = known_sha256 or sha256_hex(data)
    presigned = rpc.call(rpc.assets.Presign, assets_pb2.PresignRequest(sha256=sha256, size_bytes=len(data)))
    if presigned.exists:
        return UploadResult(sha256, len(data), uploaded=False)
    if not presigned.HasField("upload_url"):
        raise RuntimeError("presign answered neither exists nor an upload URL")
    _put(presigned.upload_url, data, dict(presigned.upload_headers), timeout)
    rpc.call(rpc.assets.Finalize, assets_pb2.FinalizeRequest(sha256=sha256))
    return UploadResult(sha256, len(data), uploaded=True)


def _put(url: str, data: bytes, headers: dict[str, str], timeout: float) -> None:
    """The raw bytes with the signed headers verbatim (the checksum header among them)."""
    request = urllib.request.Request(url, data=data, headers=headers, method="PUT")
    try:
        with direct_opener.open(request, timeout=timeout):
            pass
    except urllib.error.HTTPError as refusal:
        raise _upload_error(refusal) from None


def _upload_error(refusal: urllib.error.HTTPError) -> UploadError:
    text = refusal.read().decode("utf-8", "replace")
    try:
        body = json.loads(text)
        return UploadError(body.get("code", "unknown"), body.get("message", text), refusal.code)
    except (ValueError, AttributeError):
        return UploadError("unknown", f"upload failed with HTTP {refusal.code}: {text}", refusal.code)
