from skillenv._gen.google.api import annotations_pb2 as _annotations_pb2
from google.protobuf import struct_pb2 as _struct_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from skillenv._gen.skillenv.sessions.v1 import common_pb2 as _common_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Iterable as _Iterable, Mapping as _Mapping, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class AgentLoop(_message.Message):
    __slots__ = ["configuration", "environment", "implementation"]
    CONFIGURATION_FIELD_NUMBER: _ClassVar[int]
    ENVIRONMENT_FIELD_NUMBER: _ClassVar[int]
    IMPLEMENTATION_FIELD_NUMBER: _ClassVar[int]
    configuration: _struct_pb2.Value
    environment: str
    implementation: _common_pb2.Implementation
    def __init__(self, environment: _Optional[str] = ..., implementation: _Optional[_Union[_common_pb2.Implementation, _Mapping]] = ..., configuration: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ...) -> None: ...

class Approval(_message.Message):
    __slots__ = ["call_id", "decided_at", "decided_by", "id", "input", "message", "requested_at", "round", "run_id", "status", "tool"]
    CALL_ID_FIELD_NUMBER: _ClassVar[int]
    DECIDED_AT_FIELD_NUMBER: _ClassVar[int]
    DECIDED_BY_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    INPUT_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    REQUESTED_AT_FIELD_NUMBER: _ClassVar[int]
    ROUND_FIELD_NUMBER: _ClassVar[int]
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    TOOL_FIELD_NUMBER: _ClassVar[int]
    call_id: str
    decided_at: _timestamp_pb2.Timestamp
    decided_by: ApprovalDecider
    id: str
    input: _struct_pb2.Value
    message: str
    requested_at: _timestamp_pb2.Timestamp
    round: int
    run_id: str
    status: str
    tool: str
    def __init__(self, id: _Optional[str] = ..., run_id: _Optional[str] = ..., round: _Optional[int] = ..., call_id: _Optional[str] = ..., tool: _Optional[str] = ..., input: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ..., status: _Optional[str] = ..., requested_at: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., decided_at: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., decided_by: _Optional[_Union[ApprovalDecider, _Mapping]] = ..., message: _Optional[str] = ...) -> None: ...

class ApprovalDecider(_message.Message):
    __slots__ = ["label", "workspace"]
    LABEL_FIELD_NUMBER: _ClassVar[int]
    WORKSPACE_FIELD_NUMBER: _ClassVar[int]
    label: str
    workspace: str
    def __init__(self, workspace: _Optional[str] = ..., label: _Optional[str] = ...) -> None: ...

class ApproveToolCallRequest(_message.Message):
    __slots__ = ["approval_id", "label", "run_id", "session_id"]
    APPROVAL_ID_FIELD_NUMBER: _ClassVar[int]
    LABEL_FIELD_NUMBER: _ClassVar[int]
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    approval_id: str
    label: str
    run_id: str
    session_id: str
    def __init__(self, session_id: _Optional[str] = ..., run_id: _Optional[str] = ..., approval_id: _Optional[str] = ..., label: _Optional[str] = ...) -> None: ...

class ApproveToolCallResponse(_message.Message):
    __slots__ = ["approval"]
    APPROVAL_FIELD_NUMBER: _ClassVar[int]
    approval: Approval
    def __init__(self, approval: _Optional[_Union[Approval, _Mapping]] = ...) -> None: ...

class CancelRunRequest(_message.Message):
    __slots__ = ["run_id", "session_id"]
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    run_id: str
    session_id: str
    def __init__(self, session_id: _Optional[str] = ..., run_id: _Optional[str] = ...) -> None: ...

class CancelRunResponse(_message.Message):
    __slots__ = ["run"]
    RUN_FIELD_NUMBER: _ClassVar[int]
    run: Run
    def __init__(self, run: _Optional[_Union[Run, _Mapping]] = ...) -> None: ...

class CreateRunRequest(_message.Message):
    __slots__ = ["run", "session_id"]
    RUN_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    run: RunInput
    session_id: str
    def __init__(self, session_id: _Optional[str] = ..., run: _Optional[_Union[RunInput, _Mapping]] = ...) -> None: ...

class CreateRunResponse(_message.Message):
    __slots__ = ["created", "run"]
    CREATED_FIELD_NUMBER: _ClassVar[int]
    RUN_FIELD_NUMBER: _ClassVar[int]
    created: bool
    run: Run
    def __init__(self, run: _Optional[_Union[Run, _Mapping]] = ..., created: bool = ...) -> None: ...

