"""What the tests that run real PyTorch jobs share: torch or a skip (a failure in CI), and a free port for a
rendezvous."""

from __future__ import annotations

import importlib.util
import socket

import skips

WHY = "torch is not installed (bash scripts/test installs torch==2.13.0)"


def torch_or_skip() -> None:
    """Skip the calling test module without torch (fail where torch is required: TORCHSPEC_REQUIRE_TORCH, CI)."""
    if importlib.util.find_spec("torch") is None:
        skips.skip_or_fail("TORCH", WHY, allow_module_level=True)


def free_port() -> int:
    """A port nothing listens on now, for torchrun's c10d store (the default 29500 may be another test's)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
