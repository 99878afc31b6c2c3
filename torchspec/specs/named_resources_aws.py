"""AWS EC2 instance types as named resources (``aws_p3.8xlarge``...), as TorchX defines them.

Memory is what AWS Batch can actually hand out: the instance's GiB times a
96% memory tax, so jobs never wait forever for memory the host cannot give.
Each resource records its instance type under the Kubernetes node label, and
EFA network devices where the instance has them.
"""

from __future__ import annotations

import warnings
from typing import Callable, Mapping

from torchspec.specs.api import Resource

EFA_DEVICE = "vpc.amazonaws.com/efa"
#: AWS Batch and ECS keep part of each host's memory for themselves.
MEM_TAX = 0.96
#: The node label that pins a pod to an instance type in mixed clusters.
K8S_ITYPE = "node.kubernetes.io/instance-type"
GiB: int = int(1024 * MEM_TAX)


def instance_type_from_resource(resource: Resource) -> str:
    """The instance type a resource was made for, warning when it does not say."""
    instance_type = resource.capabilities.get(K8S_ITYPE)
    if instance_type is None:
        warnings.warn(
            "Cannot determine resource instance type which can cause issues for non-homogeneous CEs and "
            "multinode jobs. Consider providing torchspec.specs.named_resources_aws:K8S_ITYPE resource capability."
        )
    return instance_type  # type: ignore[return-value]


def _instance(itype: str, cpu: int, gpu: int, mem_gib: int, efa: int | None = None) -> Resource:
    return Resource(cpu=cpu, gpu=gpu, memMB=mem_gib * GiB, capabilities={K8S_ITYPE: itype},
                    devices={EFA_DEVICE: efa} if efa else {})


def aws_p3_2xlarge() -> Resource:
    return _instance("p3.2xlarge", 8, 1, 61)


def aws_p3_8xlarge() -> Resource:
    return _instance("p3.8xlarge", 32, 4, 244)


def aws_p3_16xlarge() -> Resource:
    return _instance("p3.16xlarge", 64, 8, 488)


def aws_p3dn_24xlarge() -> Resource:
    return _instance("p3dn.24xlarge", 96, 8, 768, efa=1)


def aws_p4d_24xlarge() -> Resource:
    return _instance("p4d.24xlarge", 96, 8, 1152, efa=4)


def aws_p4de_24xlarge() -> Resource:
    return _instance("p4de.24xlarge", 96, 8, 1152, efa=4)


def aws_t3_medium() -> Resource:
    return _instance("t3.medium", 2, 0, 4)


def aws_m5_2xlarge() -> Resource:
    return _instance("m5.2xlarge", 8, 0, 32)


def aws_g4dn_xlarge() -> Resource:
    return _instance("g4dn.xlarge", 4, 1, 16)


def aws_g4dn_2xlarge() -> Resource:
    return _instance("g4dn.2xlarge", 8, 1, 32)


def aws_g4dn_4xlarge() -> Resource:
    return _instance("g4dn.4xlarge", 16, 1, 64)


def aws_g4dn_8xlarge() -> Resource:
    return _instance("g4dn.8xlarge", 32, 1, 128, efa=1)


def aws_g4dn_12xlarge() -> Resource:
    return _instance("g4dn.12xlarge", 48, 4, 192, efa=1)


def aws_g4dn_16xlarge() -> Resource:
    return _instance("g4dn.16xlarge", 64, 1, 256, efa=1)


def aws_g4dn_metal() -> Resource:
    return _instance("g4dn.metal", 96, 8, 384, efa=1)


def aws_g5_xlarge() -> Resource:
    return _instance("g5.xlarge", 4, 1, 16)


def aws_g5_2xlarge() -> Resource:
    return _instance("g5.2xlarge", 8, 1, 32)


def aws_g5_4xlarge() -> Resource:
    return _instance("g5.4xlarge", 16, 1, 64)


def aws_g5_8xlarge() -> Resource:
    return _instance("g5.8xlarge", 32, 1, 128, efa=1)


def aws_g5_12xlarge() -> Resource:
    return _instance("g5.12xlarge", 48, 4, 192, efa=1)


def aws_g5_16xlarge() -> Resource:
    return _instance("g5.16xlarge", 64, 1, 256, efa=1)


def aws_g5_24xlarge() -> Resource:
    return _instance("g5.24xlarge", 96, 4, 384, efa=1)


def aws_g5_48xlarge() -> Resource:
    return _instance("g5.48xlarge", 192, 8, 768, efa=1)


def aws_trn1_2xlarge() -> Resource:
    return _instance("trn1.2xlarge", 8, 0, 32)


def aws_trn1_32xlarge() -> Resource:
    return _instance("trn1.32xlarge", 128, 0, 512, efa=8)


NAMED_RESOURCES: Mapping[str, Callable[[], Resource]] = {
    "aws_t3.medium": aws_t3_medium,
    "aws_m5.2xlarge": aws_m5_2xlarge,
    "aws_p3.2xlarge": aws_p3_2xlarge,
    "aws_p3.8xlarge": aws_p3_8xlarge,
    "aws_p3.16xlarge": aws_p3_16xlarge,
    "aws_p3dn.24xlarge": aws_p3dn_24xlarge,
    "aws_p4d.24xlarge": aws_p4d_24xlarge,
    "aws_p4de.24xlarge": aws_p4de_24xlarge,
    "aws_g4dn.xlarge": aws_g4dn_xlarge,
    "aws_g4dn.2xlarge": aws_g4dn_2xlarge,
    "aws_g4dn.4xlarge": aws_g4dn_4xlarge,
    "aws_g4dn.8xlarge": aws_g4dn_8xlarge,
    "aws_g4dn.16xlarge": aws_g4dn_16xlarge,
    "aws_g4dn.12xlarge": aws_g4dn_12xlarge,
    "aws_g4dn.metal": aws_g4dn_metal,
    "aws_g5.xlarge": aws_g5_xlarge,
    "aws_g5.2xlarge": aws_g5_2xlarge,
    "aws_g5.4xlarge": aws_g5_4xlarge,
    "aws_g5.8xlarge": aws_g5_8xlarge,
    "aws_g5.16xlarge": aws_g5_16xlarge,
    "aws_g5.12xlarge": aws_g5_12xlarge,
    "aws_g5.24xlarge": aws_g5_24xlarge,
    "aws_g5.48xlarge": aws_g5_48xlarge,
    "aws_trn1.2xlarge": aws_trn1_2xlarge,
    "aws_trn1.32xlarge": aws_trn1_32xlarge,
}
