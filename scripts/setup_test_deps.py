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
