"""Images that are folders, for the schedulers that run container images (docker, kubernetes).

On local and slurm a role's image is a folder on the host, and ``.`` (the
built-in components' default, TorchX's local default) is the folder the app
is submitted from.  A scheduler that runs containers cannot pull ``.`` or
``/home/me/project``: the engine refuses the name, or a Kubernetes pod sits
in ImagePullBackOff.  Such a scheduler refuses the app in its dry run
instead, and ``lint --scheduler`` reports it as TS603 at the role's image.
"""

from __future__ import annotations

from torchspec.errors import AppRefusedError
from torchspec.specs import AppDef, Role

#: The lint code of the refusal (``torchspec lint --explain TS603``).
FOLDER_IMAGE = "TS603"


def is_folder_image(image: str) -> bool:
    """True for an image that can only be a folder: ``.``, ``..``, or a path starting ``/``, ``./``, ``../`` or ``~``.

    None of them is a valid image reference; ``train/img`` is one (a
    repository on a registry), so it is left to the engine.
    """
    return image in (".", "..") or image.startswith(("/", "./", "../", "~"))


def check_container_image(role: Role, index: int, scheduler: str) -> None:
    """Refuse ``role`` (``roles[index]`` of its app) when its image is empty or a folder."""
    image = role.image.strip()
    if image and not is_folder_image(image):
        return
    what = f"its image {role.image!r} is a folder on this machine" if image else "it has no image"
    raise AppRefusedError(
        f"role {role.name!r}: {what}, not a container image; {scheduler} runs every role in a container image",
        f"set the role's image to one {scheduler} can pull (e.g. image: ghcr.io/pytorch/pytorch:2.3.0); for a "
        f"component, pass -p image=NAME",
        code=FOLDER_IMAGE, path=("roles", index, "image"))


def check_container_images(app: AppDef, scheduler: str) -> None:
    """:func:`check_container_image` for every role of ``app``."""
    for index, role in enumerate(app.roles):
        check_container_image(role, index, scheduler)
