"""Submitting apps and acting on them, as ``torchx.runner``: ``get_runner()`` is the way in."""

from torchspec.runner.api import (
    ENV_TORCHSPEC_JOB_ID,
    ENV_TORCHSPEC_PARENT_RUN_ID,
    ENV_TORCHX_JOB_ID,
    ENV_TORCHX_PARENT_RUN_ID,
    Runner,
    get_runner,
    parse_component_args,
)

__all__ = ["ENV_TORCHSPEC_JOB_ID", "ENV_TORCHSPEC_PARENT_RUN_ID", "ENV_TORCHX_JOB_ID", "ENV_TORCHX_PARENT_RUN_ID",
           "Runner", "get_runner", "parse_component_args"]
