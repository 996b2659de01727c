"""Skills against the real service: upload (presign -> PUT -> finalize -> PutSkill), dedup, list, get, delete, versions."""

from __future__ import annotations

import pytest
from support import Service

from skillenv import BundleFormatError, BundleLimits, Client, ServiceError, Skill


def skill_md(name: str, description: str) -> str:
    return f"---\nname: {name}\ndescription: {description}\n---\n# {name}\n"


def test_upload_sends_the_bundle_and_binds_the_name(client: Client) -> None:
    skill = Skill.from_files({"SKILL.md": skill_md("upload-once", "Uploads once."), "notes.txt": "n"})
    uploaded = client.skills.upload(skill)
    bundle = skill.bundle()
    assert (uploaded.name, uploaded.content_hash, uploaded.bytes_sent, uploaded.changed) == ("upload-once", bundle.content_hash, len(bundle.zip), True)
    assert (uploaded.metadata.description, uploaded.metadata.file_count, uploaded.metadata.bundle_bytes) == ("Uploads once.", 2, len(bundle.zip))


def test_identical_bytes_are_not_uploaded_again(client: Client, service: Service) -> None:
    first = client.skills.upload(Skill.from_content(skill_md("dedup", "Same bytes.")))
    # Another object and another client: nothing is cached, the workspace has the bytes.
    with service.client() as other:
        again = other.skills.upload(Skill.from_content(skill_md("dedup", "Same bytes.")))
    assert (again.content_hash, again.bytes_sent, again.changed) == (first.content_hash, 0, False)
    assert again.metadata.updated_at == first.metadata.updated_at


def test_one_skill_object_is_uploaded_once_per_client(client: Client) -> None:
    skill = Skill.from_content(skill_md("cached", "Uploaded once per object."))
    assert client.skills.upload(skill) is client.skills.upload(skill)


def test_new_bytes_under_a_name_change_the_skill(client: Client) -> None:
    before = client.skills.upload(Skill.from_content(skill_md("mutable", "First version.")))
    after = client.skills.upload(Skill.from_content(skill_md("mutable", "Second version.")))
    assert after.changed and after.content_hash != before.content_hash
    assert client.skills.get("mutable").description == "Second version."


def test_list_get_and_delete(client: Client) -> None:
    names = ["listed-a", "listed-b", "listed-c"]
    client.skills.upload_all([Skill.from_content(skill_md(name, f"Skill {name}.")) for name in names])
    listed = [skill.name for skill in client.skills.list(page_size=1000).skills]
    assert [name for name in listed if name.startswith("listed-")] == names

    first_page = client.skills.list(page_size=1)
    assert len(first_page.skills) == 1 and first_page.next_page_token != ""

    fetched = client.skills.get("listed-b")
    assert (fetched.name, fetched.description, fetched.file_count) == ("listed-b", "Skill listed-b.", 1)
    assert [file.path for file in fetched.files] == ["SKILL.md"]
    assert fetched.files[0].size_bytes == len(skill_md("listed-b", "Skill listed-b.").encode())

    client.skills.delete("listed-b")
    with pytest.raises(ServiceError) as refusal:
        client.skills.get("listed-b")
    assert refusal.value.code == "skill_not_found"


def test_the_service_refuses_what_the_client_does_not_check_with_its_code(client: Client) -> None:
    # The client reads SKILL.md only as far as it needs to; duplicate keys are the server's to refuse.
    duplicate_keys = Skill.from_content("---\ndescription: one\ndescription: two\n---\n", name="duplicate-keys")
    with pytest.raises(ServiceError) as refusal:
        client.skills.upload(duplicate_keys)
    assert refusal.value.code == "frontmatter_invalid"


def test_limits_refuse_a_bundle_before_anything_is_sent(service: Service) -> None:
    with service.client(bundle_limits=BundleLimits(max_entry_bytes=4)) as small:
        with pytest.raises(BundleFormatError) as refusal:
            small.skills.upload(Skill.from_content(skill_md("too-big", "More than four bytes.")))
    assert refusal.value.code == "bundle_entry_too_large"


def test_a_bad_api_key_is_unauthenticated(service: Service) -> None:
    with Client(service.url, "not-a-key") as stranger:
        with pytest.raises(ServiceError) as refusal:
            stranger.skills.list()
    assert refusal.value.code == "unauthenticated"



def test_versions_get_one_rollback_and_delete_one(client: Client) -> None:
    first = client.skills.upload(Skill.from_files({"SKILL.md": skill_md("py-versioned", "First."), "a.txt": "A"}))
    client.skills.upload(Skill.from_content(skill_md("py-versioned", "Second.")))
    assert client.skills.get("py-versioned").version == 2

    page = client.skills.versions("py-versioned")
    assert [(v.version, v.current) for v in page.versions] == [(2, True), (1, False)]
    assert page.next_page_token == ""
    one = client.skills.get("py-versioned", version=1)
    assert (one.version, one.content_hash, one.description) == (1, first.content_hash, "First.")
    assert [file.path for file in one.files] == ["SKILL.md", "a.txt"]

    assert client.skills.instructions("py-versioned", 1) == skill_md("py-versioned", "First.")

    rolled = client.skills.rollback("py-versioned", 1)
    assert rolled.changed and (rolled.skill.version, rolled.version.restored_from, rolled.skill.content_hash) == (3, 1, first.content_hash)
    assert not client.skills.rollback("py-versioned", 1).changed

    client.skills.delete_version("py-versioned", 2)
    assert [v.version for v in client.skills.versions("py-versioned").versions] == [3, 1]
    with pytest.raises(ServiceError) as current:
        client.skills.delete_version("py-versioned", 3)
    assert current.value.code == "skill_version_current"
    with pytest.raises(ServiceError) as missing:
        client.skills.get("py-versioned", version=2)
    assert missing.value.code == "skill_version_not_found"

