"""The real service and the scripted model provider as child processes, as the TypeScript tests run them."""

from __future__ import annotations

import json
import os
import re
import subprocess
import threading
import time
import urllib.request
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from skillenv import Client

REPO = Path(__file__).resolve().parents[3]
API_KEY = "python-client-key-0001"
SCRIPTED_MODEL = "scripted-model"

# npm scripts put the project's Node 24 on PATH; run directly, the system's Node may be older.
NODE = str(REPO / "node_modules" / ".bin" / "node") if (REPO / "node_modules" / ".bin" / "node").exists() else "node"


@dataclass
class NodeProcess:
    """A Node program of this repository, its output kept (for failure messages) and drained (so it never blocks)."""

    child: subprocess.Popen[str]
    output: list[str] = field(default_factory=list)
    stdout: list[str] = field(default_factory=list)
    """With `keep_stdout`, the lines of stdout (a service's request log) while it announces on stderr."""

    @classmethod
    def start(cls, args: list[str], env: dict[str, str], announces: str, on_stderr: bool, keep_stdout: bool = False) -> tuple[NodeProcess, re.Match[str]]:
        """Starts `node <args>` and waits for the line matching `announces` (its listening address)."""
        child = subprocess.Popen(
            [NODE, *args], cwd=REPO, env=env, text=True, stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE if keep_stdout or not on_stderr else subprocess.DEVNULL,
            stderr=subprocess.PIPE if on_stderr else subprocess.DEVNULL,
        )  # fmt: skip
        process = cls(child)
        pipe = child.stderr if on_stderr else child.stdout
        assert pipe is not None
        match = process._read_until(pipe, re.compile(announces))
        threading.Thread(target=process._drain, args=(pipe,), daemon=True).start()
        if keep_stdout and on_stderr:
            assert child.stdout is not None
            threading.Thread(target=process._keep, args=(child.stdout,), daemon=True).start()
        return process, match

    def _read_until(self, pipe: IO[str], pattern: re.Pattern[str]) -> re.Match[str]:
        for line in pipe:
            self.output.append(line)
            if match := pattern.search(line):
                return match
        self.child.wait()
        raise RuntimeError(f"{self.child.args} exited with {self.child.returncode} before listening:\n{''.join(self.output)}")

    def _drain(self, pipe: IO[str]) -> None:
        self.output.extend(pipe)

    def _keep(self, pipe: IO[str]) -> None:
        self.stdout.extend(pipe)

    def stop(self) -> None:
        self.child.terminate()
        try:
            self.child.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.child.kill()
            self.child.wait()


@dataclass
class ScriptedProvider:
    """testing/scripted-provider: a real HTTP server that answers model requests from scripts."""

    process: NodeProcess
    url: str
    anthropic_base_url: str

    @classmethod
    def start(cls) -> ScriptedProvider:
        args = ["testing/scripted-provider/main.ts", "--port", "0"]
        process, match = NodeProcess.start(args, {"PATH": os.environ.get("PATH", "")}, r"listening on (\S+) \(anthropic base URL (\S+),", on_stderr=False)
        return cls(process, match[1], match[2])

    def script(self, model: str, steps: list[dict[str, object]]) -> None:
        """Loads the replies of the next requests for `model`, through the provider's control endpoint."""
        body = json.dumps({"steps": steps}).encode()
        request = urllib.request.Request(f"{self.url}/_scripts/{model}", data=body, method="PUT", headers={"content-type": "application/json"})
        with urllib.request.build_opener(urllib.request.ProxyHandler({})).open(request, timeout=10):
            pass


