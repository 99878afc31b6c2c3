"""Named resources: the AWS and generic sets, the registry mapping, and third-party providers."""

from __future__ import annotations

import importlib
import sys
import textwrap
import warnings
from pathlib import Path
from typing import Callable, Iterator, List

import pytest

import torchspec.specs as specs
from torchspec.specs import (
    NULL_RESOURCE,
    Resource,
    clear_named_resources_cache,
    get_named_resources,
    named_resource_names,
    named_resources,
    resource,
)
from torchspec.specs.named_resources import ENTRY_POINT_GROUP, load_named_resources
from torchspec.specs.named_resources_aws import (
    EFA_DEVICE,
    K8S_ITYPE,
    MEM_TAX,
    NAMED_RESOURCES,
    NEURON_DEVICE,
    GiB,
    aws_c5_18xlarge,
    aws_g4dn_2xlarge,
    aws_g4dn_4xlarge,
    aws_g4dn_8xlarge,
    aws_g4dn_12xlarge,
    aws_g4dn_16xlarge,
    aws_g4dn_metal,
    aws_g4dn_xlarge,
    aws_g5_2xlarge,
    aws_g5_4xlarge,
    aws_g5_8xlarge,
    aws_g5_12xlarge,
    aws_g5_16xlarge,
    aws_g5_24xlarge,
    aws_g5_48xlarge,
    aws_g5_xlarge,
    aws_g6e_2xlarge,
    aws_g6e_4xlarge,
    aws_g6e_8xlarge,
    aws_g6e_12xlarge,
    aws_g6e_16xlarge,
    aws_g6e_24xlarge,
    aws_g6e_48xlarge,
    aws_g6e_xlarge,
    aws_inf2_8xlarge,
    aws_inf2_24xlarge,
    aws_inf2_48xlarge,
    aws_inf2_xlarge,
    aws_m5_2xlarge,
    aws_m5_large,
    aws_m5_metal,
    aws_m5d_24xlarge,
    aws_p3_2xlarge,
    aws_p3_8xlarge,
    aws_p3_16xlarge,
    aws_p3dn_24xlarge,
    aws_p4d_24xlarge,
    aws_p4de_24xlarge,
    aws_p5_48xlarge,
    aws_p5e_48xlarge,
    aws_p5en_48xlarge,
    aws_p6_b200_48xlarge,
    aws_t3_medium,
    aws_trn1_2xlarge,
    aws_trn1_32xlarge,
    instance_type_from_resource,
)
from torchspec.specs.named_resources_generic import NAMED_RESOURCES as GENERIC_NAMED_RESOURCES

# ---------------------------------------------------------------- AWS (ported from TorchX's named_resources_aws_test)


def test_mem_tax() -> None:
    assert MEM_TAX == 0.96 and GiB == 983


def test_aws_p3() -> None:
    p3_2 = aws_p3_2xlarge()
    assert (p3_2.cpu, p3_2.gpu, p3_2.memMB) == (8, 1, 61 * GiB)
    for factory, times in ((aws_p3_8xlarge, 4), (aws_p3_16xlarge, 8)):
        bigger = factory()
        assert (bigger.cpu, bigger.gpu, bigger.memMB) == (p3_2.cpu * times, p3_2.gpu * times, p3_2.memMB * times)
    p3dn_24 = aws_p3dn_24xlarge()
    assert (p3dn_24.cpu, p3dn_24.gpu, p3dn_24.memMB) == (96, 8, 768 * GiB)
    assert p3dn_24.devices == {EFA_DEVICE: 1}


def test_aws_p4() -> None:
    p4d, p4de = aws_p4d_24xlarge(), aws_p4de_24xlarge()
    assert (p4d.cpu, p4d.gpu, p4d.memMB, p4d.devices) == (96, 8, 1152 * GiB, {EFA_DEVICE: 4})
    assert (p4de.cpu, p4de.gpu, p4de.memMB, p4de.devices) == (96, 8, 1152 * GiB, {EFA_DEVICE: 4})