class DeleteRunRequest(_message.Message):
    __slots__ = ["run_id", "session_id"]
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    run_id: str
    session_id: str
    def __init__(self, session_id: _Optional[str] = ..., run_id: _Optional[str] = ...) -> None: ...

class DeleteRunResponse(_message.Message):
    __slots__ = []
    def __init__(self) -> None: ...

class DenyToolCallRequest(_message.Message):
    __slots__ = ["approval_id", "label", "message", "run_id", "session_id"]
    APPROVAL_ID_FIELD_NUMBER: _ClassVar[int]
    LABEL_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    approval_id: str
    label: str
    message: str
    run_id: str
    session_id: str
    def __init__(self, session_id: _Optional[str] = ..., run_id: _Optional[str] = ..., approval_id: _Optional[str] = ..., label: _Optional[str] = ..., message: _Optional[str] = ...) -> None: ...

class DenyToolCallResponse(_message.Message):
    __slots__ = ["approval"]
    APPROVAL_FIELD_NUMBER: _ClassVar[int]
    approval: Approval
    def __init__(self, approval: _Optional[_Union[Approval, _Mapping]] = ...) -> None: ...

class GetRunRequest(_message.Message):
    __slots__ = ["run_id", "session_id"]
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    run_id: str
    session_id: str
    def __init__(self, session_id: _Optional[str] = ..., run_id: _Optional[str] = ...) -> None: ...

class GetRunResponse(_message.Message):
    __slots__ = ["run"]
    RUN_FIELD_NUMBER: _ClassVar[int]
    run: Run
    def __init__(self, run: _Optional[_Union[Run, _Mapping]] = ...) -> None: ...

class ListApprovalsRequest(_message.Message):
    __slots__ = ["run_id", "session_id"]
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    run_id: str
    session_id: str
    def __init__(self, session_id: _Optional[str] = ..., run_id: _Optional[str] = ...) -> None: ...

class ListApprovalsResponse(_message.Message):
    __slots__ = ["approvals"]
    APPROVALS_FIELD_NUMBER: _ClassVar[int]
    approvals: _containers.RepeatedCompositeFieldContainer[Approval]
    def __init__(self, approvals: _Optional[_Iterable[_Union[Approval, _Mapping]]] = ...) -> None: ...

