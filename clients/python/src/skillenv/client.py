"""The client: one gRPC channel to the service, its skills and sessions."""

from __future__ import annotations

from types import TracebackType

from skillenv._admission import admit_component
from skillenv._once import OncePerInstance
from skillenv._rpc import Rpc
from skillenv.assets import UploadResult, upload_asset
from skillenv.bundle import DEFAULT_BUNDLE_LIMITS, BundleLimits
from skillenv.hosts import Reconnect
from skillenv.sessions import SessionDeps, SessionsClient
from skillenv.skill import Skill
from skillenv.skills import SkillsClient, UploadedSkill
from skillenv.tools import Component


class Client:
    """A client of the service at `base_url` ("http://127.0.0.1:8080": gRPC over plaintext HTTP/2;
    https: over TLS), authenticated with a workspace's API key.

    `bundle_limits` are the server's SERVICE_SKILL_* limits when they differ from the documented
    defaults: skill uploads breaking them are refused before anything is sent. `reconnect` is the
    backoff of host environments served through this client, and of the channel's own
    reconnections. `close()` (or leaving a `with` block)
    stops those hosts and closes the channel.
    """

    def __init__(self, base_url: str, api_key: str, *, bundle_limits: BundleLimits = DEFAULT_BUNDLE_LIMITS, reconnect: Reconnect = Reconnect()) -> None:
        self._rpc = Rpc(base_url, api_key, (reconnect.initial_delay, reconnect.max_delay))
        self.skills = SkillsClient(self._rpc, bundle_limits)
        self._deps = SessionDeps(rpc=self._rpc, uploads=_Uploads(self), reconnect=reconnect)
        self.sessions = SessionsClient(self._deps, OncePerInstance(self._admit_component))

    def upload_asset(self, data: bytes) -> UploadResult:
        """Uploads bytes as a workspace asset (presign, PUT, finalize); nothing is sent when the workspace has them."""
        return upload_asset(self._rpc, data)

    def _admit_component(self, component: Component) -> str:
        return admit_component(self._rpc, component)

    def close(self) -> None:
        for host in list(self._deps.hosts):
            host.stop()
        self._rpc.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, traceback: TracebackType | None) -> None:
        self.close()


class _Uploads:
    """Runs upload through the client's skills client, so a skill uploaded explicitly is not uploaded again by a run."""

    def __init__(self, client: Client) -> None:
        self._client = client

    def upload_skill(self, skill: Skill) -> UploadedSkill:
        return self._client.skills.upload(skill)

    def upload_asset(self, data: bytes) -> UploadResult:
        return self._client.upload_asset(data)
