"""The workspace's skill registry: upload (presign -> PUT -> finalize -> PutSkill), list, get, delete,
and each skill's versions: list them, get one, roll back to one, delete one."""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime
from typing import overload

from skillenv._gen.skillenv.skills.v1 import skills_pb2
from skillenv._once import OncePerInstance
from skillenv._rpc import Rpc
from skillenv._wire import datetime_of
from skillenv.assets import upload_asset
from skillenv.bundle import BundleLimits, assert_within_limits
from skillenv.skill import Skill


@dataclass(frozen=True)
class SkillFile:
    """One file of a skill's bundle: its path and size, never its bytes."""

    path: str
    size_bytes: int


@dataclass(frozen=True)
class SkillMetadata:
    """A workspace skill as the registry reports it: never its bytes."""

    name: str
    description: str
    content_hash: str
    bundle_bytes: int
    file_count: int
    total_file_bytes: int
    created_at: datetime
    """When the name was first bound."""
    updated_at: datetime
    """When the name was last bound to different bytes."""
    files: tuple[SkillFile, ...] = ()
    """Every file's path and size, from `get` (a listing leaves it empty)."""
    version: int = 0
    """The current version: the newest, which a reference without a version resolves to."""

    @classmethod
    def from_message(cls, message: skills_pb2.Skill, files: Sequence[skills_pb2.SkillFile] = ()) -> SkillMetadata:
        return cls(
            name=message.name,
            description=message.description,
            content_hash=message.content_hash,
            bundle_bytes=message.bundle_bytes,
            file_count=message.file_count,
            total_file_bytes=message.total_file_bytes,
            created_at=datetime_of(message.created_at),
            updated_at=datetime_of(message.updated_at),
            files=tuple(SkillFile(path=file.path, size_bytes=file.size_bytes) for file in files),
            version=message.version,
        )


@dataclass(frozen=True)
class SkillVersion:
    """One immutable version of a skill: metadata only, never its bytes."""

    name: str
    version: int
    content_hash: str
    description: str
    bundle_bytes: int
    file_count: int
    total_file_bytes: int
    created_at: datetime
    restored_from: int
    """The version a rollback copied this one from; 0 when PutSkill bound it."""
    current: bool
    """Whether a reference without a version resolves to it."""
    files: tuple[SkillFile, ...] = ()
    """Every file's path and size, from `get(name, version=...)` (a listing leaves it empty)."""

    @classmethod
    def from_message(cls, message: skills_pb2.SkillVersion, files: Sequence[skills_pb2.SkillFile] = ()) -> SkillVersion:
        return cls(
            name=message.name,
            version=message.version,
            content_hash=message.content_hash,
            description=message.description,
            bundle_bytes=message.bundle_bytes,
            file_count=message.file_count,
            total_file_bytes=message.total_file_bytes,
            created_at=datetime_of(message.created_at),
            restored_from=message.restored_from,
            current=message.current,
            files=tuple(SkillFile(path=file.path, size_bytes=file.size_bytes) for file in files),
        )


@dataclass(frozen=True)
class SkillVersionPage:
    versions: list[SkillVersion]
    """Newest first."""
    next_page_token: str
    """Empty on the last page."""


@dataclass(frozen=True)
class Rollback:
    skill: SkillMetadata
    version: SkillVersion
    """The new current version (its `restored_from` set), or the current one when nothing changed."""
    changed: bool


@dataclass(frozen=True)
class UploadedSkill:
    name: str
    content_hash: str
    bytes_sent: int
    """Bundle bytes sent to the object store; 0 when the workspace had them already."""
    changed: bool
    """False when the name was bound to these bytes already."""
    metadata: SkillMetadata


@dataclass(frozen=True)
class SkillPage:
    skills: list[SkillMetadata]
    """In name order."""
    next_page_token: str
    """Empty on the last page."""


