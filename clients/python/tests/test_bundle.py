"""The canonical bundle: the shared vectors, byte for byte, and every Skill source yielding the same bytes."""

from __future__ import annotations

import base64
import http.server
import io
import json
import threading
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support import REPO

from skillenv import BundleFormatError, Skill, SkillSourceError, canonical_zip
from skillenv.bundle import parse_skill_md, sha256_hex, slugify_skill_name, validate_bundle_path

VECTORS_DIR = REPO / "testdata" / "bundles"
VECTORS = json.loads((VECTORS_DIR / "vectors.json").read_text())
SKILL_MD = "---\nname: weekly-report\ndescription: Writes weekly status reports.\n---\n# How\n"


def files_of(vector: dict[str, Any]) -> dict[str, bytes]:
    return {path: content.encode() if isinstance(content, str) else base64.b64decode(content["base64"]) for path, content in vector["files"].items()}


def test_the_vectors_cover_the_required_shapes() -> None:
    assert [vector["name"] for vector in VECTORS] == ["minimal", "nested-utf8", "empty-file", "binary"]


@pytest.mark.parametrize("vector", VECTORS, ids=[vector["name"] for vector in VECTORS])
def test_canonical_zip_writes_the_committed_bytes_of_each_vector(vector: dict[str, Any]) -> None:
    archive = canonical_zip(files_of(vector))
    assert archive == (VECTORS_DIR / vector["zip"]).read_bytes()
    assert len(archive) == vector["size"]
    assert sha256_hex(archive) == vector["sha256"]


def test_the_order_files_are_given_in_does_not_matter() -> None:
    files = files_of(next(vector for vector in VECTORS if vector["name"] == "nested-utf8"))
    assert canonical_zip(dict(reversed(files.items()))) == canonical_zip(files)


@pytest.mark.parametrize("path", ["", "/etc/passwd", "a\\b", "C:/x", "a//b", "a/", "./a", "a/../b", "..", "a\x00b", "a\nb", "\ud800"])
def test_unsafe_paths_are_refused(path: str) -> None:
    assert validate_bundle_path(path) is not None
    with pytest.raises(BundleFormatError) as refusal:
        canonical_zip({path: b"x"})
    assert refusal.value.code == "bundle_path_invalid"


def test_a_file_that_is_also_a_directory_is_refused() -> None:
    with pytest.raises(BundleFormatError) as refusal:
        canonical_zip({"docs": b"", "docs/a.md": b""})
    assert refusal.value.code == "bundle_duplicate_entry"


def test_every_source_of_the_same_files_yields_the_same_bundle(tmp_path: Path) -> None:
    files = {"SKILL.md": SKILL_MD, "templates/report.md": "# Week {n}\n"}
    (tmp_path / "templates").mkdir()
    for path, text in files.items():
        (tmp_path / path).write_text(text)
    deflated = io.BytesIO()
    with zipfile.ZipFile(deflated, "w", zipfile.ZIP_DEFLATED) as archive:  # another layout: compressed, timestamped
        for path, text in files.items():
            archive.writestr(path, text)

    bundles = [
        Skill.from_files(files).bundle(),
        Skill.from_dir(tmp_path).bundle(),
        Skill.from_bytes(deflated.getvalue()).bundle(),
    ]
    assert {bundle.zip for bundle in bundles} == {canonical_zip({path: text.encode() for path, text in files.items()})}
    assert {(bundle.name, bundle.description, bundle.content_hash) for bundle in bundles} == {
        ("weekly-report", "Writes weekly status reports.", sha256_hex(bundles[0].zip))
    }


def test_from_content_is_a_bundle_of_skill_md_alone() -> None:
    bundle = Skill.from_content(SKILL_MD, name="renamed").bundle()
    assert bundle.name == "renamed"
    assert bundle.zip == canonical_zip({"SKILL.md": SKILL_MD.encode()})


def test_a_directory_without_a_name_takes_its_slugified_basename(tmp_path: Path) -> None:
    folder = tmp_path / "Résumé Writer"
    folder.mkdir()
    (folder / "SKILL.md").write_text("---\ndescription: Writes résumés.\n---\n")
    assert Skill.from_dir(folder).bundle().name == "resume-writer"
    assert slugify_skill_name("My__Skill!") == "my_skill"


def test_a_linked_directory_takes_the_basename_of_the_link_as_given(tmp_path: Path) -> None:
    target = tmp_path / "store-3f2a"
    target.mkdir()
    (target / "SKILL.md").write_text("---\ndescription: Writes résumés.\n---\n")
    (tmp_path / "Resume Writer").symlink_to(target, target_is_directory=True)
    assert Skill.from_dir(tmp_path / "Resume Writer").bundle().name == "resume-writer"
    assert Skill.from_dir(f"{tmp_path / 'Resume Writer'}/").bundle().name == "resume-writer"


def test_a_symbolic_link_in_a_directory_is_refused_not_followed(tmp_path: Path) -> None:
    (tmp_path / "SKILL.md").write_text(SKILL_MD)
    (tmp_path / "passwd").symlink_to("/etc/passwd")
    with pytest.raises(BundleFormatError) as refusal:
        Skill.from_dir(tmp_path).bundle()
    assert refusal.value.code == "bundle_special_entry"


def test_a_missing_directory_is_unreadable(tmp_path: Path) -> None:
    with pytest.raises(SkillSourceError) as refusal:
        Skill.from_dir(tmp_path / "nowhere").bundle()
    assert refusal.value.code == "file_unreadable"


@pytest.mark.parametrize(
    ("skill_md", "code"),
    [
        ("# no frontmatter\n", "frontmatter_missing"),
        ("---\ndescription: never closed\n", "frontmatter_invalid"),
        ("---\n- a list\n---\n", "frontmatter_invalid"),
        ("---\nname: x\n---\n", "description_missing"),
        (f"---\ndescription: {'x' * 2049}\n---\n", "description_too_long"),
        ("---\ndescription: d\nname: Not Valid\n---\n", "invalid_skill_name"),
    ],
)
def test_skill_md_breaking_a_rule_is_refused_with_the_servers_code(skill_md: str, code: str) -> None:
    with pytest.raises(BundleFormatError) as refusal:
        Skill.from_content(skill_md).bundle()
    assert refusal.value.code == code


def test_frontmatter_is_read_as_yaml_1_2_where_yaml_1_1_differs() -> None:
    # YAML 1.1 would read these as a boolean and a date; the server (YAML 1.2) reads text.
    assert parse_skill_md(b"---\nname: yes\ndescription: 2024-01-01\n---\n").description == "2024-01-01"
    assert parse_skill_md(b"---\nname: yes\ndescription: d\n---\n").name == "yes"


@pytest.fixture
def zip_server() -> Iterator[tuple[str, bytes]]:
    """A real HTTP server on loopback serving one skill archive."""
    archive = canonical_zip({"SKILL.md": SKILL_MD.encode()})

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("content-length", str(len(archive)))
            self.end_headers()
            self.wfile.write(archive)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/skill.zip", archive
    server.shutdown()


def test_from_url_downloads_the_archive_and_checks_its_hash(zip_server: tuple[str, bytes]) -> None:
    url, archive = zip_server
    assert Skill.from_url(url, sha256=sha256_hex(archive)).bundle().zip == archive
    with pytest.raises(SkillSourceError) as refusal:
        Skill.from_url(url, sha256="0" * 64).bundle()
    assert refusal.value.code == "download_failed"
