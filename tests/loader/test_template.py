"""Templates render in the sandbox, keep native types, and fail with codes."""

from __future__ import annotations

import os

import pytest

from torchspec.loader.template import Renderer, RenderError


@pytest.fixture
def r(tmp_path) -> Renderer:
    return Renderer({"nnodes": 4, "name": "x", "items": ["a", "b"], "flag": True}, str(tmp_path))


@pytest.mark.parametrize(
    "source, expected",
    [
        ("{{ nnodes }}", 4),
        ("  {{nnodes}} ", 4),
        ("n{{ nnodes }}-{{ name }}", "n4-x"),
        ("{{ nnodes * 2 }}", 8),
        ("{{ items }}", ["a", "b"]),
        ("{{ items | join(',') }}", "a,b"),
        ("{{ flag }}", True),
        ("x{{ flag }}", "xTrue"),
        ("{% if flag %}yes{% endif %}", "yes"),
        ("${app_id}-{{ name }}", "${app_id}-x"),
        ("{{ env('TORCHSPEC_TEST_UNSET_VAR', 'd') }}", "d"),
        ("{{ {'a': 1} }}", {"a": 1}),
    ],
)
def test_renders(r: Renderer, source: str, expected: object) -> None:
    assert r.render(source) == expected


@pytest.mark.parametrize(
    "source, code",
    [
        ("{{ nnode }}", "TS402"),
        ("x-{{ nnode }}", "TS402"),
        ("{{ nnode + 1 }}", "TS402"),
        ("{{ ''.__class__.__mro__ }}", "TS403"),
        ("{{ name.__class__ }}", "TS403"),
        ("{{ 'a' * 10000000 }}", "TS403"),
        ("{{ 2 ** 100000 }}", "TS403"),
        ("{% for x in %}", "TS401"),
        ("{{ env('TORCHSPEC_TEST_UNSET_VAR') }}", "TS406"),
        ("{{ range(3) }}", "TS404"),
        ("{{ 1 / 0 }}", "TS404"),
        ("{% include '/etc/passwd' %}", "TS405"),
        ("{% include '../../../../etc/passwd' %}", "TS405"),
    ],
)
def test_failures(r: Renderer, source: str, code: str) -> None:
    with pytest.raises(RenderError) as e:
        r.render(source)
    assert e.value.code == code


def test_did_you_mean(r: Renderer) -> None:
    with pytest.raises(RenderError) as e:
        r.render("{{ nnode }}")
    assert "nnodes" in (e.value.hint or "")


def test_env_reads_are_recorded(r: Renderer, monkeypatch) -> None:
    monkeypatch.setenv("TS_SECRET", "hunter2")
    assert r.render("{{ env('TS_SECRET') }}") == "hunter2"
    assert r.env_read == ["TS_SECRET"]


def test_imports_and_symlink_escape(tmp_path) -> None:
    (tmp_path / "lib").mkdir()
    (tmp_path / "lib" / "m.j2").write_text("{% macro args(n) %}--nnodes={{ n }}{% endmacro %}")
    outside = tmp_path.parent / "outside_secret.j2"
    outside.write_text("secret")
    os.symlink(outside, tmp_path / "lib" / "link.j2")
    r = Renderer({"n": 2}, str(tmp_path), {"m": "lib/m.j2"})
    assert r.render("{{ m.args(n) }}") == "--nnodes=2"
    with pytest.raises(RenderError) as e:
        r.render("{% include 'lib/link.j2' %}")
    assert e.value.code == "TS405"
    with pytest.raises(RenderError) as e:
        Renderer({}, str(tmp_path), {"x": "../outside_secret.j2"}).render("{{ x }}")
    assert e.value.code == "TS405"


def test_runaway_loop_hits_the_clock(r: Renderer) -> None:
    with pytest.raises(RenderError) as e:
        with r.deadline(0.3):
            r.render("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}")
    assert e.value.code == "TS403"


def test_a_param_named_env_hides_the_function_on_both_paths(tmp_path) -> None:
    r = Renderer({"env": {"A": "1"}, "n": 2}, str(tmp_path))
    assert r.render("{{ env }}") == {"A": "1"}
    assert r.render("{{ env | length }}-{{ n }}") == "1-2"


@pytest.mark.parametrize(
    "source",
    [
        "{{ 'x'|center(3000000000) }}",
        "{{ '%0999999999d'|format(1) }}",
        "{{ '%0999999999d' % 1 }}",
        "{{ '{:>999999999}'.format(1) }}",
        "{{ ((9**64)**64)**64 }}",
        "{{ 'x'|indent(999999999) }}",
    ],
)
def test_huge_allocations_are_refused(r: Renderer, source: str) -> None:
    with pytest.raises(RenderError) as e:
        r.render(source)
    assert e.value.code == "TS403"


def test_imports_never_read_devices_or_outside_files(tmp_path) -> None:
    os.mkfifo(tmp_path / "fifo.j2")
    r = Renderer({}, str(tmp_path))
    assert r.read_confined("fifo.j2") is None
    assert r.read_confined("/etc/passwd") is None
    assert r.read_confined("../x.j2") is None
    with pytest.raises(RenderError) as e:
        r.render("{% include 'fifo.j2' %}")
    assert e.value.code == "TS405"
