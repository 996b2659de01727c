from skillenv._gen.google.api import annotations_pb2 as _annotations_pb2
from skillenv._gen.google.api import httpbody_pb2 as _httpbody_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Iterable as _Iterable, Mapping as _Mapping, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class AdmitAgentLoopRequest(_message.Message):
    __slots__ = ["asset_sha256", "component"]
    ASSET_SHA256_FIELD_NUMBER: _ClassVar[int]
    COMPONENT_FIELD_NUMBER: _ClassVar[int]
    asset_sha256: str
    component: _httpbody_pb2.HttpBody
    def __init__(self, component: _Optional[_Union[_httpbody_pb2.HttpBody, _Mapping]] = ..., asset_sha256: _Optional[str] = ...) -> None: ...

class AdmitAgentLoopResponse(_message.Message):
    __slots__ = ["id"]
    ID_FIELD_NUMBER: _ClassVar[int]
    id: str
    def __init__(self, id: _Optional[str] = ...) -> None: ...

class AdmitProgramRequest(_message.Message):
    __slots__ = ["body", "source"]
    BODY_FIELD_NUMBER: _ClassVar[int]
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    body: _httpbody_pb2.HttpBody
    source: str
    def __init__(self, source: _Optional[str] = ..., body: _Optional[_Union[_httpbody_pb2.HttpBody, _Mapping]] = ...) -> None: ...

class AdmitProgramResponse(_message.Message):
    __slots__ = ["id"]
    ID_FIELD_NUMBER: _ClassVar[int]
    id: str
    def __init__(self, id: _Optional[str] = ...) -> None: ...

class AdmitToolRequest(_message.Message):
    __slots__ = ["asset_sha256", "component"]
    ASSET_SHA256_FIELD_NUMBER: _ClassVar[int]
    COMPONENT_FIELD_NUMBER: _ClassVar[int]
    asset_sha256: str
    component: _httpbody_pb2.HttpBody
    def __init__(self, component: _Optional[_Union[_httpbody_pb2.HttpBody, _Mapping]] = ..., asset_sha256: _Optional[str] = ...) -> None: ...

class AdmitToolResponse(_message.Message):
    __slots__ = ["id"]
    ID_FIELD_NUMBER: _ClassVar[int]
    id: str
    def __init__(self, id: _Optional[str] = ...) -> None: ...

class Artifact(_message.Message):
    __slots__ = ["admitted_at", "id", "imports", "kind", "size_bytes", "world"]
    ADMITTED_AT_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    IMPORTS_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    SIZE_BYTES_FIELD_NUMBER: _ClassVar[int]
    WORLD_FIELD_NUMBER: _ClassVar[int]
    admitted_at: _timestamp_pb2.Timestamp
    id: str
    imports: _containers.RepeatedScalarFieldContainer[str]
    kind: str
    size_bytes: int
    world: str
    def __init__(self, id: _Optional[str] = ..., kind: _Optional[str] = ..., size_bytes: _Optional[int] = ..., admitted_at: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., world: _Optional[str] = ..., imports: _Optional[_Iterable[str]] = ...) -> None: ...

class GetAgentLoopRequest(_message.Message):
    __slots__ = ["id"]
    ID_FIELD_NUMBER: _ClassVar[int]
    id: str
    def __init__(self, id: _Optional[str] = ...) -> None: ...

class GetAgentLoopResponse(_message.Message):
    __slots__ = ["artifact"]
    ARTIFACT_FIELD_NUMBER: _ClassVar[int]
    artifact: Artifact
    def __init__(self, artifact: _Optional[_Union[Artifact, _Mapping]] = ...) -> None: ...

class GetProgramRequest(_message.Message):
    __slots__ = ["id"]
    ID_FIELD_NUMBER: _ClassVar[int]
    id: str
    def __init__(self, id: _Optional[str] = ...) -> None: ...

class GetProgramResponse(_message.Message):
    __slots__ = ["artifact"]
    ARTIFACT_FIELD_NUMBER: _ClassVar[int]
    artifact: Artifact
    def __init__(self, artifact: _Optional[_Union[Artifact, _Mapping]] = ...) -> None: ...

class GetToolRequest(_message.Message):
    __slots__ = ["id"]
    ID_FIELD_NUMBER: _ClassVar[int]
    id: str
    def __init__(self, id: _Optional[str] = ...) -> None: ...

class GetToolResponse(_message.Message):
    __slots__ = ["artifact"]
    ARTIFACT_FIELD_NUMBER: _ClassVar[int]
    artifact: Artifact
    def __init__(self, artifact: _Optional[_Union[Artifact, _Mapping]] = ...) -> None: ...

class PrepareRequest(_message.Message):
    __slots__ = ["agentloops", "programs", "tools"]
    AGENTLOOPS_FIELD_NUMBER: _ClassVar[int]
    PROGRAMS_FIELD_NUMBER: _ClassVar[int]
    TOOLS_FIELD_NUMBER: _ClassVar[int]
    agentloops: _containers.RepeatedScalarFieldContainer[str]
    programs: _containers.RepeatedScalarFieldContainer[str]
    tools: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, agentloops: _Optional[_Iterable[str]] = ..., programs: _Optional[_Iterable[str]] = ..., tools: _Optional[_Iterable[str]] = ...) -> None: ...

class PrepareResponse(_message.Message):
    __slots__ = ["artifacts"]
    ARTIFACTS_FIELD_NUMBER: _ClassVar[int]
    artifacts: _containers.RepeatedCompositeFieldContainer[PreparedArtifact]
    def __init__(self, artifacts: _Optional[_Iterable[_Union[PreparedArtifact, _Mapping]]] = ...) -> None: ...

class PreparedArtifact(_message.Message):
    __slots__ = ["id", "kind", "ready"]
    ID_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    READY_FIELD_NUMBER: _ClassVar[int]
    id: str
    kind: str
    ready: bool
    def __init__(self, id: _Optional[str] = ..., kind: _Optional[str] = ..., ready: bool = ...) -> None: ...