class SkillsClient:
    """`client.skills`. Uploads are kept per skill object: repeated or concurrent uploads of one
    `Skill` cost one set of round trips, and a run given that object needs none."""

    def __init__(self, rpc: Rpc, limits: BundleLimits) -> None:
        self._rpc = rpc
        self._limits = limits
        self._upload = OncePerInstance(self._upload_once)

    def upload(self, skill: Skill) -> UploadedSkill:
        """presign -> PUT (skipped when the workspace has the bytes) -> finalize -> PutSkill.

        A bundle breaking the bundle limits is refused before anything is sent.
        """
        return self._upload(skill)

    def upload_all(self, skills: Sequence[Skill], concurrency: int = 4) -> list[UploadedSkill]:
        """Uploads several skills, at most `concurrency` at a time; the results in the given order."""
        if not skills:
            return []
        with ThreadPoolExecutor(max_workers=max(1, min(concurrency, len(skills)))) as pool:
            return list(pool.map(self.upload, skills))

    def list(self, page_size: int = 0, page_token: str = "") -> SkillPage:
        """A page of skills in name order: 50 by default, at most 1000."""
        page = self._rpc.call(self._rpc.skills.ListSkills, skills_pb2.ListSkillsRequest(page_size=page_size, page_token=page_token))
        return SkillPage([SkillMetadata.from_message(skill) for skill in page.skills], page.next_page_token)

    @overload
    def get(self, name: str) -> SkillMetadata: ...
    @overload
    def get(self, name: str, *, version: int) -> SkillVersion: ...
    def get(self, name: str, *, version: int | None = None) -> SkillMetadata | SkillVersion:
        """The skill's metadata and its files' paths and sizes; with `version`, that version's."""
        if version is not None:
            found = self._rpc.call(self._rpc.skills.GetSkillVersion, skills_pb2.GetSkillVersionRequest(name=name, version=version))
            return SkillVersion.from_message(found.version, found.files)
        response = self._rpc.call(self._rpc.skills.GetSkill, skills_pb2.GetSkillRequest(name=name))
        return SkillMetadata.from_message(response.skill, response.files)

    def versions(self, name: str, page_size: int = 0, page_token: str = "") -> SkillVersionPage:
        """A page of the skill's versions, newest first: 50 by default, at most 1000."""
        request = skills_pb2.ListSkillVersionsRequest(name=name, page_size=page_size, page_token=page_token)
        page = self._rpc.call(self._rpc.skills.ListSkillVersions, request)
        return SkillVersionPage([SkillVersion.from_message(version) for version in page.versions], page.next_page_token)

    def rollback(self, name: str, version: int) -> Rollback:
        """Makes the name resolve to an earlier version's content again, recorded as a new version."""
        response = self._rpc.call(self._rpc.skills.RollbackSkill, skills_pb2.RollbackSkillRequest(name=name, version=version))
        return Rollback(SkillMetadata.from_message(response.skill), SkillVersion.from_message(response.version), response.changed)

    def instructions(self, name: str, version: int) -> str:
        """The text of one version's SKILL.md (the one file content the API offers)."""
        request = skills_pb2.GetSkillInstructionsRequest(name=name, version=version)
        return self._rpc.call(self._rpc.skills.GetSkillInstructions, request).skill_md

    def delete_version(self, name: str, version: int) -> None:
        """Removes a version that is not the current one; runs that snapshotted it keep their copy."""
        self._rpc.call(self._rpc.skills.DeleteSkillVersion, skills_pb2.DeleteSkillVersionRequest(name=name, version=version))

    def delete(self, name: str) -> None:
        """Removes the skill; runs that snapshotted it keep their copy."""
        self._rpc.call(self._rpc.skills.DeleteSkill, skills_pb2.DeleteSkillRequest(name=name))

    def _upload_once(self, skill: Skill) -> UploadedSkill:
        bundle = skill.bundle()
        assert_within_limits(bundle.file_sizes, self._limits)
        asset = upload_asset(self._rpc, bundle.zip, bundle.content_hash)
        response = self._rpc.call(self._rpc.skills.PutSkill, skills_pb2.PutSkillRequest(name=bundle.name, content_hash=bundle.content_hash))
        return UploadedSkill(
            name=bundle.name,
            content_hash=bundle.content_hash,
            bytes_sent=asset.size_bytes if asset.uploaded else 0,
            changed=response.changed,
            metadata=SkillMetadata.from_message(response.skill),
        )
