"""Skills to upload: where one comes from (a folder, files, a SKILL.md, a zip, a URL) and its canonical bundle."""

from __future__ import annotations

import io
import os
import stat
import threading
import urllib.request
import zipfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from skillenv._coded import CodedError
from skillenv.bundle import SKILL_MD_PATH, BundleFormatError, canonical_zip, parse_skill_md, resolve_skill_name, sha256_hex


class SkillSourceError(CodedError):
    """A skill's source could not be read: `code` is "file_unreadable" (a local file or folder) or
    "download_failed" (Skill.from_url: the request failed, or the bytes are not the expected ones)."""


@dataclass(frozen=True)
class SkillBundle:
    """A skill ready to upload: its resolved name, description and canonical bytes."""

    name: str
    description: str
    zip: bytes
    content_hash: str
    file_sizes: Mapping[str, int]
    """Path -> size of every file: what the bundle limits are checked against before an upload."""


@dataclass(frozen=True)
class _Loaded:
    files: dict[str, bytes]
    directory_basename: str | None = None


class Skill:
    """A skill to upload. The factories only record where it comes from: reading, zipping and
    hashing happen on first use (`bundle()`), once, and every source yields the canonical bytes."""

    def __init__(self, load: Callable[[], _Loaded], name: str | None = None) -> None:
        self._load = load
        self._name = name
        self._bundle: SkillBundle | None = None
        self._lock = threading.Lock()

    @classmethod
    def from_dir(cls, root_dir: str | os.PathLike[str], *, name: str | None = None) -> Skill:
        """A folder with SKILL.md at its root; without a name, the frontmatter's or the folder's."""
        return cls(lambda: _read_directory(Path(root_dir)), name)

    @classmethod
    def from_files(cls, files: Mapping[str, bytes | str], *, name: str | None = None) -> Skill:
        """Path -> contents (text is written as UTF-8)."""
        snapshot = {path: data.encode("utf-8") if isinstance(data, str) else bytes(data) for path, data in files.items()}
        return cls(lambda: _Loaded(snapshot), name)

    @classmethod
    def from_content(cls, skill_md: str, *, name: str | None = None) -> Skill:
        """A skill that is only its SKILL.md."""
        return cls.from_files({SKILL_MD_PATH: skill_md}, name=name)

    @classmethod
    def from_bytes(cls, zip: bytes, *, name: str | None = None) -> Skill:
        """A pre-zipped bundle in any zip layout; it is re-emitted in canonical form."""
        return cls(lambda: _Loaded(_unzip(zip)), name)

    @classmethod
    def from_url(cls, url: str, *, name: str | None = None, sha256: str | None = None, timeout: float = 30.0) -> Skill:
        """A zip archive (SKILL.md at its root) behind a URL, e.g. a signed object-store URL.

        With `sha256`, downloaded bytes that hash otherwise are refused.
        """
        return cls(lambda: _Loaded(_unzip(_download(url, sha256, timeout))), name)

    def bundle(self) -> SkillBundle:
        """Reads, validates, zips and hashes the skill, once; a failure is not kept, so a retry reads again."""
        with self._lock:
            if self._bundle is None:
                self._bundle = self._build()
            return self._bundle

    def _build(self) -> SkillBundle:
        loaded = self._load()
        skill_md = loaded.files.get(SKILL_MD_PATH)
        if skill_md is None:
            raise BundleFormatError("bundle_missing_skill_md", "the skill has no SKILL.md at its root")
        parsed = parse_skill_md(skill_md)
        name = resolve_skill_name(self._name, parsed.name, loaded.directory_basename)
        zip = canonical_zip(loaded.files)
        sizes = {path: len(data) for path, data in loaded.files.items()}
        return SkillBundle(name=name, description=parsed.description, zip=zip, content_hash=sha256_hex(zip), file_sizes=sizes)


# --- Folders ---

# Version-control and desktop metadata, not skill content.
_IGNORED = frozenset({".git", ".DS_Store"})


