"""Admitting a tool component into the workspace, unless it is admitted already (spec §4.4 rule 5)."""

from __future__ import annotations

import grpc

from skillenv._gen.google.api import httpbody_pb2
from skillenv._gen.skillenv.env.v1 import artifacts_pb2
from skillenv._rpc import Rpc
from skillenv.assets import upload_asset
from skillenv.bundle import sha256_hex
from skillenv.errors import ServiceError
from skillenv.tools import Component

# Components up to this size are offered inline in the admission call, which saves the upload's
# round trips; larger ones, and any the server refuses inline (its SERVICE_ENV_MAX_INLINE_BYTES
# may be lower), go as an asset.
_PREFERRED_INLINE_BYTES = 4 * 1024 * 1024


def admit_component(rpc: Rpc, component: Component) -> str:
    """The component's tool id, admitting it first when the workspace lacks it."""
    tool_id = sha256_hex(component.data)
    if _is_admitted(rpc, tool_id):
        return tool_id
    if len(component.data) <= _PREFERRED_INLINE_BYTES:
        inline = artifacts_pb2.AdmitToolRequest(component=httpbody_pb2.HttpBody(content_type="application/wasm", data=component.data))
        try:
            return rpc.call(rpc.artifacts.AdmitTool, inline).id
        except ServiceError as error:
            if error.code != "component_too_large":
                raise
    upload_asset(rpc, component.data, tool_id)
    return rpc.call(rpc.artifacts.AdmitTool, artifacts_pb2.AdmitToolRequest(asset_sha256=tool_id)).id


def _is_admitted(rpc: Rpc, tool_id: str) -> bool:
    try:
        rpc.call(rpc.artifacts.GetTool, artifacts_pb2.GetToolRequest(id=tool_id))
        return True
    except ServiceError as error:
        if error.status == grpc.StatusCode.NOT_FOUND:
            return False
        raise
