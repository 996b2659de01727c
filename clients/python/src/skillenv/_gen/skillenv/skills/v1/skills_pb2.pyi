from skillenv._gen.google.api import annotations_pb2 as _annotations_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Iterable as _Iterable, Mapping as _Mapping, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class DeleteSkillRequest(_message.Message):
    __slots__ = ["name"]
    NAME_FIELD_NUMBER: _ClassVar[int]
    name: str
    def __init__(self, name: _Optional[str] = ...) -> None: ...

class DeleteSkillResponse(_message.Message):
    __slots__ = []
    def __init__(self) -> None: ...

class DeleteSkillVersionRequest(_message.Message):
    __slots__ = ["name", "version"]
    NAME_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    name: str
    version: int
    def __init__(self, name: _Optional[str] = ..., version: _Optional[int] = ...) -> None: ...

class DeleteSkillVersionResponse(_message.Message):
    __slots__ = []
    def __init__(self) -> None: ...

class GetSkillInstructionsRequest(_message.Message):
    __slots__ = ["name", "version"]
    NAME_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    name: str
    version: int
    def __init__(self, name: _Optional[str] = ..., version: _Optional[int] = ...) -> None: ...

class GetSkillInstructionsResponse(_message.Message):
    __slots__ = ["skill_md"]
    SKILL_MD_FIELD_NUMBER: _ClassVar[int]
    skill_md: str
    def __init__(self, skill_md: _Optional[str] = ...) -> None: ...

class GetSkillRequest(_message.Message):
    __slots__ = ["name"]
    NAME_FIELD_NUMBER: _ClassVar[int]
    name: str
    def __init__(self, name: _Optional[str] = ...) -> None: ...

class GetSkillResponse(_message.Message):
    __slots__ = ["files", "skill"]
    FILES_FIELD_NUMBER: _ClassVar[int]
    SKILL_FIELD_NUMBER: _ClassVar[int]
    files: _containers.RepeatedCompositeFieldContainer[SkillFile]
    skill: Skill
    def __init__(self, skill: _Optional[_Union[Skill, _Mapping]] = ..., files: _Optional[_Iterable[_Union[SkillFile, _Mapping]]] = ...) -> None: ...

class GetSkillVersionRequest(_message.Message):
    __slots__ = ["name", "version"]
    NAME_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    name: str
    version: int
    def __init__(self, name: _Optional[str] = ..., version: _Optional[int] = ...) -> None: ...

class GetSkillVersionResponse(_message.Message):
    __slots__ = ["files", "version"]
    FILES_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    files: _containers.RepeatedCompositeFieldContainer[SkillFile]
    version: SkillVersion
    def __init__(self, version: _Optional[_Union[SkillVersion, _Mapping]] = ..., files: _Optional[_Iterable[_Union[SkillFile, _Mapping]]] = ...) -> None: ...

