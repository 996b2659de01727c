"""Python client of the skills and environments service: skills, sessions, runs and host environments.

    from skillenv import Client, Skill, Model, service_env, host_env, tool
"""

from skillenv.bundle import DEFAULT_BUNDLE_LIMITS, BundleFormatError, BundleLimits, canonical_zip
from skillenv.client import Client
from skillenv.environments import ServiceEnvironment, service_env
from skillenv.errors import ServiceError, UploadError
from skillenv.events import EventStream, SessionEvent
from skillenv.hosts import HostClosedError, HostConnection, HostEnvironment, HostState, HostToolContext, Reconnect, ToolFailure, host_env
from skillenv.runs import Model, Run, RunFile, RunRecord
from skillenv.sessions import Failure, Receipt, Returned, Session, SessionRecord, Unknown
from skillenv.skill import Skill, SkillBundle, SkillSourceError
from skillenv.skills import SkillFile, SkillMetadata, UploadedSkill
from skillenv.tools import Component, Opaque, PlacementError, ToolPlacement, tool

__all__ = [
    "DEFAULT_BUNDLE_LIMITS",
    "BundleFormatError",
    "BundleLimits",
    "Client",
    "Component",
    "EventStream",
    "Failure",
    "HostClosedError",
    "HostConnection",
    "HostEnvironment",
    "HostState",
    "HostToolContext",
    "Model",
    "Opaque",
    "PlacementError",
    "Receipt",
    "Reconnect",
    "Returned",
    "Run",
    "RunFile",
    "RunRecord",
    "ServiceEnvironment",
    "ServiceError",
    "Session",
    "SessionEvent",
    "SessionRecord",
    "Skill",
    "SkillBundle",
    "SkillFile",
    "SkillMetadata",
    "SkillSourceError",
    "ToolFailure",
    "ToolPlacement",
    "Unknown",
    "UploadError",
    "UploadedSkill",
    "canonical_zip",
    "host_env",
    "service_env",
    "tool",
]
