"""Extension environments: definitions (`extension_env`, kinds from `environment(...)`), placements in
them, and sessions binding real extensions: a recording one written in Python from the protocol
(tests/extension_server.py) and the repository's shell extension (examples/shell-extension)."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from typing import Any

import pytest
from extension_server import RecordingExtension
from support import ShellExtension, Service

from skillenv import (
    Client,
    Component,
    ExtensionDefinitionError,
    ExtensionEnvironment,
    ExtensionKind,
    Opaque,
    PlacementError,
    Returned,
    ServiceError,
    environment,
    extension_env,
    host_env,
    service_env,
    tool,
)

TOKEN = "recording-extension-credential-7f3a"
SHELL_TOKEN = "shell-extension-credential-91c2"


@pytest.fixture(scope="module")
def extension() -> Iterator[RecordingExtension]:
    with RecordingExtension(TOKEN) as started:
        yield started


@pytest.fixture(scope="module")
def shell() -> Iterator[ShellExtension]:
    with tempfile.TemporaryDirectory(prefix="skillenv-python-shell-") as root:
        started = ShellExtension.start(root, SHELL_TOKEN)
        yield started
        started.process.stop()


@pytest.fixture(scope="module")
def ext_service(extension: RecordingExtension, shell: ShellExtension) -> Iterator[Service]:
    """A service whose network allow-list takes both extensions (and nothing else)."""
    with tempfile.TemporaryDirectory(prefix="skillenv-python-ext-") as data_dir:
        running = Service.start(data_dir, {"SERVICE_ENV_NETWORK_ALLOW": f"{extension.url},{shell.url}"})
        yield running
        running.process.stop()


@pytest.fixture
def ext_client(ext_service: Service) -> Iterator[Client]:
    with ext_service.client() as opened:
        yield opened


def remote(extension: RecordingExtension, **overrides: Any) -> ExtensionEnvironment:
    options: dict[str, Any] = {"url": extension.url, "credential": TOKEN, "configuration": {"region": "test", "sizes": [1, 2]}}
    return extension_env("remote", **{**options, **overrides})


# --- Definitions: no I/O ---


def test_a_definition_never_shows_its_credential() -> None:
    definition = extension_env("remote", url="https://ext.example.com", credential="s3cret-credential", configuration={"region": "eu"})
    assert definition.kind == "extension" and definition.setup == "automatic"
    assert definition.has_credential and definition.credential is not None and definition.credential.reveal() == "s3cret-credential"
    assert "s3cret" not in repr(definition) and "credential=Credential(***)" in repr(definition)
    assert not extension_env("open", url="http://127.0.0.1:1").has_credential
    # Equal definitions differ by their credential too.
    same = extension_env("remote", url="https://ext.example.com", credential="s3cret-credential", configuration={"region": "eu"})
    other = extension_env("remote", url="https://ext.example.com", credential="another-credential", configuration={"region": "eu"})
    assert definition == same and definition != other


def test_the_configuration_is_snapshotted_as_json() -> None:
    configuration: dict[str, Any] = {"region": "eu", "sizes": (1, 2.0)}
    definition = extension_env("remote", url="http://127.0.0.1:1", configuration=configuration)
    configuration["region"] = "changed"
    assert definition.configuration == {"region": "eu", "sizes": [1, 2]}


@pytest.mark.parametrize(
    ("options", "code"),
    [
        ({"url": "ftp://ext.example.com"}, "invalid_url"),
        ({"url": "/relative"}, "invalid_url"),
        ({"url": "http://127.0.0.1:1", "credential": ""}, "invalid_credential"),
        ({"url": "http://127.0.0.1:1", "configuration": {"when": object()}}, "invalid_configuration"),
        ({"url": "http://127.0.0.1:1", "configuration": {1: "not a string key"}}, "invalid_configuration"),
    ],
)
def test_a_definition_is_refused_with_a_code(options: dict[str, Any], code: str) -> None:
    with pytest.raises(ExtensionDefinitionError) as refusal:
        extension_env("remote", **options)
    assert refusal.value.code == code and "remote" in str(refusal.value)


def test_a_kind_computes_url_credential_and_configuration_from_checked_options() -> None:
    shell = environment(
        options={"region": "string", "size": "number?", "tags": "string[]?", "debug": "boolean?", "extra": "json?"},
        url=lambda options: f"https://{options['region']}.shell.example.com",
        credential=lambda options: f"token-for-{options['region']}",
        configure=lambda options: {"size": options.get("size", 1), "tags": options.get("tags", [])},
    )
    sh = shell("sh", region="eu", size=4, tags=["a", "b"], setup="manual")
    assert (sh.name, sh.url, sh.setup, sh.configuration) == ("sh", "https://eu.shell.example.com", "manual", {"size": 4, "tags": ["a", "b"]})
    assert sh.credential is not None and sh.credential.reveal() == "token-for-eu"
    assert shell("minimal", region="us", size=None).configuration == {"size": 1, "tags": []}  # None is omitted
    assert environment(url=lambda _: "http://127.0.0.1:1")("bare").configuration is None


@pytest.mark.parametrize(
    ("given", "code", "option"),
    [
        ({}, "missing_option", "region"),
        ({"region": "eu", "zone": "a"}, "unknown_option", "zone"),
        ({"region": 7}, "invalid_option", "region"),
        ({"region": "eu", "size": True}, "invalid_option", "size"),
        ({"region": "eu", "size": float("nan")}, "invalid_option", "size"),
        ({"region": "eu", "tags": ["a", 1]}, "invalid_option", "tags"),
        ({"region": "eu", "extra": {"f": print}}, "invalid_option", "extra"),
    ],
)
def test_instance_options_are_checked_against_the_schema(given: dict[str, Any], code: str, option: str) -> None:
    shell = environment(options={"region": "string", "size": "number?", "tags": "string[]?", "extra": "json?"}, url=lambda _: "http://127.0.0.1:1")
    with pytest.raises(ExtensionDefinitionError) as refusal:
        shell("sh", **given)
    assert (refusal.value.code, refusal.value.option) == (code, option)


def test_a_kind_is_checked_when_defined_and_its_answers_when_used() -> None:
    with pytest.raises(ExtensionDefinitionError) as reserved:
        environment(options={"name": "string"}, url=lambda _: "http://127.0.0.1:1")
    assert (reserved.value.code, reserved.value.option) == ("reserved_option", "name")
    with pytest.raises(ExtensionDefinitionError) as spec:
        environment(options={"size": "integer"}, url=lambda _: "http://127.0.0.1:1")
    assert (spec.value.code, spec.value.option) == ("invalid_option_spec", "size")
    with pytest.raises(ExtensionDefinitionError) as credential:
        environment(url=lambda _: "http://127.0.0.1:1", credential=lambda _: "")("sh")
    assert credential.value.code == "invalid_credential"
    with pytest.raises(ExtensionDefinitionError) as url:
        environment(url=lambda _: "not a url")("sh")
    assert url.value.code == "invalid_url"


def test_extension_tools_take_an_opaque_implementation_or_none() -> None:
    ext = extension_env("remote", url="http://127.0.0.1:1")
    assert tool("sh", environment=ext, implementation=Opaque({"tool": "shell"})).implementation == Opaque({"tool": "shell"})
    assert tool("sh", environment=ext).implementation is None
    with pytest.raises(PlacementError, match="extension environment remote"):
        tool("sh", environment=ext, implementation=Component(b"\0asm"))
    with pytest.raises(PlacementError, match="extension environment remote"):
        tool("sh", environment=ext, implementation="0" * 64)
    with pytest.raises(PlacementError, match="JSON"):
        tool("sh", environment=ext, implementation=Opaque({"handler": print}))


def test_a_placement_by_name_is_checked_against_the_sessions_definition(ext_client: Client) -> None:
    ext = extension_env("remote", url="http://127.0.0.1:1")
    with pytest.raises(PlacementError, match="extension environment remote"):
        ext_client.sessions.create(environments=[ext], tools=[tool("sh", environment="remote", implementation=Component(b"\0asm"))])
    # Another definition under the same name (here: another credential) is refused too.
    other = extension_env("remote", url="http://127.0.0.1:1", credential="other")
    with pytest.raises(PlacementError, match="differs"):
        ext_client.sessions.create(environments=[ext], tools=[tool("sh", environment=other)])
    with pytest.raises(PlacementError, match="extension environment remote"):
        ext_client.prepare(tool("sh", environment=ext))


# --- Sessions binding the recording extension ---


def test_a_session_sets_the_extension_up_with_its_configuration_and_credential(ext_client: Client, extension: RecordingExtension) -> None:
    ext = remote(extension)
    tools = [tool("ext_echo", environment=ext, implementation=Opaque({"kind": "echo"}), configuration={"verbose": True}), tool("by_name", environment=ext)]
    session = ext_client.sessions.create(environments=[ext], tools=tools)
    assert session.state == "ready"
    assert [(environment.name, environment.kind, environment.state) for environment in session.environments] == [("remote", "extension", "ready")]

    binding = f"{session.id}/remote"
    [setup] = extension.calls_for(binding, "Setup")
    assert setup.authorization == f"Bearer {TOKEN}"
    assert setup.request["configuration"] == {"region": "test", "sizes": [1, 2]}

    receipt = session.call_tool("ext_echo", {"hello": "extension"})
    assert isinstance(receipt, Returned)
    assert receipt.output == {"tool": "ext_echo", "implementation": {"kind": "echo"}, "configuration": {"verbose": True}, "input": {"hello": "extension"}}
    [execute] = extension.calls_for(binding, "Execute")
    assert execute.authorization == f"Bearer {TOKEN}" and execute.request["operationId"] == receipt.operation_id
    # Without an implementation the extension picks the tool by its name.
    by_name = session.call_tool("by_name", {})
    assert isinstance(by_name, Returned) and by_name.output["tool"] == "by_name" and by_name.output["implementation"] is None

    session.end()
    events = list(session.events())  # replayed up to session.ended
    assert [event.type for event in events if event.data.get("operationId") == receipt.operation_id] == [
        "operation.sent", "operation.accepted", "operation.progress", "operation.receipt",
    ]  # fmt: skip
    assert TOKEN not in repr([event.data for event in events])


def test_a_manual_extension_is_set_up_on_request(ext_client: Client, extension: RecordingExtension) -> None:
    session = ext_client.sessions.create(environments=[remote(extension, setup="manual")], tools=[tool("later", environment="remote")])
    binding = f"{session.id}/remote"
    assert session.environments[0].state == "pending" and extension.calls_for(binding) == []
    with pytest.raises(ServiceError) as not_ready:
        session.call_tool("later", {})
    assert not_ready.value.code == "environment_not_ready"

    result = session.setup_environment("remote")
    assert result.environment.state == "ready" and isinstance(result.receipt, Returned)
    assert [call.method for call in extension.calls_for(binding)] == ["Setup"]
    assert isinstance(session.call_tool("later", {}), Returned)


def test_a_wrong_credential_fails_the_setup(ext_client: Client, extension: RecordingExtension) -> None:
    session = ext_client.sessions.create(environments=[remote(extension, credential="not-the-token")])
    assert session.environments[0].state == "failed"
    [setup] = extension.calls_for(f"{session.id}/remote", "Setup")
    assert setup.authorization == "Bearer not-the-token"
    # Without any credential the extension is called without an Authorization header.
    bare = ext_client.sessions.create(environments=[remote(extension, credential=None)])
    assert bare.environments[0].state == "failed"
    assert [call.authorization for call in extension.calls_for(f"{bare.id}/remote")] == [None]


def test_a_url_outside_the_network_allow_list_is_refused_and_nothing_is_created(ext_client: Client) -> None:
    before = {session.id for session in ext_client.sessions.all()}
    with pytest.raises(ServiceError) as refusal:
        ext_client.sessions.create(environments=[extension_env("elsewhere", url="http://127.0.0.1:9")])
    assert refusal.value.code == "grant_not_allowed"
    assert {session.id for session in ext_client.sessions.all()} == before


def test_ending_detaches_and_deleting_tears_down(ext_client: Client, extension: RecordingExtension) -> None:
    ended = ext_client.sessions.create(environments=[remote(extension)])
    ended.end()
    assert [call.method for call in extension.calls_for(f"{ended.id}/remote")] == ["Setup", "Detach"]
    deleted = ext_client.sessions.create(environments=[remote(extension)])
    deleted.delete()
    assert [call.method for call in extension.calls_for(f"{deleted.id}/remote")] == ["Setup", "Teardown"]


def test_extension_service_and_host_environments_in_one_session(ext_client: Client, extension: RecordingExtension, echo_wasm: bytes) -> None:
    sandbox = service_env("sandbox")
    laptop = host_env("laptop", {"where": lambda _input, _context: "laptop"})
    ext = remote(extension)
    tools = [
        tool("echo", environment=sandbox, implementation=Component(echo_wasm)),
        tool("where", environment=laptop),
        tool("ext_echo", environment=ext, implementation=Opaque("echo")),
    ]
    session = ext_client.sessions.create(environments=[sandbox, laptop, ext], tools=tools)
    assert [(environment.kind, environment.state) for environment in session.environments] == [("service", "ready"), ("host", "ready"), ("extension", "ready")]
    outputs = [session.call_tool(name, {"n": 1}) for name in ("echo", "where", "ext_echo")]
    # A placement without a configuration gets the service's default, {}.
    assert [receipt.output if isinstance(receipt, Returned) else receipt for receipt in outputs] == [
        {"n": 1}, "laptop", {"tool": "ext_echo", "implementation": "echo", "configuration": {}, "input": {"n": 1}},
    ]  # fmt: skip
    session.end()


# --- The repository's shell extension ---


def shell_kind(shell: ShellExtension) -> ExtensionKind:
    """The shell extension as a kind: its URL is the operator's; a session names only its token."""
    return environment(options={"token": "string"}, url=lambda _: shell.url, credential=lambda options: options["token"])


