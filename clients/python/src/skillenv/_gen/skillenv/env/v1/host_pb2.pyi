from google.protobuf import struct_pb2 as _struct_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Mapping as _Mapping, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Accepted(_message.Message):
    __slots__ = []
    def __init__(self) -> None: ...

class Attach(_message.Message):
    __slots__ = ["environment", "session_id"]
    ENVIRONMENT_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    environment: str
    session_id: str
    def __init__(self, session_id: _Optional[str] = ..., environment: _Optional[str] = ...) -> None: ...

class Attached(_message.Message):
    __slots__ = ["connection_id"]
    CONNECTION_ID_FIELD_NUMBER: _ClassVar[int]
    connection_id: str
    def __init__(self, connection_id: _Optional[str] = ...) -> None: ...

class CancelCommand(_message.Message):
    __slots__ = ["operation_id"]
    OPERATION_ID_FIELD_NUMBER: _ClassVar[int]
    operation_id: str
    def __init__(self, operation_id: _Optional[str] = ...) -> None: ...

class Closing(_message.Message):
    __slots__ = ["code", "reason"]
    CODE_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    code: str
    reason: str
    def __init__(self, reason: _Optional[str] = ..., code: _Optional[str] = ...) -> None: ...

class Command(_message.Message):
    __slots__ = ["configuration", "deadline", "environment", "implementation", "input", "operation_id", "seq", "session_id", "tool"]
    CONFIGURATION_FIELD_NUMBER: _ClassVar[int]
    DEADLINE_FIELD_NUMBER: _ClassVar[int]
    ENVIRONMENT_FIELD_NUMBER: _ClassVar[int]
    IMPLEMENTATION_FIELD_NUMBER: _ClassVar[int]
    INPUT_FIELD_NUMBER: _ClassVar[int]
    OPERATION_ID_FIELD_NUMBER: _ClassVar[int]
    SEQ_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    TOOL_FIELD_NUMBER: _ClassVar[int]
    configuration: _struct_pb2.Value
    deadline: _timestamp_pb2.Timestamp
    environment: str
    implementation: _struct_pb2.Value
    input: _struct_pb2.Value
    operation_id: str
    seq: int
    session_id: str
    tool: str
    def __init__(self, operation_id: _Optional[str] = ..., seq: _Optional[int] = ..., deadline: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., session_id: _Optional[str] = ..., environment: _Optional[str] = ..., tool: _Optional[str] = ..., input: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ..., implementation: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ..., configuration: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ...) -> None: ...

class CommandsRequest(_message.Message):
    __slots__ = ["attach"]
    ATTACH_FIELD_NUMBER: _ClassVar[int]
    attach: Attach
    def __init__(self, attach: _Optional[_Union[Attach, _Mapping]] = ...) -> None: ...

class CommandsResponse(_message.Message):
    __slots__ = ["message"]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    message: ServerMessage
    def __init__(self, message: _Optional[_Union[ServerMessage, _Mapping]] = ...) -> None: ...

class ConnectRequest(_message.Message):
    __slots__ = ["attach", "receipt"]
    ATTACH_FIELD_NUMBER: _ClassVar[int]
    RECEIPT_FIELD_NUMBER: _ClassVar[int]
    attach: Attach
    receipt: HostReceipt
    def __init__(self, attach: _Optional[_Union[Attach, _Mapping]] = ..., receipt: _Optional[_Union[HostReceipt, _Mapping]] = ...) -> None: ...

class ConnectResponse(_message.Message):
    __slots__ = ["message"]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    message: ServerMessage
    def __init__(self, message: _Optional[_Union[ServerMessage, _Mapping]] = ...) -> None: ...

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

class HostReceipt(_message.Message):
    __slots__ = ["accepted", "failure", "operation_id", "progress", "returned"]
    ACCEPTED_FIELD_NUMBER: _ClassVar[int]
    FAILURE_FIELD_NUMBER: _ClassVar[int]
    OPERATION_ID_FIELD_NUMBER: _ClassVar[int]
    PROGRESS_FIELD_NUMBER: _ClassVar[int]
    RETURNED_FIELD_NUMBER: _ClassVar[int]
    accepted: Accepted
    failure: Failure
    operation_id: str
    progress: Progress
    returned: Returned
    def __init__(self, operation_id: _Optional[str] = ..., accepted: _Optional[_Union[Accepted, _Mapping]] = ..., progress: _Optional[_Union[Progress, _Mapping]] = ..., returned: _Optional[_Union[Returned, _Mapping]] = ..., failure: _Optional[_Union[Failure, _Mapping]] = ...) -> None: ...

class Progress(_message.Message):
    __slots__ = ["message"]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    message: str
    def __init__(self, message: _Optional[str] = ...) -> None: ...

class ReceiptRefused(_message.Message):
    __slots__ = ["operation_id", "reason"]
    OPERATION_ID_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    operation_id: str
    reason: str
    def __init__(self, operation_id: _Optional[str] = ..., reason: _Optional[str] = ...) -> None: ...

class ReportRequest(_message.Message):
    __slots__ = ["connection_id", "receipt"]
    CONNECTION_ID_FIELD_NUMBER: _ClassVar[int]
    RECEIPT_FIELD_NUMBER: _ClassVar[int]
    connection_id: str
    receipt: HostReceipt
    def __init__(self, connection_id: _Optional[str] = ..., receipt: _Optional[_Union[HostReceipt, _Mapping]] = ...) -> None: ...

class ReportResponse(_message.Message):
    __slots__ = []
    def __init__(self) -> None: ...

class Returned(_message.Message):
    __slots__ = ["output"]
    OUTPUT_FIELD_NUMBER: _ClassVar[int]
    output: _struct_pb2.Value
    def __init__(self, output: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ...) -> None: ...

class ServerMessage(_message.Message):
    __slots__ = ["attached", "cancel", "closing", "command", "refused"]
    ATTACHED_FIELD_NUMBER: _ClassVar[int]
    CANCEL_FIELD_NUMBER: _ClassVar[int]
    CLOSING_FIELD_NUMBER: _ClassVar[int]
    COMMAND_FIELD_NUMBER: _ClassVar[int]
    REFUSED_FIELD_NUMBER: _ClassVar[int]
    attached: Attached
    cancel: CancelCommand
    closing: Closing
    command: Command
    refused: ReceiptRefused
    def __init__(self, attached: _Optional[_Union[Attached, _Mapping]] = ..., command: _Optional[_Union[Command, _Mapping]] = ..., cancel: _Optional[_Union[CancelCommand, _Mapping]] = ..., refused: _Optional[_Union[ReceiptRefused, _Mapping]] = ..., closing: _Optional[_Union[Closing, _Mapping]] = ...) -> None: ...
