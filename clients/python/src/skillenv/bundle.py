"""The skill bundle format (docs/bundle-format.md): canonical zip, paths, names, SKILL.md, limits.

Two clients in any language that zip the same files must produce the same bytes and so the same
content hash; the server refuses any other byte form. Python's zipfile cannot write that form (it
sets the UTF-8 flag only for non-ASCII names, stamps the clock and the file mode), so the headers
are written here directly with struct, and zlib supplies the CRC-32.
"""

from __future__ import annotations

import hashlib
import re
import struct
import unicodedata
import zlib
from collections.abc import Mapping
from dataclasses import dataclass

import yaml

from skillenv._coded import CodedError

SKILL_MD_PATH = "SKILL.md"
MAX_DESCRIPTION_LENGTH = 2048
MAX_SKILL_NAME_LENGTH = 128
MAX_FRONTMATTER_BYTES = 64 * 1024

MiB = 1024 * 1024


class BundleFormatError(CodedError, ValueError):
    """A bundle, SKILL.md or skill name breaks the format. `code` is the server's code for the rule."""


@dataclass(frozen=True)
class BundleLimits:
    """Bounds on one bundle; the server's are its SERVICE_SKILL_* settings."""

    max_entries: int = 1000
    max_entry_bytes: int = 10 * MiB
    max_total_bytes: int = 50 * MiB


DEFAULT_BUNDLE_LIMITS = BundleLimits()


def assert_within_limits(file_sizes: Mapping[str, int], limits: BundleLimits = DEFAULT_BUNDLE_LIMITS) -> None:
    """Refuses files (path -> size) that break `limits` with the server's code, before anything is sent."""
    if len(file_sizes) > limits.max_entries:
        raise BundleFormatError("bundle_too_many_entries", f"the bundle has {len(file_sizes)} files; the limit is {limits.max_entries}")
    for path, size in file_sizes.items():
        if size > limits.max_entry_bytes:
            raise BundleFormatError("bundle_entry_too_large", f"{path!r} has {size} bytes; the limit is {limits.max_entry_bytes}")
    total = sum(file_sizes.values())
    if total > limits.max_total_bytes:
        raise BundleFormatError("bundle_too_large", f"the files have {total} bytes together; the limit is {limits.max_total_bytes}")


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


# --- Paths (section 1.1) ---

_CONTROL_CHARACTER = re.compile("[\x00-\x1f\x7f]")
_DRIVE_LETTER = re.compile("^[A-Za-z]:")
_MAX_PATH_BYTES = 0xFFFF  # the zip name-length field is 16 bits wide


def validate_bundle_path(path: str) -> str | None:
    """Why `path` is refused in a bundle, or None when it is acceptable.

    The rules make extraction safe on any OS: no zip slip, no drive letters, no Windows separators.
    """
    if path == "":
        return "path is empty"
    try:
        encoded = path.encode("utf-8")
    except UnicodeEncodeError:
        return "path is not valid Unicode (lone surrogate)"
    if "\\" in path:
        return "path contains a backslash"
    if _CONTROL_CHARACTER.search(path):
        return "path contains a NUL or control character"
    if path.startswith("/"):
        return "path is absolute"
    if _DRIVE_LETTER.match(path):
        return "path starts with a drive letter"
    for segment in path.split("/"):
        if segment == "":
            return "path has an empty segment (leading, trailing or doubled /)"
        if segment in (".", ".."):
            return f'path has a "{segment}" segment'
    if len(encoded) > _MAX_PATH_BYTES:
        return f"path is longer than {_MAX_PATH_BYTES} UTF-8 bytes"
    return None


