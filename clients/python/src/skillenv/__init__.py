"""Python client of the skills and environments service: skills, sessions, runs, host,
extension and MCP environments, programs.

    from skillenv import Client, Skill, Model, AgentLoop, service_env, host_env, extension_env, mcp_env, tool
"""

from skillenv.bundle import DEFAULT_BUNDLE_LIMITS, BundleFormatError, BundleLimits, canonical_zip
from skillenv.client import Client
from skillenv.env import EnvClient, PreparedArtifact
from skillenv.environments import ServiceEnvironment, service_env
from skillenv.errors import ServiceError, UploadError
from skillenv.events import EventStream, SessionEvent
from skillenv.extension import Credential, ExtensionDefinitionError, ExtensionEnvironment, ExtensionKind, environment, extension_env
from skillenv.mcp import McpDefinitionError, McpEnvironment, mcp_env
from skillenv.hosts import HostClosedError, HostConnection, HostEnvironment, HostState, HostToolContext, Reconnect, ToolFailure, host_env
from skillenv.programs import Component, Program, ProgramError, ResolvedProgram, program
from skillenv.runs import AgentLoop, Approval, ApprovalDecider, Model, PinnedSkill, Run, RunFile, RunOptions, RunRecord
from skillenv.sessions import Failure, Receipt, Returned, Session, SessionRecord, SessionWithRun, Unknown
from skillenv.skill import Skill, SkillBundle, SkillSourceError
from skillenv.skills import Rollback, SkillFile, SkillMetadata, SkillVersion, SkillVersionPage, UploadedSkill
from skillenv.tools import Opaque, PlacementError, ToolPlacement, tool

__all__ = [
    "DEFAULT_BUNDLE_LIMITS",
    "AgentLoop",
    "Approval",
    "ApprovalDecider",
    "BundleFormatError",
    "BundleLimits",
    "Client",
    "Component",
    "Credential",
    "EnvClient",
    "EventStream",
    "ExtensionDefinitionError",
    "ExtensionEnvironment",
    "ExtensionKind",
    "Failure",
    "HostClosedError",
    "HostConnection",
    "HostEnvironment",
    "HostState",
    "HostToolContext",
    "McpDefinitionError",
    "McpEnvironment",
    "Model",
    "Opaque",
    "PinnedSkill",
    "PlacementError",
    "PreparedArtifact",
    "Program",
    "ProgramError",
    "Receipt",
    "Reconnect",
    "ResolvedProgram",
    "Returned",
    "Rollback",
    "Run",
    "RunFile",
    "RunOptions",
    "RunRecord",
    "ServiceEnvironment",
    "ServiceError",
    "Session",
    "SessionEvent",
    "SessionRecord",
    "SessionWithRun",
    "Skill",
    "SkillBundle",
    "SkillFile",
    "SkillMetadata",
    "SkillSourceError",
    "SkillVersion",
    "SkillVersionPage",
    "ToolFailure",
    "ToolPlacement",
    "Unknown",
    "UploadError",
    "UploadedSkill",
    "canonical_zip",
    "environment",
    "extension_env",
    "host_env",
    "mcp_env",
    "program",
    "service_env",
    "tool",
]