class ListSkillVersionsRequest(_message.Message):
    __slots__ = ["name", "page_size", "page_token"]
    NAME_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    name: str
    page_size: int
    page_token: str
    def __init__(self, name: _Optional[str] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class ListSkillVersionsResponse(_message.Message):
    __slots__ = ["next_page_token", "versions"]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    VERSIONS_FIELD_NUMBER: _ClassVar[int]
    next_page_token: str
    versions: _containers.RepeatedCompositeFieldContainer[SkillVersion]
    def __init__(self, versions: _Optional[_Iterable[_Union[SkillVersion, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class ListSkillsRequest(_message.Message):
    __slots__ = ["page_size", "page_token"]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    page_size: int
    page_token: str
    def __init__(self, page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class ListSkillsResponse(_message.Message):
    __slots__ = ["next_page_token", "skills"]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    SKILLS_FIELD_NUMBER: _ClassVar[int]
    next_page_token: str
    skills: _containers.RepeatedCompositeFieldContainer[Skill]
    def __init__(self, skills: _Optional[_Iterable[_Union[Skill, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class PutSkillRequest(_message.Message):
    __slots__ = ["content_hash", "name"]
    CONTENT_HASH_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    content_hash: str
    name: str
    def __init__(self, name: _Optional[str] = ..., content_hash: _Optional[str] = ...) -> None: ...

class PutSkillResponse(_message.Message):
    __slots__ = ["changed", "skill"]
    CHANGED_FIELD_NUMBER: _ClassVar[int]
    SKILL_FIELD_NUMBER: _ClassVar[int]
    changed: bool
    skill: Skill
    def __init__(self, skill: _Optional[_Union[Skill, _Mapping]] = ..., changed: bool = ...) -> None: ...

class RollbackSkillRequest(_message.Message):
    __slots__ = ["name", "version"]
    NAME_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    name: str
    version: int
    def __init__(self, name: _Optional[str] = ..., version: _Optional[int] = ...) -> None: ...

class RollbackSkillResponse(_message.Message):
    __slots__ = ["changed", "skill", "version"]
    CHANGED_FIELD_NUMBER: _ClassVar[int]
    SKILL_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    changed: bool
    skill: Skill
    version: SkillVersion
    def __init__(self, skill: _Optional[_Union[Skill, _Mapping]] = ..., version: _Optional[_Union[SkillVersion, _Mapping]] = ..., changed: bool = ...) -> None: ...

class Skill(_message.Message):
    __slots__ = ["bundle_bytes", "content_hash", "created_at", "description", "file_count", "name", "total_file_bytes", "updated_at", "version"]
    BUNDLE_BYTES_FIELD_NUMBER: _ClassVar[int]
    CONTENT_HASH_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    FILE_COUNT_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    TOTAL_FILE_BYTES_FIELD_NUMBER: _ClassVar[int]
    UPDATED_AT_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    bundle_bytes: int
    content_hash: str
    created_at: _timestamp_pb2.Timestamp
    description: str
    file_count: int
    name: str
    total_file_bytes: int
    updated_at: _timestamp_pb2.Timestamp
    version: int
    def __init__(self, name: _Optional[str] = ..., description: _Optional[str] = ..., content_hash: _Optional[str] = ..., bundle_bytes: _Optional[int] = ..., file_count: _Optional[int] = ..., total_file_bytes: _Optional[int] = ..., created_at: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., updated_at: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., version: _Optional[int] = ...) -> None: ...

class SkillFile(_message.Message):
    __slots__ = ["crc32", "path", "size_bytes"]
    CRC32_FIELD_NUMBER: _ClassVar[int]
    PATH_FIELD_NUMBER: _ClassVar[int]
    SIZE_BYTES_FIELD_NUMBER: _ClassVar[int]
    crc32: int
    path: str
    size_bytes: int
    def __init__(self, path: _Optional[str] = ..., size_bytes: _Optional[int] = ..., crc32: _Optional[int] = ...) -> None: ...

class SkillVersion(_message.Message):
    __slots__ = ["bundle_bytes", "content_hash", "created_at", "current", "description", "file_count", "name", "restored_from", "total_file_bytes", "version"]
    BUNDLE_BYTES_FIELD_NUMBER: _ClassVar[int]
    CONTENT_HASH_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    CURRENT_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    FILE_COUNT_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    RESTORED_FROM_FIELD_NUMBER: _ClassVar[int]
    TOTAL_FILE_BYTES_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    bundle_bytes: int
    content_hash: str
    created_at: _timestamp_pb2.Timestamp
    current: bool
    description: str
    file_count: int
    name: str
    restored_from: int
    total_file_bytes: int
    version: int
    def __init__(self, name: _Optional[str] = ..., version: _Optional[int] = ..., content_hash: _Optional[str] = ..., description: _Optional[str] = ..., bundle_bytes: _Optional[int] = ..., file_count: _Optional[int] = ..., total_file_bytes: _Optional[int] = ..., created_at: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., restored_from: _Optional[int] = ..., current: bool = ...) -> None: ...
