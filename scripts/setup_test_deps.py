#!/usr/bin/env python3
"""Installs what the tests need beyond Rust: the official A2A Python SDK, for the interop test.

Idempotent: does nothing when the pinned version is already importable.
"""
import subprocess
import sys

PINNED = "a2a-sdk==1.3.0"


def installed() -> bool:
    try:
        from importlib.metadata import version
        return version("a2a-sdk") == PINNED.split("==")[1]
    except Exception:
        return False


if not installed():
    subprocess.check_call([sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", PINNED])


# --- kubernetes-validate, for tests/render.rs (Kubernetes OpenAPI schemas of the rendered objects) ---
KUBERNETES_VALIDATE = "kubernetes-validate==1.37.0"


def install_kubernetes_validate() -> None:
    """Installs the pinned kubernetes-validate unless it is already importable at that version."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        if version("kubernetes-validate") == KUBERNETES_VALIDATE.split("==")[1]:
            return
    except PackageNotFoundError:
        pass
    subprocess.check_call([sys.executable, "-m", "pip", "install", "--quiet",
                           "--disable-pip-version-check", KUBERNETES_VALIDATE])


install_kubernetes_validate()