def _assert_paths(paths: list[str]) -> None:
    for path in paths:
        reason = validate_bundle_path(path)
        if reason is not None:
            raise BundleFormatError("bundle_path_invalid", f"{path!r}: {reason}")
    # A file that is also another's directory ("a" and "a/b") cannot be extracted onto a file system.
    seen = set(paths)
    for path in paths:
        parts = path.split("/")
        for depth in range(1, len(parts)):
            parent = "/".join(parts[:depth])
            if parent in seen:
                raise BundleFormatError("bundle_duplicate_entry", f"{parent!r} is both a file and the directory of {path!r}")


# --- The canonical archive (section 2) ---

_VERSION_MADE_BY = 0x0314  # Unix (3), spec version 2.0 (20)
_VERSION_NEEDED = 20  # 2.0: plain files, no zip64
_FLAGS = 0x0800  # bit 11, always: file names are UTF-8
_STORED = 0  # DEFLATE output differs between implementations; STORED is the same everywhere
_DOS_TIME = 0x0000  # 00:00:00
_DOS_DATE = 0x0021  # 1980-01-01, the earliest DOS date
_EXTERNAL_ATTRIBUTES = 0o100644 << 16  # regular file, rw-r--r--

_LOCAL_HEADER = struct.Struct("<IHHHHHIIIHH")
_CENTRAL_HEADER = struct.Struct("<IHHHHHHIIIHHHHHII")
_END_OF_CENTRAL_DIRECTORY = struct.Struct("<IHHHHIIH")

# 0xFFFF and 0xFFFFFFFF are zip64 markers, so a zip64-free archive stays strictly below them.
_MAX_ENTRIES = 0xFFFE
_MAX_ARCHIVE_BYTES = 0xFFFFFFFE


def canonical_zip(files: Mapping[str, bytes]) -> bytes:
    """The canonical archive of `files` (path -> contents), byte for byte as every conforming writer makes it.

    Paths are validated and sorted by their UTF-8 bytes (code point order, not UTF-16 order).
    SKILL.md is not required here: the format is independent of the skill rules.
    """
    if len(files) > _MAX_ENTRIES:
        raise BundleFormatError("bundle_too_many_entries", f"{len(files)} files; a bundle holds at most {_MAX_ENTRIES}")
    _assert_paths(list(files))
    entries = sorted((path.encode("utf-8"), data) for path, data in files.items())
    _check_archive_size(entries)
    local_parts: list[bytes] = []
    central_parts: list[bytes] = []
    offset = 0
    for name, data in entries:
        crc = zlib.crc32(data)
        local_parts += [_local_header(name, len(data), crc), data]
        central_parts.append(_central_header(name, len(data), crc, offset))
        offset += _LOCAL_HEADER.size + len(name) + len(data)
    central_directory = b"".join(central_parts)
    end = _END_OF_CENTRAL_DIRECTORY.pack(0x06054B50, 0, 0, len(entries), len(entries), len(central_directory), offset, 0)
    return b"".join(local_parts) + central_directory + end


def _local_header(name: bytes, size: int, crc: int) -> bytes:
    # Compressed and uncompressed sizes are equal: entries are STORED.
    fields = (0x04034B50, _VERSION_NEEDED, _FLAGS, _STORED, _DOS_TIME, _DOS_DATE, crc, size, size, len(name), 0)
    return _LOCAL_HEADER.pack(*fields) + name


def _central_header(name: bytes, size: int, crc: int, local_header_offset: int) -> bytes:
    fields = (
        0x02014B50, _VERSION_MADE_BY, _VERSION_NEEDED, _FLAGS, _STORED, _DOS_TIME, _DOS_DATE, crc, size, size, len(name),
        0, 0, 0, 0,  # extra field, comment, disk number, internal attributes
        _EXTERNAL_ATTRIBUTES, local_header_offset,
    )  # fmt: skip
    return _CENTRAL_HEADER.pack(*fields) + name