class ListRunsRequest(_message.Message):
    __slots__ = ["page_size", "page_token", "session_id"]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    page_size: int
    page_token: str
    session_id: str
    def __init__(self, session_id: _Optional[str] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class ListRunsResponse(_message.Message):
    __slots__ = ["next_page_token", "runs"]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    RUNS_FIELD_NUMBER: _ClassVar[int]
    next_page_token: str
    runs: _containers.RepeatedCompositeFieldContainer[Run]
    def __init__(self, runs: _Optional[_Iterable[_Union[Run, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class Model(_message.Message):
    __slots__ = ["disable_prompt_cache", "max_tokens", "name", "parameters", "provider"]
    DISABLE_PROMPT_CACHE_FIELD_NUMBER: _ClassVar[int]
    MAX_TOKENS_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    PARAMETERS_FIELD_NUMBER: _ClassVar[int]
    PROVIDER_FIELD_NUMBER: _ClassVar[int]
    disable_prompt_cache: bool
    max_tokens: int
    name: str
    parameters: _struct_pb2.Struct
    provider: str
    def __init__(self, provider: _Optional[str] = ..., name: _Optional[str] = ..., max_tokens: _Optional[int] = ..., parameters: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., disable_prompt_cache: bool = ...) -> None: ...

class Run(_message.Message):
    __slots__ = ["created_at", "error", "finished_at", "id", "idempotency_hash", "idempotency_key", "model", "output_text", "rounds", "session_id", "skills", "status", "stop_reason", "tool_calls", "usage"]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    FINISHED_AT_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENCY_HASH_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_TEXT_FIELD_NUMBER: _ClassVar[int]
    ROUNDS_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    SKILLS_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    STOP_REASON_FIELD_NUMBER: _ClassVar[int]
    TOOL_CALLS_FIELD_NUMBER: _ClassVar[int]
    USAGE_FIELD_NUMBER: _ClassVar[int]
    created_at: _timestamp_pb2.Timestamp
    error: _common_pb2.Failure
    finished_at: _timestamp_pb2.Timestamp
    id: str
    idempotency_hash: str
    idempotency_key: str
    model: Model
    output_text: str
    rounds: int
    session_id: str
    skills: _containers.RepeatedCompositeFieldContainer[SkillSnapshot]
    status: str
    stop_reason: str
    tool_calls: int
    usage: Usage
    def __init__(self, id: _Optional[str] = ..., session_id: _Optional[str] = ..., status: _Optional[str] = ..., model: _Optional[_Union[Model, _Mapping]] = ..., skills: _Optional[_Iterable[_Union[SkillSnapshot, _Mapping]]] = ..., created_at: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., finished_at: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., usage: _Optional[_Union[Usage, _Mapping]] = ..., stop_reason: _Optional[str] = ..., rounds: _Optional[int] = ..., tool_calls: _Optional[int] = ..., output_text: _Optional[str] = ..., error: _Optional[_Union[_common_pb2.Failure, _Mapping]] = ..., idempotency_hash: _Optional[str] = ..., idempotency_key: _Optional[str] = ...) -> None: ...

class RunFile(_message.Message):
    __slots__ = ["asset_sha256", "path"]
    ASSET_SHA256_FIELD_NUMBER: _ClassVar[int]
    PATH_FIELD_NUMBER: _ClassVar[int]
    asset_sha256: str
    path: str
    def __init__(self, path: _Optional[str] = ..., asset_sha256: _Optional[str] = ...) -> None: ...

class RunInput(_message.Message):
    __slots__ = ["agentloop", "agents_md", "files", "idempotency_key", "max_rounds", "message", "model", "provider_keys", "skills"]
    class ProviderKeysEntry(_message.Message):
        __slots__ = ["key", "value"]
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    AGENTLOOP_FIELD_NUMBER: _ClassVar[int]
    AGENTS_MD_FIELD_NUMBER: _ClassVar[int]
    FILES_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    MAX_ROUNDS_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    PROVIDER_KEYS_FIELD_NUMBER: _ClassVar[int]
    SKILLS_FIELD_NUMBER: _ClassVar[int]
    agentloop: AgentLoop
    agents_md: str
    files: _containers.RepeatedCompositeFieldContainer[RunFile]
    idempotency_key: str
    max_rounds: int
    message: str
    model: Model
    provider_keys: _containers.ScalarMap[str, str]
    skills: _containers.RepeatedCompositeFieldContainer[SkillReference]
    def __init__(self, model: _Optional[_Union[Model, _Mapping]] = ..., agentloop: _Optional[_Union[AgentLoop, _Mapping]] = ..., skills: _Optional[_Iterable[_Union[SkillReference, _Mapping]]] = ..., message: _Optional[str] = ..., agents_md: _Optional[str] = ..., files: _Optional[_Iterable[_Union[RunFile, _Mapping]]] = ..., provider_keys: _Optional[_Mapping[str, str]] = ..., idempotency_key: _Optional[str] = ..., max_rounds: _Optional[int] = ...) -> None: ...

class SkillReference(_message.Message):
    __slots__ = ["kind", "name", "version"]
    KIND_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    kind: str
    name: str
    version: int
    def __init__(self, kind: _Optional[str] = ..., name: _Optional[str] = ..., version: _Optional[int] = ...) -> None: ...

class SkillSnapshot(_message.Message):
    __slots__ = ["content_hash", "description", "name", "pinned", "version"]
    CONTENT_HASH_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    PINNED_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    content_hash: str
    description: str
    name: str
    pinned: bool
    version: int
    def __init__(self, name: _Optional[str] = ..., content_hash: _Optional[str] = ..., description: _Optional[str] = ..., version: _Optional[int] = ..., pinned: bool = ...) -> None: ...

class Usage(_message.Message):
    __slots__ = ["cache_creation_input_tokens", "cache_read_input_tokens", "input_tokens", "output_tokens", "reasoning_tokens"]
    CACHE_CREATION_INPUT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    CACHE_READ_INPUT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    INPUT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    REASONING_TOKENS_FIELD_NUMBER: _ClassVar[int]
    cache_creation_input_tokens: int
    cache_read_input_tokens: int
    input_tokens: int
    output_tokens: int
    reasoning_tokens: int
    def __init__(self, input_tokens: _Optional[int] = ..., output_tokens: _Optional[int] = ..., cache_creation_input_tokens: _Optional[int] = ..., cache_read_input_tokens: _Optional[int] = ..., reasoning_tokens: _Optional[int] = ...) -> None: ...