def test_aws_p5_and_p6() -> None:
    for factory, efa in ((aws_p5_48xlarge, 32), (aws_p5e_48xlarge, 32), (aws_p5en_48xlarge, 16)):
        res = factory()
        assert (res.cpu, res.gpu, res.memMB, res.devices) == (192, 8, 2048 * GiB, {EFA_DEVICE: efa})
    b200 = aws_p6_b200_48xlarge()
    assert (b200.cpu, b200.gpu, b200.devices, b200.capabilities[K8S_ITYPE]) == (
        192,
        8,
        {EFA_DEVICE: 8},
        "p6-b200.48xlarge",
    )


def test_aws_g4dn() -> None:
    g4d = aws_g4dn_xlarge()
    assert (g4d.cpu, g4d.gpu, g4d.memMB) == (4, 1, 16 * GiB)
    for factory, times in ((aws_g4dn_2xlarge, 2), (aws_g4dn_4xlarge, 4), (aws_g4dn_8xlarge, 8), (aws_g4dn_16xlarge, 16)):
        res = factory()
        assert (res.cpu, res.gpu, res.memMB) == (g4d.cpu * times, g4d.gpu, g4d.memMB * times)
    g4d_12 = aws_g4dn_12xlarge()
    assert (g4d_12.cpu, g4d_12.gpu, g4d_12.memMB) == (g4d.cpu * 12, 4, g4d.memMB * 12)
    metal = aws_g4dn_metal()
    assert (metal.cpu, metal.gpu, metal.memMB) == (g4d_12.cpu * 2, g4d_12.gpu * 2, g4d_12.memMB * 2)


def test_aws_g5() -> None:
    g5 = aws_g5_xlarge()
    assert (g5.cpu, g5.gpu, g5.memMB) == (4, 1, 16 * GiB)
    for factory, times in ((aws_g5_2xlarge, 2), (aws_g5_4xlarge, 4), (aws_g5_8xlarge, 8), (aws_g5_16xlarge, 16)):
        res = factory()
        assert (res.cpu, res.gpu, res.memMB) == (g5.cpu * times, g5.gpu, g5.memMB * times)
    g5_12 = aws_g5_12xlarge()
    assert (g5_12.cpu, g5_12.gpu, g5_12.memMB * 2) == (48, 4, 384 * GiB)
    g5_24 = aws_g5_24xlarge()
    assert (g5_24.cpu, g5_24.gpu, g5_24.memMB) == (g5_12.cpu * 2, g5_12.gpu, g5_12.memMB * 2)
    g5_48 = aws_g5_48xlarge()
    assert (g5_48.cpu, g5_48.gpu, g5_48.memMB) == (g5_12.cpu * 4, 8, g5_12.memMB * 4)


def test_aws_g6e() -> None:
    expected = [
        (aws_g6e_xlarge, 4, 1, 32, {}),
        (aws_g6e_2xlarge, 8, 1, 64, {}),
        (aws_g6e_4xlarge, 16, 1, 128, {}),
        (aws_g6e_8xlarge, 32, 1, 256, {}),
        (aws_g6e_16xlarge, 64, 1, 512, {}),
        (aws_g6e_12xlarge, 48, 4, 384, {}),
        (aws_g6e_24xlarge, 96, 4, 768, {EFA_DEVICE: 2}),
        (aws_g6e_48xlarge, 192, 8, 1536, {EFA_DEVICE: 4}),
    ]
    for factory, cpu, gpu, mem_gib, devices in expected:
        res = factory()
        assert (res.cpu, res.gpu, res.memMB, res.devices) == (cpu, gpu, mem_gib * GiB, devices), factory.__name__