def _read_directory(root: Path) -> _Loaded:
    """Every regular file under `root`, by "/"-separated relative path.

    Symbolic links and other special files are refused rather than followed, so a skill never
    picks up content from outside its folder.
    """
    files: dict[str, bytes] = {}
    try:
        _read_into(files, root.resolve(), ())
        # The folder's name as the caller gave it, not a symbolic link's target: the TypeScript
        # client names a linked folder the same way.
        return _Loaded(files, Path(os.path.abspath(root)).name)
    except OSError as error:
        raise SkillSourceError("file_unreadable", f"cannot read the skill: {error}") from None


def _read_into(files: dict[str, bytes], directory: Path, segments: tuple[str, ...]) -> None:
    with os.scandir(directory) as entries:
        for entry in sorted(entries, key=lambda e: e.name):
            if entry.name in _IGNORED:
                continue
            relative = (*segments, _checked_name(entry.name, segments))
            if entry.is_dir(follow_symlinks=False):
                _read_into(files, Path(entry.path), relative)
            elif entry.is_file(follow_symlinks=False):
                files["/".join(relative)] = Path(entry.path).read_bytes()
            else:
                kind = "a symbolic link (links are not followed)" if entry.is_symlink() else "a device, FIFO or socket"
                raise BundleFormatError("bundle_special_entry", f"{'/'.join(relative)!r} is {kind}; a skill holds regular files only")


def _checked_name(name: str, segments: tuple[str, ...]) -> str:
    """Python reads a name that is not UTF-8 with surrogate escapes: refuse it rather than mangle it."""
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        where = "/".join(segments) or "the skill directory"
        raise BundleFormatError("bundle_path_invalid", f"a name in {where!r} is not UTF-8") from None
    return name


# --- Zip archives of any layout ---

# A ceiling on what one archive may inflate to on the client, so a hostile URL cannot exhaust memory.
_MAX_INFLATED_BYTES = 256 * 1024 * 1024
_UNIX = 3
_UTF8_NAMES = 0x800


def _unzip(data: bytes) -> dict[str, bytes]:
    """The files of an ordinary zip (stored or deflated, from `zip -r` or a browser); directories are skipped."""
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            return _extract(archive)
    except (zipfile.BadZipFile, EOFError) as error:
        raise BundleFormatError("bundle_not_zip", f"not a zip archive: {error}") from None


def _extract(archive: zipfile.ZipFile) -> dict[str, bytes]:
    files: dict[str, bytes] = {}
    budget = _MAX_INFLATED_BYTES
    for info in archive.infolist():
        if info.is_dir():
            continue
        name = _entry_name(info)
        _check_entry(info, name)
        if name in files:
            raise BundleFormatError("bundle_duplicate_entry", f"{name!r} appears twice")
        with archive.open(info) as entry:
            files[name] = entry.read(budget + 1)
        budget -= len(files[name])
        if budget < 0:
            raise BundleFormatError("bundle_too_large", "the archive inflates to more than 256 MiB")
    return files


def _entry_name(info: zipfile.ZipInfo) -> str:
    """Names are read as UTF-8 whatever the flag says; zipfile decodes unflagged ones as cp437."""
    if info.flag_bits & _UTF8_NAMES:
        return info.filename
    try:
        return info.filename.encode("cp437").decode("utf-8")
    except UnicodeDecodeError:
        raise BundleFormatError("bundle_path_invalid", "an entry name is not valid UTF-8") from None


def _check_entry(info: zipfile.ZipInfo, name: str) -> None:
    if info.flag_bits & 0x1:
        raise BundleFormatError("bundle_encrypted", f"{name!r} is encrypted")
    # Unix-made entries carry a file type: anything but a regular file (symbolic links above all) is refused.
    file_type = stat.S_IFMT(info.external_attr >> 16)
    if info.create_system == _UNIX and file_type not in (0, stat.S_IFREG):
        raise BundleFormatError("bundle_special_entry", f"{name!r} is a symbolic link or special file")


def _download(url: str, sha256: str | None, timeout: float) -> bytes:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            data: bytes = response.read()
    except OSError as error:
        raise SkillSourceError("download_failed", f"downloading the skill failed: {error}") from None
    if sha256 is not None and sha256_hex(data) != sha256.lower():
        raise SkillSourceError("download_failed", f"the downloaded skill hashes to {sha256_hex(data)}, expected {sha256}")
    return data
