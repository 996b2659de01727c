from skillenv._gen.google.api import annotations_pb2 as _annotations_pb2
from google.protobuf import duration_pb2 as _duration_pb2
from google.protobuf import struct_pb2 as _struct_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from skillenv._gen.skillenv.sessions.v1 import common_pb2 as _common_pb2
from skillenv._gen.skillenv.sessions.v1 import runs_pb2 as _runs_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Iterable as _Iterable, Mapping as _Mapping, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class CallToolRequest(_message.Message):
    __slots__ = ["input", "session_id", "timeout", "tool"]
    INPUT_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_FIELD_NUMBER: _ClassVar[int]
    TOOL_FIELD_NUMBER: _ClassVar[int]
    input: _struct_pb2.Value
    session_id: str
    timeout: _duration_pb2.Duration
    tool: str
    def __init__(self, session_id: _Optional[str] = ..., tool: _Optional[str] = ..., input: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ..., timeout: _Optional[_Union[_duration_pb2.Duration, _Mapping]] = ...) -> None: ...

class CallToolResponse(_message.Message):
    __slots__ = ["operation_id", "receipt"]
    OPERATION_ID_FIELD_NUMBER: _ClassVar[int]
    RECEIPT_FIELD_NUMBER: _ClassVar[int]
    operation_id: str
    receipt: _common_pb2.Receipt
    def __init__(self, operation_id: _Optional[str] = ..., receipt: _Optional[_Union[_common_pb2.Receipt, _Mapping]] = ...) -> None: ...

class CreateSessionRequest(_message.Message):
    __slots__ = ["environments", "run", "tools"]
    ENVIRONMENTS_FIELD_NUMBER: _ClassVar[int]
    RUN_FIELD_NUMBER: _ClassVar[int]
    TOOLS_FIELD_NUMBER: _ClassVar[int]
    environments: _containers.RepeatedCompositeFieldContainer[Environment]
    run: _runs_pb2.RunInput
    tools: _containers.RepeatedCompositeFieldContainer[ToolPlacement]
    def __init__(self, environments: _Optional[_Iterable[_Union[Environment, _Mapping]]] = ..., tools: _Optional[_Iterable[_Union[ToolPlacement, _Mapping]]] = ..., run: _Optional[_Union[_runs_pb2.RunInput, _Mapping]] = ...) -> None: ...

class CreateSessionResponse(_message.Message):
    __slots__ = ["run", "session"]
    RUN_FIELD_NUMBER: _ClassVar[int]
    SESSION_FIELD_NUMBER: _ClassVar[int]
    run: _runs_pb2.Run
    session: Session
    def __init__(self, session: _Optional[_Union[Session, _Mapping]] = ..., run: _Optional[_Union[_runs_pb2.Run, _Mapping]] = ...) -> None: ...

class DeleteSessionRequest(_message.Message):
    __slots__ = ["session_id"]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    def __init__(self, session_id: _Optional[str] = ...) -> None: ...

class DeleteSessionResponse(_message.Message):
    __slots__ = []
    def __init__(self) -> None: ...

class EndSessionRequest(_message.Message):
    __slots__ = ["session_id"]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    def __init__(self, session_id: _Optional[str] = ...) -> None: ...

class EndSessionResponse(_message.Message):
    __slots__ = ["session"]
    SESSION_FIELD_NUMBER: _ClassVar[int]
    session: Session
    def __init__(self, session: _Optional[_Union[Session, _Mapping]] = ...) -> None: ...

