"""Where a replica's program is found, for the schedulers that run processes on hosts they can see.

``local`` and ``slurm`` both start a role's entrypoint in a folder (the
role's "image"), so both resolve it the same way: one rule, one message.
"""

from __future__ import annotations

import os
import shutil
from typing import Optional

from torchspec.errors import AppRefusedError


def resolve_entrypoint(role_name: str, entrypoint: str, img_root: str, search_path: Optional[str]) -> str:
    """The program to run: a file under the image folder if there is one, else a command on PATH.

    A relative entrypoint that exists under ``img_root`` becomes its absolute
    path there; any other is left as written for the replica's ``PATH`` to
    resolve, after checking here that it does resolve, so a typo fails the
    submit instead of every replica.
    """
    if os.path.isabs(entrypoint):
        if not os.path.exists(entrypoint):
            raise AppRefusedError(f"role {role_name!r}: entrypoint {entrypoint} does not exist")
        return entrypoint
    under_image = os.path.join(img_root, entrypoint)
    if os.path.isfile(under_image):
        return os.path.normpath(under_image)
    if shutil.which(entrypoint, path=search_path) is not None:
        return entrypoint
    raise AppRefusedError(
        f"role {role_name!r}: entrypoint {entrypoint!r} is neither a file under the image folder {img_root}"
        f" nor a command on PATH"
    )