@dataclass
class Service:
    """`node server/src/main.ts` on a loopback port with a data directory of its own."""

    process: NodeProcess
    url: str
    data_dir: str
    env: dict[str, str]

    @classmethod
    def start(cls, data_dir: str, extra_env: dict[str, str] | None = None) -> Service:
        """With SERVICE_LOG_REQUESTS=true in `extra_env`, the request log is kept (`requests_since`)."""
        env = {
            "PATH": os.environ.get("PATH", ""),
            "SERVICE_LISTEN": "127.0.0.1:0",
            "SERVICE_DATA_DIR": data_dir,
            "SERVICE_API_KEYS": f"python={API_KEY}",
            "SERVICE_LOG_REQUESTS": "false",
            "SERVICE_SHUTDOWN_GRACE_SECS": "2",
            # Where bubblewrap cannot start (a worktree whose node_modules are symlinks), tests run with SERVICE_ENV_SANDBOX=off.
            **({"SERVICE_ENV_SANDBOX": os.environ["SERVICE_ENV_SANDBOX"]} if "SERVICE_ENV_SANDBOX" in os.environ else {}),
            **(extra_env or {}),
        }
        keep = env["SERVICE_LOG_REQUESTS"] == "true"
        process, match = NodeProcess.start(["server/src/main.ts"], env, r"listening on (\S+)", on_stderr=True, keep_stdout=keep)
        return cls(process, match[1], data_dir, env)

    def restart(self) -> Service:
        """Stops the service and starts it again on the same port and data: a deployment's restart, as clients see it."""
        self.process.stop()
        return Service.start(self.data_dir, {**self.env, "SERVICE_LISTEN": self.url.removeprefix("http://")})

    def client(self, **options: Any) -> Client:
        return Client(self.url, API_KEY, **options)

    def log_mark(self, client: Client) -> int:
        """Where the request log is once everything `client` sent so far is in it, for `requests_since`."""
        return self._logged_through(client)

    def requests_since(self, mark: int, client: Client) -> list[tuple[str, str]]:
        """The requests the service logged since `mark`, as (procedure, code): "ArtifactService/AdmitTool"
        or, for the object store's, "object-store PUT"."""
        end = self._logged_through(client) - 1
        return [(_procedure_of(record), record["code"]) for record in (json.loads(line) for line in self.process.stdout[mark:end])]

    def _logged_through(self, client: Client) -> int:
        """Sends a ListSkills through `client` and answers the log's length up to its line. The service
        logs a request once it has answered it, so every request answered earlier is in by then."""
        start = len(self.process.stdout)
        client.skills.list(page_size=1)
        deadline = time.monotonic() + 10
        while True:
            lines = self.process.stdout[start:]
            for offset, line in enumerate(lines):
                if _procedure_of(json.loads(line)) == "SkillService/ListSkills":
                    return start + offset + 1
            if time.monotonic() > deadline:
                raise TimeoutError(f"the service did not log the marking ListSkills: {lines}")
            time.sleep(0.01)


def _procedure_of(record: dict[str, Any]) -> str:
    procedure = record.get("procedure")
    if isinstance(procedure, str):
        return procedure.rsplit(".", 1)[-1]
    return f"{record['protocol']} {record['method']}"


@dataclass
class ShellExtension:
    """examples/shell-extension: the repository's extension environment (a directory and a shell
    per binding), requiring `token` as its bearer credential. Commands run as plain processes."""

    process: NodeProcess
    url: str
    token: str

    @classmethod
    def start(cls, root: str, token: str) -> ShellExtension:
        env = {"PATH": os.environ.get("PATH", ""), "SHELL_EXTENSION_TOKEN": token}
        args = ["examples/shell-extension/main.ts", "--port", "0", "--root", root, "--bwrap", "off"]
        process, match = NodeProcess.start(args, env, r"shell-extension listening on (\S+)", on_stderr=True)
        return cls(process, match[1], token)


def build_components(*names: str) -> dict[str, bytes]:
    """components/<name> built into build/components/<name>.wasm unless its build is current, and read."""
    subprocess.run([NODE, "scripts/build-components.ts", *(f"components/{name}" for name in names)], cwd=REPO, check=True, capture_output=True)
    return {name: (REPO / "build" / "components" / f"{name}.wasm").read_bytes() for name in names}


def unique(wasm: bytes) -> bytes:
    """The component with a custom section of random bytes appended: the same component to run, but
    bytes (and an id) no workspace has admitted yet. Custom sections may follow any section."""
    name = b"skillenv-python-test"
    content = _leb128(len(name)) + name + uuid.uuid4().bytes
    return wasm + b"\x00" + _leb128(len(content)) + content


def _leb128(value: int) -> bytes:
    out = bytearray()
    while True:
        byte, value = value & 0x7F, value >> 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)
