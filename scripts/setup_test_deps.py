#!/usr/bin/env python3
"""Installs what the tests need beyond Rust: the official A2A clients the interop tests drive,
kubernetes-validate for the render tests, podman (as root, from apt) for tests/podman.rs, and
tmux (apt) for the `mur top` tests.

Each client is pinned to an exact version and installed idempotently (nothing happens when the
pinned version is already there), so a repeated run is fast:

- the Python SDK `a2a-sdk`, with pip, for this interpreter (tests/interop.rs);
- the JavaScript SDK `@a2a-js/sdk`, with `npm ci` from tests/interop/js/package-lock.json, into
  target/interop-clients/js (tests/interop_js.rs);
- the agent CLIs the presets drive, `claude` (`@anthropic-ai/claude-code`) and `codex`
  (`@openai/codex`), with `npm ci` from tests/clis/package-lock.json, into target/interop-clients/clis
  (tests/agent_clis.rs drives them against local fake model providers; nothing is logged in);
- the Rust CLI `a2acli` (crate `a2a-cli`), with `cargo install --locked` and its TLS features
  off, into target/interop-clients/a2acli (tests/interop_rust.rs). It builds in a few minutes,
  which is why it is built here, before `cargo test`, and not inside a test's time.
- Google's Agent Development Kit `google-adk` 2.13.0 (the newest 2.x on PyPI when it was
  pinned; the release the streaming and input-required findings were made with), with its `a2a`
  extra, into its own venv at target/interop-clients/adk-venv made by this interpreter's
  `venv`: ADK resolves its own a2a-sdk (pinned beside it) and some thirty other packages, which
  must not move the system interpreter's a2a-sdk pin (tests/interop_adk.rs).
- the OpenTelemetry protocol's Python bindings `opentelemetry-proto` 1.45.2 (the newest 1.x on
  PyPI when it was pinned) with the `protobuf` 7.36.2 they parse with, with pip, for this
  interpreter: tests/otel/receiver.py decodes the OTLP/HTTP trace exports `mur` sends with them
  (tests/support/otlp.rs). Both ranges hold beside the a2a-sdk pin (a2a-sdk 1.3.0 wants
  protobuf>=5.29.5, opentelemetry-proto 1.45.2 protobuf>=5.0,<8.0), so no venv of its own.

A client that cannot be installed (no registry, no node, a failed build) does not stop the run:
its reason is written to target/interop-clients/<client>.unavailable and printed, and its test
then fails under CI=true or skips with that reason otherwise (docs/interop.md). A successful
install removes the file.
"""
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CLIENTS = Path(os.environ.get("MURMUR_INTEROP_CLIENTS", ROOT / "target" / "interop-clients"))

PY_SDK = ("a2a-sdk", "1.3.0")
JS_SDK = ("@a2a-js/sdk", "1.3.0")
A2ACLI = ("a2a-cli", "0.4.5")


def unavailable(client: str, why: str) -> None:
    """Records (and says loudly) why a client could not be installed."""
    CLIENTS.mkdir(parents=True, exist_ok=True)
    (CLIENTS / f"{client}.unavailable").write_text(why.strip() + "\n")
    print(f"setup_test_deps: {client} could not be installed: {why.strip()}", file=sys.stderr)


def available(client: str, started: float, installed: bool) -> None:
    (CLIENTS / f"{client}.unavailable").unlink(missing_ok=True)
    if installed:
        print(f"setup_test_deps: installed {client} in {time.monotonic() - started:.0f} s", file=sys.stderr)


def run(cmd: list, **kw) -> str:
    """Runs a command; answers "" on success, else the command and its last output lines."""
    try:
        out = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, **kw)
    except OSError as e:
        return f"`{cmd[0]}` cannot be run: {e}"
    if out.returncode == 0:
        return ""
    tail = "\n".join(out.stdout.strip().splitlines()[-15:])
    return f"`{' '.join(map(str, cmd))}` exited {out.returncode}:\n{tail}"


def python_sdk_installed() -> bool:
    try:
        from importlib.metadata import version
        return version(PY_SDK[0]) == PY_SDK[1]
    except Exception:
        return False


def install_python_sdk() -> None:
    """The official Python SDK, into this interpreter's site-packages."""
    started = time.monotonic()
    if python_sdk_installed():
        return available("a2a-sdk", started, False)
    why = run([sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
               f"{PY_SDK[0]}=={PY_SDK[1]}"])
    if why:
        return unavailable("a2a-sdk", why)
    available("a2a-sdk", started, True)


