from skillenv._gen.google.api import annotations_pb2 as _annotations_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Mapping as _Mapping, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class GetWorkspaceStatusRequest(_message.Message):
    __slots__ = []
    def __init__(self) -> None: ...

class GetWorkspaceStatusResponse(_message.Message):
    __slots__ = ["pool", "read_at", "runs_last_hour", "sessions"]
    POOL_FIELD_NUMBER: _ClassVar[int]
    READ_AT_FIELD_NUMBER: _ClassVar[int]
    RUNS_LAST_HOUR_FIELD_NUMBER: _ClassVar[int]
    SESSIONS_FIELD_NUMBER: _ClassVar[int]
    pool: PoolStatus
    read_at: _timestamp_pb2.Timestamp
    runs_last_hour: RunCounts
    sessions: SessionCounts
    def __init__(self, read_at: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., sessions: _Optional[_Union[SessionCounts, _Mapping]] = ..., runs_last_hour: _Optional[_Union[RunCounts, _Mapping]] = ..., pool: _Optional[_Union[PoolStatus, _Mapping]] = ...) -> None: ...

class PoolStatus(_message.Message):
    __slots__ = ["agent_loops", "available", "tools"]
    AGENT_LOOPS_FIELD_NUMBER: _ClassVar[int]
    AVAILABLE_FIELD_NUMBER: _ClassVar[int]
    TOOLS_FIELD_NUMBER: _ClassVar[int]
    agent_loops: SlotCounts
    available: bool
    tools: SlotCounts
    def __init__(self, available: bool = ..., tools: _Optional[_Union[SlotCounts, _Mapping]] = ..., agent_loops: _Optional[_Union[SlotCounts, _Mapping]] = ...) -> None: ...

class RunCounts(_message.Message):
    __slots__ = ["cancelled", "completed", "failed", "running", "since", "truncated"]
    CANCELLED_FIELD_NUMBER: _ClassVar[int]
    COMPLETED_FIELD_NUMBER: _ClassVar[int]
    FAILED_FIELD_NUMBER: _ClassVar[int]
    RUNNING_FIELD_NUMBER: _ClassVar[int]
    SINCE_FIELD_NUMBER: _ClassVar[int]
    TRUNCATED_FIELD_NUMBER: _ClassVar[int]
    cancelled: int
    completed: int
    failed: int
    running: int
    since: _timestamp_pb2.Timestamp
    truncated: bool
    def __init__(self, since: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., running: _Optional[int] = ..., completed: _Optional[int] = ..., failed: _Optional[int] = ..., cancelled: _Optional[int] = ..., truncated: bool = ...) -> None: ...

class SessionCounts(_message.Message):
    __slots__ = ["active", "deleting", "ended", "ending"]
    ACTIVE_FIELD_NUMBER: _ClassVar[int]
    DELETING_FIELD_NUMBER: _ClassVar[int]
    ENDED_FIELD_NUMBER: _ClassVar[int]
    ENDING_FIELD_NUMBER: _ClassVar[int]
    active: int
    deleting: int
    ended: int
    ending: int
    def __init__(self, active: _Optional[int] = ..., ending: _Optional[int] = ..., ended: _Optional[int] = ..., deleting: _Optional[int] = ...) -> None: ...

class SlotCounts(_message.Message):
    __slots__ = ["busy", "total", "waiting", "workspace_busy", "workspace_waiting"]
    BUSY_FIELD_NUMBER: _ClassVar[int]
    TOTAL_FIELD_NUMBER: _ClassVar[int]
    WAITING_FIELD_NUMBER: _ClassVar[int]
    WORKSPACE_BUSY_FIELD_NUMBER: _ClassVar[int]
    WORKSPACE_WAITING_FIELD_NUMBER: _ClassVar[int]
    busy: int
    total: int
    waiting: int
    workspace_busy: int
    workspace_waiting: int
    def __init__(self, total: _Optional[int] = ..., busy: _Optional[int] = ..., waiting: _Optional[int] = ..., workspace_busy: _Optional[int] = ..., workspace_waiting: _Optional[int] = ...) -> None: ...