def _check_archive_size(entries: list[tuple[bytes, bytes]]) -> None:
    size = _END_OF_CENTRAL_DIRECTORY.size
    size += sum(_LOCAL_HEADER.size + _CENTRAL_HEADER.size + 2 * len(name) + len(data) for name, data in entries)
    if size > _MAX_ARCHIVE_BYTES:
        raise BundleFormatError("bundle_too_large", f"the archive would be {size} bytes; zip64 is not used, so the limit is {_MAX_ARCHIVE_BYTES}")


# --- Skill names (section 4) ---

_NAME_PATTERN = re.compile(r"^[a-z0-9][a-z0-9_-]{0,127}\Z")
_RESERVED_NAMES = frozenset({"skills", "skill"})


def validate_skill_name(name: str) -> str | None:
    """Why `name` is not a valid skill name, or None when it is."""
    if not _NAME_PATTERN.match(name):
        return f"{name!r} must match ^[a-z0-9][a-z0-9_-]{{0,127}}$ (lowercase letters, digits, _ and -, at most {MAX_SKILL_NAME_LENGTH})"
    # MCP tool names join the skill name and the tool with "__", so it must stay unambiguous.
    if "__" in name:
        return f'{name!r} must not contain "__"'
    if name in _RESERVED_NAMES:
        return f"{name!r} is reserved"
    return None


def slugify_skill_name(basename: str) -> str:
    """A best-effort skill name from a directory basename: `My Skill` -> `my-skill`, `Résumé` -> `resume`.

    The result may still be empty or reserved, so callers validate it like any other name.
    """
    decomposed = unicodedata.normalize("NFKD", basename.lower())
    without_marks = "".join(c for c in decomposed if not unicodedata.category(c).startswith("M"))
    slug = re.sub(r"_{2,}", "_", re.sub(r"[^a-z0-9_-]+", "-", without_marks))
    return slug.strip("-_")[:MAX_SKILL_NAME_LENGTH].strip("-_")


def resolve_skill_name(name: str | None, frontmatter_name: str | None, directory_basename: str | None = None) -> str:
    """The explicit name, else the frontmatter's, else the slugified directory basename; validated.

    A lower-priority source never rescues an invalid higher-priority one.
    """
    if name is None:
        name = frontmatter_name
    if name is None and directory_basename is not None:
        name = slugify_skill_name(directory_basename)
    if name is None:
        raise BundleFormatError("invalid_skill_name", "no skill name: pass a name or set name: in the SKILL.md frontmatter")
    reason = validate_skill_name(name)
    if reason is not None:
        raise BundleFormatError("invalid_skill_name", reason)
    return name


# --- SKILL.md (section 3) ---


@dataclass(frozen=True)
class SkillMd:
    """What the client reads of SKILL.md: the frontmatter's name (unvalidated) and description."""

    name: str | None
    description: str
    body: str


_OPENING_LINE = re.compile(r"\A\ufeff?---[ \t]*\r?\n")
_DELIMITER_LINE = re.compile(r"\A---[ \t]*\r?\Z")


def parse_skill_md(data: bytes) -> SkillMd:
    """Reads SKILL.md's frontmatter as far as a client needs: its name and its description.

    The server checks the rest (the frontmatter's key, depth and alias bounds, duplicate keys) and
    refuses with its own code.
    """
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise BundleFormatError("frontmatter_invalid", f"{SKILL_MD_PATH} is not valid UTF-8") from None
    yaml_text, body = _split_frontmatter(text)
    if len(yaml_text.encode("utf-8")) > MAX_FRONTMATTER_BYTES:
        raise BundleFormatError("frontmatter_too_large", f"the {SKILL_MD_PATH} frontmatter is larger than {MAX_FRONTMATTER_BYTES} bytes")
    frontmatter = _parse_yaml(yaml_text)
    return SkillMd(name=_optional_string(frontmatter, "name"), description=_description(frontmatter), body=body)