def npm_ci(client: str, source: Path, dest: Path, pins: list) -> bool:
    """`npm ci` of source's package.json and lock into dest, unless every (package, version) of
    `pins` is already there from the same lock. Answers whether it is usable; a failure is
    recorded under `client` (see `unavailable`)."""
    started = time.monotonic()
    lock = source / "package-lock.json"

    def pinned() -> bool:
        for package, version in pins:
            manifest = dest / "node_modules" / package / "package.json"
            if json.loads(manifest.read_text())["version"] != version:
                return False
        return (dest / "package-lock.json").read_bytes() == lock.read_bytes()

    try:
        if pinned():
            available(client, started, False)
            return True
    except (OSError, ValueError, KeyError):
        pass
    if shutil.which("node") is None or shutil.which("npm") is None:
        unavailable(client, "node and npm are not on PATH (install Node.js 20 or newer)")
        return False
    dest.mkdir(parents=True, exist_ok=True)
    for name in ("package.json", "package-lock.json"):
        shutil.copyfile(source / name, dest / name)
    why = run(["npm", "ci", "--no-audit", "--no-fund", "--loglevel=error"], cwd=dest)
    if why:
        unavailable(client, why)
        return False
    available(client, started, True)
    return True


def install_js_sdk() -> None:
    """The official JavaScript SDK, from the committed lock file, into CLIENTS/js."""
    npm_ci("a2a-js-sdk", ROOT / "tests" / "interop" / "js", CLIENTS / "js", [JS_SDK])


AGENT_CLIS = {"claude": ("@anthropic-ai/claude-code", "2.1.332"), "codex": ("@openai/codex", "0.171.0")}


def install_agent_clis() -> None:
    """Claude Code and Codex, pinned by tests/clis/package-lock.json, into CLIENTS/clis; each must
    then answer --version."""
    dest = CLIENTS / "clis"
    if not npm_ci("agent-clis", ROOT / "tests" / "clis", dest, list(AGENT_CLIS.values())):
        return
    for cli in AGENT_CLIS:
        why = run([dest / "node_modules" / ".bin" / cli, "--version"])
        if why:
            return unavailable("agent-clis", why)


def install_a2acli() -> None:
    """The official Rust CLI, built without TLS (the doors are plain HTTP), into CLIENTS/a2acli."""
    started = time.monotonic()
    root = CLIENTS / "a2acli"
    binary = root / "bin" / "a2acli"
    try:
        probe = subprocess.run([binary, "--version"], stdout=subprocess.PIPE, text=True)
        if probe.returncode == 0 and probe.stdout.split() == ["a2acli", A2ACLI[1]]:
            return available("a2acli", started, False)
    except OSError:
        pass
    print(f"setup_test_deps: building a2acli {A2ACLI[1]} (a few minutes, once)", file=sys.stderr)
    # An unoptimised build without debug info: half the release build's time on two cores,
    # and the tests only run the CLI a few dozen times.
    env = dict(os.environ, CARGO_PROFILE_DEV_DEBUG="0")
    why = run(["cargo", "install", "--quiet", "--locked", "--debug", "--no-default-features",
               "--version", A2ACLI[1], "--root", root, A2ACLI[0]], env=env)
    if why:
        return unavailable("a2acli", why)
    available("a2acli", started, True)


# Google's Agent Development Kit, an A2A client through RemoteA2aAgent (tests/interop_adk.rs),
# with the a2a-sdk its `a2a` extra resolves to, pinned too so a new a2a-sdk release cannot change
# what the test drives.
ADK = ("google-adk", "2.13.0")
ADK_A2A_SDK = ("a2a-sdk", "1.3.0")
ADK_VENV = CLIENTS / "adk-venv"


def adk_python() -> Path:
    """The ADK venv's interpreter."""
    return ADK_VENV / "bin" / "python"


def adk_installed() -> bool:
    """Whether the venv's interpreter runs and holds both pins (metadata only: importing ADK
    takes seconds, this a tenth of one)."""
    probe = ("import importlib.metadata as m; "
             f"print(m.version('{ADK[0]}'), m.version('{ADK_A2A_SDK[0]}'))")
    try:
        out = subprocess.run([adk_python(), "-c", probe], stdout=subprocess.PIPE,
                             stderr=subprocess.DEVNULL, text=True)
    except OSError:
        return False
    return out.returncode == 0 and out.stdout.split() == [ADK[1], ADK_A2A_SDK[1]]


def install_adk() -> None:
    """google-adk with its a2a extra, into its own venv (see the docstring at the top)."""
    started = time.monotonic()
    if adk_installed():
        return available("adk", started, False)
    print(f"setup_test_deps: installing {ADK[0]} {ADK[1]} into {ADK_VENV} (a minute, once)",
          file=sys.stderr)
    why = "" if adk_python().exists() else run([sys.executable, "-m", "venv", ADK_VENV])
    why = why or run([adk_python(), "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
                      f"{ADK[0]}[a2a]=={ADK[1]}", "==".join(ADK_A2A_SDK)])
    if why:
        return unavailable("adk", why)
    if not adk_installed():
        return unavailable("adk", f"{ADK_VENV} does not hold {ADK[0]} {ADK[1]} with "
                           f"{ADK_A2A_SDK[0]} {ADK_A2A_SDK[1]} after pip install")
    available("adk", started, True)


# The official OpenAI Python SDK: its stream parser checks the tests' fake of the Responses API,
# the wire format Codex speaks (tests/fake_responses.rs).
OPENAI_SDK = ("openai", "3.57.0")