def test_aws_trn1_and_inf2() -> None:
    trn1_2 = aws_trn1_2xlarge()
    assert (trn1_2.cpu, trn1_2.gpu, trn1_2.memMB, trn1_2.devices) == (8, 0, 32 * GiB, {NEURON_DEVICE: 1})
    trn1_32 = aws_trn1_32xlarge()
    assert (trn1_32.cpu, trn1_32.gpu, trn1_32.memMB) == (trn1_2.cpu * 16, trn1_2.gpu, trn1_2.memMB * 16)
    assert trn1_32.devices == {EFA_DEVICE: 8, NEURON_DEVICE: 16}
    for factory, cpu, mem_gib, neurons in (
        (aws_inf2_xlarge, 4, 16, 1),
        (aws_inf2_8xlarge, 32, 128, 1),
        (aws_inf2_24xlarge, 96, 384, 6),
        (aws_inf2_48xlarge, 192, 768, 12),
    ):
        res = factory()
        assert (res.cpu, res.gpu, res.memMB, res.devices) == (cpu, 0, mem_gib * GiB, {NEURON_DEVICE: neurons})


def test_aws_cpu_types() -> None:
    assert (aws_t3_medium().cpu, aws_t3_medium().gpu, aws_t3_medium().memMB) == (2, 0, 4 * GiB)
    assert (aws_m5_2xlarge().cpu, aws_m5_2xlarge().gpu, aws_m5_2xlarge().memMB) == (8, 0, 32 * GiB)
    assert (aws_m5_large().cpu, aws_m5_large().memMB) == (2, 8 * GiB)
    assert (aws_m5_metal().cpu, aws_m5_metal().memMB) == (96, 384 * GiB)
    assert (aws_m5d_24xlarge().cpu, aws_m5d_24xlarge().memMB) == (96, 384 * GiB)
    c5 = aws_c5_18xlarge()
    assert (c5.cpu, c5.gpu, c5.memMB) == (72, 0, 144 * GiB)


def test_every_aws_resource_names_its_instance_type() -> None:
    for name, factory in NAMED_RESOURCES.items():
        res = factory()
        assert res.capabilities[K8S_ITYPE] == name[len("aws_") :]
        assert instance_type_from_resource(res) == name[len("aws_") :]


def test_instance_type_from_resource_warns_when_unknown() -> None:
    with pytest.warns(UserWarning, match="Cannot determine resource instance type"):
        assert instance_type_from_resource(Resource(cpu=1, gpu=0, memMB=1)) is None


def test_factories_return_fresh_objects() -> None:
    first = named_resources["aws_p4d.24xlarge"]
    first.devices[EFA_DEVICE] = 0
    first.capabilities["extra"] = True
    assert named_resources["aws_p4d.24xlarge"] == aws_p4d_24xlarge()


# ---------------------------------------------------------------- generic


def test_generic_named_resources() -> None:
    assert set(GENERIC_NAMED_RESOURCES) == {
        "gpu.small", "gpu.medium", "gpu.large", "gpu.xlarge",
        "cpu.nano", "cpu.micro", "cpu.small", "cpu.medium", "cpu.large", "cpu.xlarge",
    }  # fmt: skip
    for name, factory in GENERIC_NAMED_RESOURCES.items():
        res = factory()
        if name.startswith("gpu"):
            assert res.gpu >= 1
        assert res.cpu >= 1 and res.memMB >= 1
        assert not res.capabilities and not res.devices


# ---------------------------------------------------------------- the registry


def test_null_and_missing() -> None:
    assert named_resources["NULL"] == NULL_RESOURCE
    assert named_resources["MISSING"] == NULL_RESOURCE


def test_builtins_are_registered() -> None:
    names = set(named_resources)
    assert set(NAMED_RESOURCES) <= names and set(GENERIC_NAMED_RESOURCES) <= names
    assert {"NULL", "MISSING"} <= names
    assert len(named_resources) == len(names)
    assert named_resource_names() == sorted(names)


def test_contains() -> None:
    assert "aws_p3.8xlarge" in named_resources
    assert "nonexistant" not in named_resources
    assert 42 not in named_resources


def test_iteration_builds_every_resource() -> None:
    seen = [name for name in named_resources]
    assert seen
    for name in seen:
        assert isinstance(resource(h=name), Resource)


def test_unknown_name_suggests_the_closest() -> None:
    with pytest.raises(KeyError, match=r"No named resource found for `aws_p3.8xlage`. Did you mean `aws_p3.8xlarge`\?"):
        _ = named_resources["aws_p3.8xlage"]


