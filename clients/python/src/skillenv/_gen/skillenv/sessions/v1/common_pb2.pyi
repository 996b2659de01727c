from google.protobuf import struct_pb2 as _struct_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Mapping as _Mapping, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Failure(_message.Message):
    __slots__ = ["code", "details", "message", "retryable"]
    class DetailsEntry(_message.Message):
        __slots__ = ["key", "value"]
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    CODE_FIELD_NUMBER: _ClassVar[int]
    DETAILS_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    RETRYABLE_FIELD_NUMBER: _ClassVar[int]
    code: str
    details: _containers.ScalarMap[str, str]
    message: str
    retryable: bool
    def __init__(self, code: _Optional[str] = ..., message: _Optional[str] = ..., retryable: bool = ..., details: _Optional[_Mapping[str, str]] = ...) -> None: ...

class Implementation(_message.Message):
    __slots__ = ["agentloop", "mcp_tool", "opaque", "program", "tool"]
    AGENTLOOP_FIELD_NUMBER: _ClassVar[int]
    MCP_TOOL_FIELD_NUMBER: _ClassVar[int]
    OPAQUE_FIELD_NUMBER: _ClassVar[int]
    PROGRAM_FIELD_NUMBER: _ClassVar[int]
    TOOL_FIELD_NUMBER: _ClassVar[int]
    agentloop: str
    mcp_tool: str
    opaque: _struct_pb2.Value
    program: ServiceProgram
    tool: str
    def __init__(self, tool: _Optional[str] = ..., program: _Optional[_Union[ServiceProgram, _Mapping]] = ..., opaque: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ..., agentloop: _Optional[str] = ..., mcp_tool: _Optional[str] = ...) -> None: ...

class Receipt(_message.Message):
    __slots__ = ["failure", "returned", "unknown"]
    FAILURE_FIELD_NUMBER: _ClassVar[int]
    RETURNED_FIELD_NUMBER: _ClassVar[int]
    UNKNOWN_FIELD_NUMBER: _ClassVar[int]
    failure: Failure
    returned: Returned
    unknown: Unknown
    def __init__(self, returned: _Optional[_Union[Returned, _Mapping]] = ..., failure: _Optional[_Union[Failure, _Mapping]] = ..., unknown: _Optional[_Union[Unknown, _Mapping]] = ...) -> None: ...

class Returned(_message.Message):
    __slots__ = ["output"]
    OUTPUT_FIELD_NUMBER: _ClassVar[int]
    output: _struct_pb2.Value
    def __init__(self, output: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ...) -> None: ...

class ServiceProgram(_message.Message):
    __slots__ = ["id", "runtime"]
    ID_FIELD_NUMBER: _ClassVar[int]
    RUNTIME_FIELD_NUMBER: _ClassVar[int]
    id: str
    runtime: str
    def __init__(self, id: _Optional[str] = ..., runtime: _Optional[str] = ...) -> None: ...

class Unknown(_message.Message):
    __slots__ = ["message"]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    message: str
    def __init__(self, message: _Optional[str] = ...) -> None: ...