def test_the_shell_extension_runs_commands_and_files_in_its_workspace(ext_client: Client, shell: ShellExtension) -> None:
    sh = shell_kind(shell)("sh", token=SHELL_TOKEN)
    tools = [
        tool("shell", environment=sh, description="Runs a command."),  # picked by its name
        tool("save", environment=sh, implementation=Opaque({"tool": "write_file"})),
        tool("load", environment=sh, implementation=Opaque({"tool": "read_file"})),
    ]
    session = ext_client.sessions.create(environments=[sh], tools=tools)
    assert session.state == "ready"
    saved = session.call_tool("save", {"path": "notes/hello.txt", "content": "from python\n"})
    assert isinstance(saved, Returned) and saved.output == {"bytes": 12}
    ran = session.call_tool("shell", {"command": "cat notes/hello.txt && echo done"})
    assert isinstance(ran, Returned) and ran.output["exitCode"] == 0 and ran.output["stdout"] == "from python\ndone\n"
    loaded = session.call_tool("load", {"path": "notes/hello.txt"})
    assert isinstance(loaded, Returned) and loaded.output["content"] == "from python\n"
    session.delete()


def test_the_shell_extension_refuses_a_session_without_its_token(ext_client: Client, shell: ShellExtension) -> None:
    session = ext_client.sessions.create(environments=[shell_kind(shell)("sh", token="wrong-token")], tools=[tool("shell", environment="sh")])
    assert session.environments[0].state == "failed"
    with pytest.raises(ServiceError) as refusal:
        session.call_tool("shell", {"command": "true"})
    assert refusal.value.code == "environment_not_ready"