def test_far_off_name_lists_every_registered_name() -> None:
    with pytest.raises(KeyError, match=r"No named resource found for `zzzzzzzz`. Registered named resources: \[") as e:
        get_named_resources("zzzzzzzz")
    assert "'gpu.small'" in str(e.value) and "'aws_t3.medium'" in str(e.value)


def test_library_reads_the_package_factory_table(monkeypatch: pytest.MonkeyPatch) -> None:
    table: dict[str, Callable[[], Resource]] = {
        "p3.2xlarge": lambda: Resource(1, 0, 1),
        "p3.16xlarge": lambda: Resource(2, 0, 2),
        "p4d.24xlarge": lambda: Resource(3, 0, 3),
    }
    monkeypatch.setattr(specs, "_named_resource_factories", table)
    library = specs._NamedResourcesLibrary()
    assert library["p3.16xlarge"] == Resource(2, 0, 2)
    assert list(library) == list(table)
    with pytest.raises(KeyError, match="No named resource found for `foo`. Registered named resources:.*"):
        _ = library["foo"]
    with pytest.raises(KeyError, match="No named resource found for `p316xl`. Did you mean `p3.16xlarge`?"):
        _ = library["p316xl"]


def test_resource_helper() -> None:
    assert resource() == Resource(cpu=2, gpu=0, memMB=1024)
    assert resource(cpu=1) == Resource(cpu=1, gpu=0, memMB=1024)
    assert resource(cpu=2, gpu=1) == Resource(cpu=2, gpu=1, memMB=1024)
    assert resource(cpu=2, gpu=1, memMB=2048) == Resource(cpu=2, gpu=1, memMB=2048)
    assert resource(h="aws_t3.medium") == named_resources["aws_t3.medium"]
    assert resource(cpu=16, gpu=4, h="aws_t3.medium") == named_resources["aws_t3.medium"]


# ---------------------------------------------------------------- third-party providers


def _write_dist(root: Path, dist: str, entry_points: str) -> None:
    """A minimal installed distribution: what pip leaves in site-packages, enough for importlib.metadata."""
    info = root / f"{dist.replace('-', '_')}-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(f"[{ENTRY_POINT_GROUP}]\n{textwrap.dedent(entry_points)}")


@pytest.fixture
def site_dirs(tmp_path: Path) -> Iterator[List[Path]]:
    """Two throwaway site dirs put on sys.path; everything they added is gone again afterwards."""
    dirs = [tmp_path / "site_a", tmp_path / "site_b"]
    for folder in dirs:
        folder.mkdir()
    modules_before = set(sys.modules)
    sys.path[:0] = [str(d) for d in dirs]
    importlib.invalidate_caches()
    clear_named_resources_cache()
    try:
        yield dirs
    finally:
        for folder in dirs:
            sys.path.remove(str(folder))
        for name in set(sys.modules) - modules_before:
            if name.startswith("zz_plugin"):
                del sys.modules[name]
        importlib.invalidate_caches()
        clear_named_resources_cache()


def test_third_party_provider_plugs_in(site_dirs: List[Path]) -> None:
    site = site_dirs[0]
    (site / "zz_plugin_resources.py").write_text(
        textwrap.dedent(
            """\
            from torchspec.specs import Resource

            def gpu_x_1() -> Resource:
                return Resource(cpu=2, gpu=2, memMB=64 * 1024)

            FLEET = {
                "zz.big": lambda: Resource(cpu=128, gpu=8, memMB=1024 * 1024),
                "gpu.small": lambda: Resource(cpu=99, gpu=1, memMB=1),
                "zz.ready": Resource(cpu=1, gpu=0, memMB=1),
            }
            """
        )
    )
    _write_dist(
        site,
        "zz-plugin",
        """\
        gpu_x_1 = zz_plugin_resources:gpu_x_1
        fleet = zz_plugin_resources:FLEET
        """,
    )
    clear_named_resources_cache()

    assert named_resources["gpu_x_1"] == Resource(cpu=2, gpu=2, memMB=64 * 1024)
    assert named_resources["zz.big"] == Resource(cpu=128, gpu=8, memMB=1024 * 1024)
    # a plug-in may redefine a built-in name
    assert named_resources["gpu.small"] == Resource(cpu=99, gpu=1, memMB=1)
    # a ready-made Resource is handed out as copies
    ready = named_resources["zz.ready"]
    ready.capabilities["touched"] = True
    assert named_resources["zz.ready"] == Resource(cpu=1, gpu=0, memMB=1)
    assert "gpu_x_1" in named_resource_names()
    assert named_resources["NULL"] == NULL_RESOURCE