class Environment(_message.Message):
    __slots__ = ["extension", "host", "mcp", "name", "service", "setup", "state"]
    EXTENSION_FIELD_NUMBER: _ClassVar[int]
    HOST_FIELD_NUMBER: _ClassVar[int]
    MCP_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    SERVICE_FIELD_NUMBER: _ClassVar[int]
    SETUP_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    extension: ExtensionEnvironment
    host: HostEnvironment
    mcp: McpEnvironment
    name: str
    service: ServiceEnvironment
    setup: str
    state: str
    def __init__(self, name: _Optional[str] = ..., setup: _Optional[str] = ..., service: _Optional[_Union[ServiceEnvironment, _Mapping]] = ..., host: _Optional[_Union[HostEnvironment, _Mapping]] = ..., extension: _Optional[_Union[ExtensionEnvironment, _Mapping]] = ..., mcp: _Optional[_Union[McpEnvironment, _Mapping]] = ..., state: _Optional[str] = ...) -> None: ...

class ExtensionEnvironment(_message.Message):
    __slots__ = ["configuration", "credential", "url"]
    CONFIGURATION_FIELD_NUMBER: _ClassVar[int]
    CREDENTIAL_FIELD_NUMBER: _ClassVar[int]
    URL_FIELD_NUMBER: _ClassVar[int]
    configuration: _struct_pb2.Value
    credential: str
    url: str
    def __init__(self, url: _Optional[str] = ..., credential: _Optional[str] = ..., configuration: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ...) -> None: ...

class FilesystemGrants(_message.Message):
    __slots__ = ["scratch", "workspace"]
    SCRATCH_FIELD_NUMBER: _ClassVar[int]
    WORKSPACE_FIELD_NUMBER: _ClassVar[int]
    scratch: str
    workspace: str
    def __init__(self, workspace: _Optional[str] = ..., scratch: _Optional[str] = ...) -> None: ...

class GetSessionRequest(_message.Message):
    __slots__ = ["session_id"]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    def __init__(self, session_id: _Optional[str] = ...) -> None: ...

class GetSessionResponse(_message.Message):
    __slots__ = ["session"]
    SESSION_FIELD_NUMBER: _ClassVar[int]
    session: Session
    def __init__(self, session: _Optional[_Union[Session, _Mapping]] = ...) -> None: ...

class HostEnvironment(_message.Message):
    __slots__ = ["attached"]
    ATTACHED_FIELD_NUMBER: _ClassVar[int]
    attached: bool
    def __init__(self, attached: bool = ...) -> None: ...

