"""Extension environments (spec §2.6): an instance reached over HTTP, speaking skillenv.extension.v1."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal, cast, get_args
from urllib.parse import urlsplit

from skillenv._coded import CodedError
from skillenv._wire import from_value, is_json_value, to_value
from skillenv.environments import SetupMode

OptionType = Literal["string", "number", "boolean", "string[]", "json"]
"""The type of one instance option; a spec is one of these, with a trailing "?" when the option may be omitted."""

Options = dict[str, Any]
"""An instance's options, as the kind's functions get them: the given ones, by name."""

_OPTION_TYPES: tuple[str, ...] = get_args(OptionType)
# Every instance takes these; a kind cannot declare them.
_RESERVED = ("name", "setup")


class ExtensionDefinitionError(CodedError, ValueError):
    """A mistake in an extension kind or in an instance's options, found before any call. `code`:
    "reserved_option", "invalid_option_spec", "unknown_option", "missing_option", "invalid_option"
    (with `option` set), "invalid_url", "invalid_credential" or "invalid_configuration"."""

    def __init__(self, code: str, message: str, option: str | None = None) -> None:
        super().__init__(code, message)
        self.option = option


class Credential:
    """A bearer credential for an extension instance. It shows as `Credential(***)`, so printing a
    definition never shows it; the service seals it and never journals or returns it."""

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        self._value = value

    def reveal(self) -> str:
        return self._value

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Credential) and other._value == self._value

    def __hash__(self) -> int:
        return hash(self._value)

    def __repr__(self) -> str:
        return "Credential(***)"


@dataclass(frozen=True)
class ExtensionEnvironment:
    """An extension environment: an instance reached over HTTP, whose tools take an `Opaque`
    implementation or none. Made by `extension_env` or by a kind from `environment(...)`."""

    kind: ClassVar[Literal["extension"]] = "extension"
    name: str
    url: str
    """The instance's base URL (http or https); the service's SERVICE_ENV_NETWORK_ALLOW must include it."""
    configuration: Any = field(default=None, hash=False)
    """Carried unread by the service to the instance's setup (any JSON value); None: none."""
    credential: Credential | None = None
    """Sent by the service as `Authorization: Bearer <credential>` on every call to the instance."""
    setup: SetupMode = "automatic"

    @property
    def has_credential(self) -> bool:
        return self.credential is not None


def extension_env(
    name: str,
    *,
    url: str,
    credential: str | None = None,
    configuration: Any = None,
    setup: SetupMode = "automatic",
) -> ExtensionEnvironment:
    """Defines an extension environment. Does no I/O: the service checks `url` against its network
    allow-list, then sets the instance up (`setup`: "automatic" before the session is created,
    "manual" on `session.setup_environment(name)`), when a session binds it. The configuration is
    snapshotted (a JSON value; None: none)."""
    what = f"extension environment {name!r}"
    given = cast(object, credential)  # a kind's function may answer anything
    if given is not None and (not isinstance(given, str) or given == ""):
        raise ExtensionDefinitionError("invalid_credential", f"{what}: the credential must be a non-empty string or None")
    return ExtensionEnvironment(
        name=name,
        url=_checked_url(url, what),
        configuration=_snapshot(configuration, what),
        credential=None if credential is None else Credential(credential),
        setup=setup,
    )


@dataclass(frozen=True, eq=False)
class ExtensionKind:
    """An extension environment kind: how its instances' options become what the service needs.
    Calling it makes an instance definition: `shell("sh", region="eu", setup="manual")` checks the
    options against the schema, computes the URL, credential and configuration, and does no I/O."""

    options: Mapping[str, str]
    url: Callable[[Options], str]
    credential: Callable[[Options], str | None] | None = None
    configure: Callable[[Options], Any] | None = None

    def __call__(self, name: str, *, setup: SetupMode = "automatic", **options: Any) -> ExtensionEnvironment:
        what = f"extension environment {name!r}"
        given = _checked_options(self.options, options, what)
        return extension_env(
            name,
            url=self.url(given),
            credential=self.credential(given) if self.credential is not None else None,
            configuration=self.configure(given) if self.configure is not None else None,
            setup=setup,
        )


def environment(
    *,
    url: Callable[[Options], str],
    options: Mapping[str, str] | None = None,
    credential: Callable[[Options], str | None] | None = None,
    configure: Callable[[Options], Any] | None = None,
) -> ExtensionKind:
    """Defines an extension environment kind (spec §2.6), as the TypeScript client's `environment`.

    `options` is the schema of the instance options by name, each "string", "number", "boolean",
    "string[]" or "json", with a trailing "?" when it may be omitted (None counts as omitted).
    `url`, `credential` and `configure` compute the instance's base URL, its bearer credential
    (None: none) and the configuration handed to its setup from the given options.
    """
    schema = dict(options or {})
    for option, spec in schema.items():
        if option in _RESERVED:
            raise ExtensionDefinitionError("reserved_option", f"an extension environment's options cannot declare {option}: every instance takes it", option)
        if not isinstance(cast(object, spec), str) or spec.removesuffix("?") not in _OPTION_TYPES:
            raise ExtensionDefinitionError("invalid_option_spec", f'option {option}: {spec!r} is not one of {", ".join(_OPTION_TYPES)} (with "?" when optional)', option)
    return ExtensionKind(schema, url, credential, configure)


def _checked_options(schema: Mapping[str, str], given: Mapping[str, Any], what: str) -> Options:
    for option in given:
        if option not in schema:
            names = ", ".join([*_RESERVED, *schema])
            raise ExtensionDefinitionError("unknown_option", f"{what}: unknown option {option}; the options are {names}", option)
    checked: Options = {}
    for option, spec in schema.items():
        value = given.get(option)
        if value is None:
            if not spec.endswith("?"):
                raise ExtensionDefinitionError("missing_option", f"{what}: option {option} is required", option)
            continue
        option_type = spec.removesuffix("?")
        if not _has_type(value, option_type):
            kind = "a JSON value" if option_type == "json" else f"a {option_type}"
            raise ExtensionDefinitionError("invalid_option", f"{what}: option {option} must be {kind}, not {value!r}", option)
        checked[option] = value
    return checked


def _has_type(value: Any, option_type: str) -> bool:
    if option_type == "string":
        return isinstance(value, str)
    if option_type == "number":
        return isinstance(value, (int, float)) and not isinstance(value, bool) and is_json_value(value)
    if option_type == "boolean":
        return isinstance(value, bool)
    if option_type == "string[]":
        return isinstance(value, (list, tuple)) and all(isinstance(item, str) for item in value)  # pyright: ignore[reportUnknownVariableType]
    return is_json_value(value)


def _checked_url(url: Any, what: str) -> str:
    if isinstance(url, str):
        try:
            parts = urlsplit(url)
            if parts.scheme in ("http", "https") and parts.hostname:
                return url
        except ValueError:  # e.g. an unclosed "[" of an IPv6 address
            pass
    raise ExtensionDefinitionError("invalid_url", f"{what}: the url must be an http(s) URL, not {url!r}")


def _snapshot(configuration: Any, what: str) -> Any:
    """The configuration as the service will carry it: a copy, as a JSON value."""
    if configuration is None:
        return None
    try:
        return from_value(to_value(configuration))
    except (TypeError, RecursionError) as error:
        raise ExtensionDefinitionError("invalid_configuration", f"{what}: the configuration is not JSON: {error}") from None