def test_plugin_is_gone_after_cleanup() -> None:
    assert "gpu_x_1" not in named_resources
    assert named_resources["gpu.small"] == GENERIC_NAMED_RESOURCES["gpu.small"]()


def test_provider_precedence_is_by_distribution_name(site_dirs: List[Path]) -> None:
    # bbb sits earlier on sys.path than aaa; the answer must not depend on it
    first_on_path, second_on_path = site_dirs
    (second_on_path / "zz_plugin_aaa.py").write_text(
        "from torchspec.specs import Resource\nSHARED = {'zz.shared': lambda: Resource(1, 0, 1)}\n"
    )
    (first_on_path / "zz_plugin_bbb.py").write_text(
        "from torchspec.specs import Resource\nSHARED = {'zz.shared': lambda: Resource(2, 0, 2)}\n"
    )
    _write_dist(second_on_path, "aaa-zz", "shared = zz_plugin_aaa:SHARED\n")
    _write_dist(first_on_path, "bbb-zz", "shared = zz_plugin_bbb:SHARED\n")
    clear_named_resources_cache()

    assert named_resources["zz.shared"] == Resource(2, 0, 2)
    assert load_named_resources()["zz.shared"]() == Resource(2, 0, 2)


def test_broken_providers_are_skipped_with_a_warning(site_dirs: List[Path]) -> None:
    site = site_dirs[0]
    (site / "zz_plugin_odd.py").write_text("NOT_A_PROVIDER = 42\nMIXED = {'zz.bad': 42, 'zz.good': dict}\n")
    _write_dist(
        site,
        "zz-broken",
        """\
        missing = zz_plugin_no_such_module:thing
        number = zz_plugin_odd:NOT_A_PROVIDER
        mixed = zz_plugin_odd:MIXED
        """,
    )
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        table = load_named_resources()
    messages = "\n".join(str(w.message) for w in caught)
    assert "zz_plugin_no_such_module:thing failed to load" in messages
    assert "number = zz_plugin_odd:NOT_A_PROVIDER is neither a callable" in messages
    assert "'zz.bad' is neither a callable nor a Resource" in messages
    assert "missing" not in table and "number" not in table and "zz.bad" not in table
    assert "zz.good" in table and "aws_p3.2xlarge" in table


def test_reload_picks_up_and_drops_a_provider(tmp_path: Path) -> None:
    """The whole life of a plug-in in one process: not there, installed + reload, removed + reload."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "zz_plugin_reload.py").write_text(
        "from torchspec.specs import Resource\n\ndef tiny() -> Resource:\n    return Resource(cpu=1, gpu=0, memMB=64)\n"
    )
    _write_dist(site, "zz-reload", "zz.tiny = zz_plugin_reload:tiny\n")

    assert "zz.tiny" not in named_resources  # loads and caches the table without the plug-in
    sys.path.insert(0, str(site))
    try:
        importlib.invalidate_caches()
        assert "zz.tiny" not in named_resources, "the cached table is kept until reload()"
        named_resources.reload()
        assert named_resources["zz.tiny"] == Resource(cpu=1, gpu=0, memMB=64)
        assert "zz.tiny" in list(named_resources)
    finally:
        sys.path.remove(str(site))
        sys.modules.pop("zz_plugin_reload", None)
        importlib.invalidate_caches()
        named_resources.reload()
    assert "zz.tiny" not in named_resources
    with pytest.raises(KeyError, match="No named resource found for `zz.tiny`"):
        named_resources["zz.tiny"]