def install_openai_sdk() -> None:
    """The pinned openai SDK, into this interpreter's site-packages."""
    started = time.monotonic()
    try:
        from importlib.metadata import version
        if version(OPENAI_SDK[0]) == OPENAI_SDK[1]:
            return available("openai", started, False)
    except Exception:
        pass
    why = run([sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
               "==".join(OPENAI_SDK)])
    if why:
        return unavailable("openai", why)
    available("openai", started, True)


# The OpenTelemetry protocol's official Python bindings: tests/otel/receiver.py, the collector the
# OTLP export tests send to, parses each ExportTraceServiceRequest with them. protobuf is pinned
# beside them (the release pip resolves for both pins together), so a new protobuf cannot change
# what parses murmur's bytes; it lies in the a2a-sdk pin's range too (protobuf>=5.29.5).
OTEL_PROTO = ("opentelemetry-proto", "1.45.2")
OTEL_PROTOBUF = ("protobuf", "7.36.2")


def otel_proto_installed() -> bool:
    """Whether this interpreter holds both pins (metadata only, so a repeated run is fast)."""
    try:
        from importlib.metadata import version
        return all(version(name) == pinned for name, pinned in (OTEL_PROTO, OTEL_PROTOBUF))
    except Exception:
        return False


def install_otel_proto() -> None:
    """The pinned opentelemetry-proto and protobuf, into this interpreter's site-packages; the
    receiver's module must then import."""
    started = time.monotonic()
    if otel_proto_installed():
        return available("opentelemetry-proto", started, False)
    why = run([sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
               "==".join(OTEL_PROTO), "==".join(OTEL_PROTOBUF)])
    why = why or run([sys.executable, "-c",
                      "from opentelemetry.proto.collector.trace.v1 import trace_service_pb2"])
    if why:
        return unavailable("opentelemetry-proto", why)
    if not otel_proto_installed():
        return unavailable("opentelemetry-proto", f"this interpreter does not hold {OTEL_PROTO[0]} "
                           f"{OTEL_PROTO[1]} with {OTEL_PROTOBUF[0]} {OTEL_PROTOBUF[1]} after pip install")
    available("opentelemetry-proto", started, True)


# kubernetes-validate checks the objects `mur render` writes against Kubernetes's OpenAPI
# schemas (tests/render.rs). The render test fails, naming this script, when it is missing.
KUBERNETES_VALIDATE = ("kubernetes-validate", "1.37.0")


def install_tmux() -> None:
    """tmux, from Debian's packages: tests/top.rs runs `mur top` in its pseudo-terminal and reads
    the screen back as a person would see it."""
    started = time.monotonic()
    if shutil.which("tmux"):
        available("tmux", started, False)
        return
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    why = run(["apt-get", "install", "-y", "-qq", "tmux"], env=env) and (
        run(["apt-get", "update", "-qq"], env=env)
        or run(["apt-get", "install", "-y", "-qq", "tmux"], env=env))
    if why or not shutil.which("tmux"):
        unavailable("tmux", why or "apt-get installed no tmux")
    else:
        available("tmux", started, True)


def install_kubernetes_validate() -> None:
    """The pinned kubernetes-validate, into this interpreter's site-packages."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        if version(KUBERNETES_VALIDATE[0]) == KUBERNETES_VALIDATE[1]:
            return
    except PackageNotFoundError:
        pass
    subprocess.check_call([sys.executable, "-m", "pip", "install", "--quiet",
                           "--disable-pip-version-check", "==".join(KUBERNETES_VALIDATE)])


# podman plays the rendered formation as Kubernetes YAML (tests/podman.rs), from Debian: podman
# itself, iptables for its bridge network, runc (which runs on cgroup v1 hybrid hosts). It needs
# root; without it, or without apt-get, the reason is recorded and the test fails under CI=true.
PODMAN_PACKAGES = ["podman", "iptables", "runc"]


def install_podman() -> None:
    """podman, iptables and runc from the system's apt, when one of them is missing."""
    started = time.monotonic()
    if all(shutil.which(tool) for tool in PODMAN_PACKAGES):
        return available("podman", started, False)
    if os.geteuid() != 0:
        return unavailable("podman", "podman, iptables or runc is missing, and installing them needs root: "
                           f"apt-get install -y {' '.join(PODMAN_PACKAGES)}")
    if shutil.which("apt-get") is None:
        return unavailable("podman", f"no apt-get to install {', '.join(PODMAN_PACKAGES)} with")
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    why = run(["apt-get", "update", "-qq"], env=env) or run(
        ["apt-get", "install", "-y", "-qq", *PODMAN_PACKAGES], env=env)
    if why:
        return unavailable("podman", why)
    available("podman", started, True)


if __name__ == "__main__":
    install_python_sdk()
    install_openai_sdk()
    install_js_sdk()
    install_agent_clis()
    install_a2acli()
    install_adk()
    install_otel_proto()
    install_kubernetes_validate()
    install_podman()
    install_tmux()
