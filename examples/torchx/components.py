"""TorchX-style components, as a team moving from TorchX has them: run them as they are, or convert them.

    torchspec submit examples/torchx/components.py:trainer --script train.py --nnodes 2 -- --epochs 3
    torchspec convert examples/torchx/components.py:trainer --script train.py -o trainer.yaml

Written against ``torchspec.specs``; with TorchX installed, ``import torchx.specs as specs`` works the same.
"""

from typing import Dict, List, Optional

import torchspec.specs as specs


def echo(msg: str = "hello world", image: str = ".", num_replicas: int = 1) -> specs.AppDef:
    """Echoes a message to stdout.

    Args:
        msg: message to echo
        image: image to use
        num_replicas: how many replicas to run
    """
    return specs.AppDef(
        name="echo",
        roles=[specs.Role(name="echo", image=image, entrypoint="echo", args=[msg], num_replicas=num_replicas)],
    )


def trainer(
    script: str,
    *script_args: str,
    image: str = ".",
    nnodes: int = 1,
    nproc_per_node: int = 1,
    lr: float = 0.01,
    amp: bool = False,
    env: Optional[Dict[str, str]] = None,
    tags: Optional[List[str]] = None,
    max_retries: int = 0,
    rdzv_port: int = 29500,
) -> specs.AppDef:
    """A torchrun trainer on NNODES nodes.

    Args:
        script: the training script
        script_args: the script's own arguments, after --
        image: image to use
        nnodes: number of nodes
        nproc_per_node: processes per node
        lr: learning rate
        amp: use automatic mixed precision
        env: extra environment variables
        tags: labels for the app's metadata
        max_retries: retries of the whole app
        rdzv_port: the rendezvous port on node 0
    """
    args = [
        f"--nnodes={nnodes}",
        f"--nproc_per_node={nproc_per_node}",
        "--rdzv_backend=c10d",
        f"--rdzv_endpoint=$${{{specs.macros.rank0_env}}}:{rdzv_port}",
        script,
        f"--lr={lr}",
        *(["--amp"] if amp else []),
        *script_args,
    ]
    return specs.AppDef(
        name="trainer",
        roles=[
            specs.Role(
                name="trainer",
                image=image,
                entrypoint="torchrun",
                args=args,
                env={"LOGLEVEL": "INFO", **(env or {})},
                num_replicas=nnodes,
                max_retries=max_retries,
                retry_policy=specs.RetryPolicy.APPLICATION,
                resource=specs.Resource(cpu=2 * nproc_per_node, gpu=0, memMB=1024 * nproc_per_node),
                port_map={"c10d": rdzv_port},
            )
        ],
        metadata={f"tag.{tag}": "true" for tag in tags or []},
    )


def ps(workers: int = 2, servers: int = 1, image: str = ".") -> specs.AppDef:
    """A parameter server app: servers and workers, two roles.

    Args:
        workers: number of workers
        servers: number of parameter servers
        image: image to use
    """
    return specs.AppDef(
        name="ps",
        roles=[
            specs.Role(name="server", image=image, entrypoint="sh", args=["-c", "echo server ${replica_id}"],
                       num_replicas=servers),
            specs.Role(name="worker", image=image, entrypoint="sh",
                       args=["-c", f"echo worker ${{replica_id}} of {workers}"], num_replicas=workers),
        ],
    )