class ListSessionsRequest(_message.Message):
    __slots__ = ["page_size", "page_token"]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    page_size: int
    page_token: str
    def __init__(self, page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class ListSessionsResponse(_message.Message):
    __slots__ = ["next_page_token", "sessions"]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    SESSIONS_FIELD_NUMBER: _ClassVar[int]
    next_page_token: str
    sessions: _containers.RepeatedCompositeFieldContainer[Session]
    def __init__(self, sessions: _Optional[_Iterable[_Union[Session, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class McpEnvironment(_message.Message):
    __slots__ = ["approval", "credential", "tools", "url"]
    APPROVAL_FIELD_NUMBER: _ClassVar[int]
    CREDENTIAL_FIELD_NUMBER: _ClassVar[int]
    TOOLS_FIELD_NUMBER: _ClassVar[int]
    URL_FIELD_NUMBER: _ClassVar[int]
    approval: str
    credential: str
    tools: _containers.RepeatedScalarFieldContainer[str]
    url: str
    def __init__(self, url: _Optional[str] = ..., credential: _Optional[str] = ..., tools: _Optional[_Iterable[str]] = ..., approval: _Optional[str] = ...) -> None: ...

class ServiceEnvironment(_message.Message):
    __slots__ = ["grants"]
    GRANTS_FIELD_NUMBER: _ClassVar[int]
    grants: ServiceGrants
    def __init__(self, grants: _Optional[_Union[ServiceGrants, _Mapping]] = ...) -> None: ...

class ServiceGrants(_message.Message):
    __slots__ = ["filesystem", "network", "secrets"]
    FILESYSTEM_FIELD_NUMBER: _ClassVar[int]
    NETWORK_FIELD_NUMBER: _ClassVar[int]
    SECRETS_FIELD_NUMBER: _ClassVar[int]
    filesystem: FilesystemGrants
    network: _containers.RepeatedScalarFieldContainer[str]
    secrets: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, filesystem: _Optional[_Union[FilesystemGrants, _Mapping]] = ..., network: _Optional[_Iterable[str]] = ..., secrets: _Optional[_Iterable[str]] = ...) -> None: ...

class Session(_message.Message):
    __slots__ = ["created_at", "ended_at", "environments", "id", "state", "tools"]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    ENDED_AT_FIELD_NUMBER: _ClassVar[int]
    ENVIRONMENTS_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    TOOLS_FIELD_NUMBER: _ClassVar[int]
    created_at: _timestamp_pb2.Timestamp
    ended_at: _timestamp_pb2.Timestamp
    environments: _containers.RepeatedCompositeFieldContainer[Environment]
    id: str
    state: str
    tools: _containers.RepeatedCompositeFieldContainer[ToolPlacement]
    def __init__(self, id: _Optional[str] = ..., state: _Optional[str] = ..., environments: _Optional[_Iterable[_Union[Environment, _Mapping]]] = ..., tools: _Optional[_Iterable[_Union[ToolPlacement, _Mapping]]] = ..., created_at: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., ended_at: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class SessionEvent(_message.Message):
    __slots__ = ["at", "data", "seq", "session_id", "type"]
    AT_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    SEQ_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    TYPE_FIELD_NUMBER: _ClassVar[int]
    at: _timestamp_pb2.Timestamp
    data: _struct_pb2.Struct
    seq: int
    session_id: str
    type: str
    def __init__(self, seq: _Optional[int] = ..., at: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., session_id: _Optional[str] = ..., type: _Optional[str] = ..., data: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ...) -> None: ...

class SetupEnvironmentRequest(_message.Message):
    __slots__ = ["environment", "session_id"]
    ENVIRONMENT_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    environment: str
    session_id: str
    def __init__(self, session_id: _Optional[str] = ..., environment: _Optional[str] = ...) -> None: ...

class SetupEnvironmentResponse(_message.Message):
    __slots__ = ["environment", "receipt"]
    ENVIRONMENT_FIELD_NUMBER: _ClassVar[int]
    RECEIPT_FIELD_NUMBER: _ClassVar[int]
    environment: Environment
    receipt: _common_pb2.Receipt
    def __init__(self, environment: _Optional[_Union[Environment, _Mapping]] = ..., receipt: _Optional[_Union[_common_pb2.Receipt, _Mapping]] = ...) -> None: ...

class ToolPlacement(_message.Message):
    __slots__ = ["approval", "configuration", "description", "environment", "implementation", "input_schema", "name"]
    APPROVAL_FIELD_NUMBER: _ClassVar[int]
    CONFIGURATION_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    ENVIRONMENT_FIELD_NUMBER: _ClassVar[int]
    IMPLEMENTATION_FIELD_NUMBER: _ClassVar[int]
    INPUT_SCHEMA_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    approval: str
    configuration: _struct_pb2.Value
    description: str
    environment: str
    implementation: _common_pb2.Implementation
    input_schema: _struct_pb2.Struct
    name: str
    def __init__(self, name: _Optional[str] = ..., description: _Optional[str] = ..., input_schema: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., environment: _Optional[str] = ..., implementation: _Optional[_Union[_common_pb2.Implementation, _Mapping]] = ..., configuration: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ..., approval: _Optional[str] = ...) -> None: ...

class WatchSessionRequest(_message.Message):
    __slots__ = ["after", "session_id"]
    AFTER_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    after: int
    session_id: str
    def __init__(self, session_id: _Optional[str] = ..., after: _Optional[int] = ...) -> None: ...

class WatchSessionResponse(_message.Message):
    __slots__ = ["event"]
    EVENT_FIELD_NUMBER: _ClassVar[int]
    event: SessionEvent
    def __init__(self, event: _Optional[_Union[SessionEvent, _Mapping]] = ...) -> None: ...
