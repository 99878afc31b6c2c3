"""Components written for TorchX (``torchx.specs``), every argument type its command line knows: the parity
test materializes each through TorchX and through torchspec with the same arguments."""

from typing import Dict, List, Optional

import torchx.specs as specs


def every_type(
    msg: str,
    *extra: str,
    count: int = 2,
    ratio: float = 0.5,
    flag: bool = False,
    words: Optional[List[str]] = None,
    numbers: Optional[List[int]] = None,
    env: Optional[Dict[str, str]] = None,
    limit: Optional[int] = None,
    image: str = "ghcr.io/acme/img:1",
) -> specs.AppDef:
    """Every argument type.

    Args:
        msg: a message
        extra: after --
        count: replicas
        ratio: a number
        flag: a boolean
        words: a list
        numbers: a list of ints
        env: a map
        limit: optional int
        image: the image
    """
    args = [msg, f"ratio={ratio}", f"flag={flag}", f"limit={limit}", *extra, *(words or []),
            *[str(n * 2) for n in numbers or []]]
    return specs.AppDef(
        name="every",
        roles=[
            specs.Role(
                name="worker",
                image=image,
                entrypoint="python",
                args=args,
                env=env or {},
                num_replicas=count,
                max_retries=3,
                retry_policy=specs.RetryPolicy.REPLICA,
                resource=specs.Resource(cpu=2, gpu=1, memMB=4096),
                port_map={"http": 8080},
            )
        ],
    )


def two_roles(workers: int = 2, servers: int = 1) -> specs.AppDef:
    return specs.AppDef(
        name="ps",
        roles=[
            specs.Role(name="server", image="img", entrypoint="sh", args=["-c", "serve"], num_replicas=servers),
            specs.Role(name="worker", image="img", entrypoint="sh", args=["-c", "work ${replica_id}"],
                       num_replicas=workers, retry_policy=specs.RetryPolicy.APPLICATION, max_retries=1),
        ],
    )