def _split_frontmatter(text: str) -> tuple[str, str]:
    opening = _OPENING_LINE.match(text)
    if opening is None:
        raise BundleFormatError("frontmatter_missing", f'{SKILL_MD_PATH} must start with a "---" line opening a YAML frontmatter block')
    start = yaml_start = opening.end()
    # Gives up once the block is longer than a frontmatter may be, so an unclosed one is not scanned whole.
    while start - yaml_start <= MAX_FRONTMATTER_BYTES:
        newline = text.find("\n", start)
        end = len(text) if newline == -1 else newline
        if _DELIMITER_LINE.match(text[start:end]):
            return text[yaml_start:start], "" if newline == -1 else text[newline + 1 :]
        if newline == -1:
            raise BundleFormatError("frontmatter_invalid", f'the {SKILL_MD_PATH} frontmatter is never closed by a "---" line')
        start = newline + 1
    raise BundleFormatError("frontmatter_too_large", f"the {SKILL_MD_PATH} frontmatter is not closed within {MAX_FRONTMATTER_BYTES} bytes")


class _CoreSchemaLoader(yaml.SafeLoader):
    """YAML 1.2's core schema, which the server reads frontmatter with.

    PyYAML follows YAML 1.1, which would also read `yes`, `off`, `1:30` and `2024-01-01` as
    booleans, numbers and dates: a description the server takes as text would be refused here.
    """


# (tag, pattern, first characters of the values it can match; "" is the empty value)
_CORE_SCHEMA = [
    ("null", r"~|null|Null|NULL|", ["~", "n", "N", ""]),
    ("bool", r"true|True|TRUE|false|False|FALSE", list("tTfF")),
    ("int", r"[-+]?[0-9]+|0o[0-7]+|0x[0-9a-fA-F]+", list("-+0123456789")),
    ("float", r"[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN)", list("-+0123456789.")),
]
_CoreSchemaLoader.yaml_implicit_resolvers = {}
for _tag, _pattern, _first in _CORE_SCHEMA:
    _CoreSchemaLoader.add_implicit_resolver(f"tag:yaml.org,2002:{_tag}", re.compile(f"^(?:{_pattern})$"), _first)


def _construct_int(loader: _CoreSchemaLoader, node: yaml.ScalarNode) -> int:
    # In YAML 1.2 a leading zero is decimal ("017" is 17); octal is written 0o17.
    text = loader.construct_scalar(node)
    return int(text, 0) if text.startswith(("0o", "0x")) else int(text, 10)


_CoreSchemaLoader.add_constructor("tag:yaml.org,2002:int", _construct_int)


def _parse_yaml(yaml_text: str) -> dict[str, object]:
    try:
        value = yaml.load(yaml_text, Loader=_CoreSchemaLoader)  # a safe loader: plain data only
    except yaml.YAMLError as error:
        raise BundleFormatError("frontmatter_invalid", f"the {SKILL_MD_PATH} frontmatter is not valid YAML: {error}") from None
    # An empty block is an empty mapping, so it is reported as the missing description it lacks.
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise BundleFormatError("frontmatter_invalid", f"the {SKILL_MD_PATH} frontmatter must be a YAML mapping")
    return value


def _optional_string(frontmatter: dict[str, object], key: str) -> str | None:
    """A key whose value is null counts as absent, the way YAML writes `name:` with nothing after it."""
    value = frontmatter.get(key)
    if value is None:
        return None
    if not isinstance(value, str):
        raise BundleFormatError("frontmatter_invalid", f'frontmatter "{key}" must be a string')
    return value


def _description(frontmatter: dict[str, object]) -> str:
    description = (_optional_string(frontmatter, "description") or "").strip()
    if description == "":
        raise BundleFormatError("description_missing", f"the {SKILL_MD_PATH} frontmatter needs a non-empty description")
    if len(description) > MAX_DESCRIPTION_LENGTH:
        raise BundleFormatError("description_too_long", f"the description has {len(description)} characters; at most {MAX_DESCRIPTION_LENGTH} are allowed")
    return description
