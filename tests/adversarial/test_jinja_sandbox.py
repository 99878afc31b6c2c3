"""Templates from a hostile spec: no way out of the sandbox, no way to exhaust time or memory.

Attribute walks to Python internals are refused (TS403) and never run;
``range`` is capped; recursion is an error; every operation that could
build a huge value is refused before it runs (TS403 "too large"), a value
renders to at most ``MAX_OUTPUT`` characters and a document to
``MAX_DOCUMENT_OUTPUT``; templates read files only inside the allowed
folders, never through ``..``, absolute paths, symlinks or devices.
"""

from __future__ import annotations

import os
import time
import tracemalloc

import pytest

from input_support import SPEC, assert_clean, cli, first_error, problems
from torchspec.exit_codes import ExitCode
from torchspec.loader import LoadOptions, load_text
from torchspec.loader.template import MAX_DOCUMENT_OUTPUT, MAX_OUTPUT


def spec_with(value: str, extra: str = "") -> str:
    """SPEC whose one arg is ``value`` (a YAML single-quoted string), with ``extra`` lines after the name."""
    quoted = "'" + value.replace("'", "''") + "'"
    return SPEC.replace("name: app\n", "name: app\n" + extra).replace('["hi"]', f"[{quoted}]")


ESCAPES = [
    "{{ env.__globals__ }}",
    "{{ env.__func__.__globals__['os'].system('touch MARKER') }}",
    "{{ ''.__class__.__mro__[1].__subclasses__() }}",
    "{{ cycler.__init__.__globals__.os.popen('touch MARKER').read() }}",
    "{{ lipsum.__globals__['os'].popen('touch MARKER').read() }}",
    "{{ joiner.__init__.__globals__ }}",
    "{{ namespace.__init__.__globals__ }}",
    "{{ self.__init__.__globals__ }}",
    "{{ range.__globals__ }}",
    "{{ 'a' | attr('__class__') }}",
    "{{ [1] | map(attribute='__class__') | list }}",
    "{{ ''.format_map.__self__.__class__ }}",
    "{% set d = {} %}{{ d.update({'a': 1}) }}",
    "{% set l = [] %}{{ l.append(1) }}",
    "{{ '{0.__class__.__mro__}'.format('') }}",
]


@pytest.mark.parametrize("template", ESCAPES)
def test_attribute_walks_to_python_internals_are_refused(template: str, tmp_path) -> None:
    marker = tmp_path / "MARKER"
    d = first_error(spec_with(template.replace("MARKER", str(marker))))
    assert (d.code, d.line, d.column) == ("TS403", 6, 12), str(d)
    assert "not allowed in the template sandbox" in d.message
    assert not marker.exists()


def test_a_sandbox_escape_through_the_cli_is_exit_1_not_a_traceback(tmp_path) -> None:
    path = tmp_path / "escape.yaml"
    path.write_text(spec_with(ESCAPES[3].replace("MARKER", str(tmp_path / "MARKER"))))
    for command in (["render"], ["dryrun", "-s", "local"], ["lint"]):
        assert_clean(cli(*command, str(path)), ExitCode.SPEC_ERROR, "TS403")
    assert not (tmp_path / "MARKER").exists()


@pytest.mark.parametrize("template,message", [
    ("{{ range(10**12) | list }}", "Range too big"),
    ("{% for i in range(10**12) %}{% endfor %}", "Range too big"),
    ("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}", "recurse too deeply"),
    ("{% for x in [[1]] recursive %}{{ loop([[x]]) }}{% endfor %}", "recurse too deeply"),
])
def test_huge_ranges_and_recursion_are_errors(template: str, message: str) -> None:
    start = time.process_time()  # CPU, not the wall clock: a loaded machine only makes the latter longer
    d = first_error(spec_with(template))
    assert d.code in ("TS403", "TS404") and message in d.message, str(d)
    assert time.process_time() - start < 5


#: Each builds gigabytes in one step, or in many small ones (before: minutes, or the memory of the machine).
BOMBS = [
    "{% for i in range(99999) %}{{ 'x' * 99999 }}{% endfor %}",
    "{% for i in range(3000) %}{% for j in range(3000) %}xxxxxxxxxx{% endfor %}{% endfor %}",
    "{{ ('x' * 99999) | replace('x', 'x' * 99999) }}",
    "{{ (range(99999) | list) | join('x' * 99999) }}",
    "{{ range(99999) | map('center', 99999) | join }}",
    "{{ range(99999) | map('center', 99999) | list | length }}",
    "{% set a = 'x' * 99999 %}{% for i in range(20) %}{% set a = a ~ a %}{% endfor %}{{ a ~ a ~ a ~ a ~ a ~ a ~ a ~ a ~ a ~ a ~ a }}",
    "{% set a = 'x' * 99999 %}{% set a = a ~ a %}{% set a = a ~ a %}{% set a = a ~ a %}{% set a = a ~ a %}{{ a }}",
    "{% set a = 'x' * 99999 %}{% set a = a + a %}{% set a = a + a %}{% set a = a + a %}{% set a = a + a %}{{ a }}",
    "{{ ['x' * 99999] * 99999 }}",
    "{% set l = ['x' * 9999] * 9999 %}{{ l }}",
    "{{ 'a' ~ (['x' * 9999] * 9999) }}",
    "{{ '%s%s%s%s%s%s%s%s%s%s%s%s' % (('x' * 99999,) * 12) }}",
    "{{ '%*d' % (999999999, 1) }}",
    "{{ '{:{}}'.format(1, 999999999) }}",
    "{{ '{0}{0}{0}{0}{0}{0}{0}{0}{0}{0}{0}{0}'.format('x' * 99999) }}",
    r"{{ ('\t' * 99999).expandtabs(99999) }}",
    "{{ ('a' * 99999).translate({97: 'b' * 99999}) }}",
    "{{ ('x' * 99999).join(['a'] * 99999) }}",
    "{% set a = 2 ** 4000 %}{% set a = a * a %}{% set a = a * a %}{% set a = a * a %}{{ a * a * a }}",
    r"{{ ('a\n' * 49999) | indent(99999) }}",
    "{{ lipsum(99999, max=99999) | length }}",
    "{% set ns = namespace(a=['x' * 999] * 9999) %}{{ ns }}",
    "{{ '%0999999999d' % 1 }}",
    "{{ 'x' | center(999999999) }}",
    r"{{ (('\t' * 99).expandtabs(9999)) | wordwrap(5) }}",  # found by the fuzz test: 10 s in textwrap, uninterruptible
]


@pytest.mark.parametrize("template", BOMBS)
def test_templates_cannot_build_huge_values(template: str) -> None:
    tracemalloc.start()
    start = time.process_time()  # the work done: a busy machine (CI's eight workers on two cores) stretches wall time
    try:
        d = first_error(spec_with(template))
    finally:
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    assert d.code == "TS403" and ("too large" in d.message or "more than" in d.message), str(d)
    assert time.process_time() - start < 10  # 100,000 items under tracemalloc
    assert peak < 120 * 1024 * 1024, f"peak {peak / 2**20:.0f} MiB"


def test_many_small_pieces_are_stopped_by_the_memory_watch() -> None:
    """A block capture keeps each piece small but all of them in a list: the render's memory watch stops it."""
    start = time.process_time()  # CPU, not the wall clock: a loaded machine only makes the latter longer
    d = first_error(spec_with("{% set x %}{% for i in range(99999) %}{{ 'x' * 99999 }}{% endfor %}{% endset %}"
                              "{{ x | length }}"))
    assert d.code == "TS403" and ("memory" in d.message or "more than" in d.message), str(d)
    assert time.process_time() - start < 5


def test_a_document_renders_at_most_its_budget() -> None:
    """Each value under the limit, together over it: nine values of 900,000 characters."""
    big = "{{ 'x' * 90000 }}" * 10
    roles = "".join(f"  - name: r{i}\n    image: .\n    entrypoint: echo\n    args: [\"{big}\"]\n" for i in range(9))
    errors = [d for d in problems("name: app\nroles:\n" + roles) if d.is_error]
    assert errors and errors[0].code == "TS403" and f"more than {MAX_DOCUMENT_OUTPUT}" in errors[0].message


def test_the_fast_path_counts_too() -> None:
    """``{{ x }}`` repeated, x a 100,000-character param: substituted without Jinja, but still bounded."""
    extra = f"params:\n  x: {{type: string, default: {'y' * 100_000}}}\n"
    d = first_error(spec_with("{{ x }}" * 11, extra))
    assert d.code == "TS403" and f"more than {MAX_OUTPUT}" in d.message
    assert problems(spec_with("{{ x }}" * 9, extra)) == []


@pytest.mark.parametrize("template", ["{{ 'a\\x00b' }}", "{{ ['\\x00'] }}", "{{ '\\ud800' }}"])
def test_a_template_cannot_produce_a_nul_or_a_surrogate(template: str) -> None:
    d = first_error(spec_with(template))
    assert d.code == "TS404" and "no process can take" in d.message


@pytest.mark.parametrize("template,expected", [
    ("{% for i in range(5) %}{{ i }},{% endfor %}", "0,1,2,3,4,"),
    ("{{ range(4) | map('string') | join('-') }}", "0-1-2-3"),
    ("{{ 'a-b' | replace('-', '_') | upper }}", "A_B"),
    ("{{ '%05d' % 42 }}|{{ '{:>4}'.format('x') }}|{{ 'x' | center(5) }}", "00042|   x|  x  "),
    ("{{ ([[1, 2], [3]] | sum(start=[])) | length }}", "3"),
    ("{{ 'x' * 10 ~ 'y' }}", "xxxxxxxxxxy"),
    ("{% set ns = namespace(n=0) %}{% for i in range(3) %}{% set ns.n = ns.n + i %}{% endfor %}{{ ns.n }}", "3"),
])
def test_ordinary_templates_still_work(template: str, expected: str) -> None:
    loaded = load_text(spec_with(template), "spec.yaml")
    assert loaded.ok, loaded.all_diagnostics()
    assert loaded.documents[0].app.roles[0].args == [expected]


@pytest.fixture
def folders(tmp_path):
    """spec/ (the spec's folder) with ok.j2, and beside it secret.j2, reachable only by escaping."""
    spec = tmp_path / "spec"
    spec.mkdir()
    (spec / "ok.j2").write_text("{% macro m() %}ok{% endmacro %}")
    (tmp_path / "secret.j2").write_text("{% macro m() %}SECRET{% endmacro %}")
    (spec / "out.j2").symlink_to(tmp_path / "secret.j2")
    (spec / "in.j2").symlink_to(spec / "ok.j2")
    (spec / "dir.j2").mkdir()
    (spec / "dev.j2").symlink_to("/dev/zero")
    os.mkfifo(spec / "fifo.j2")
    return tmp_path


OUTSIDE = ["../secret.j2", "{root}/secret.j2", "out.j2", "dev.j2", "fifo.j2", "dir.j2", "/etc/passwd",
           "../../../../../../../etc/passwd", "spec/../../secret.j2", "..\\\\secret.j2", "nothere.j2"]


@pytest.mark.parametrize("name", OUTSIDE)
@pytest.mark.parametrize("how", ["include", "import", "from", "imports"])
def test_templates_read_only_inside_the_allowed_folders(folders, name: str, how: str) -> None:
    target = name.format(root=folders)
    value = {"include": f"{{% include '{target}' %}}", "import": f"{{% import '{target}' as s %}}{{{{ s.m() }}}}",
             "from": f"{{% from '{target}' import m %}}{{{{ m() }}}}", "imports": "{{ s.m() }}"}[how]
    extra = f"imports:\n  s: '{target}'\n" if how == "imports" else ""
    start = time.monotonic()
    loaded = load_text(spec_with(value, extra), str(folders / "spec" / "spec.yaml"))
    errors = [d for d in loaded.all_diagnostics() if d.is_error]
    assert errors and errors[0].code == "TS405", errors
    assert "SECRET" not in str(errors) and time.monotonic() - start < 5  # a FIFO or /dev/zero never hangs


@pytest.mark.parametrize("how", ["include", "imports"])
def test_symlinks_inside_and_template_paths_are_allowed(folders, how: str) -> None:
    extra = "imports:\n  s: in.j2\n  t: secret.j2\n" if how == "imports" else ""
    value = ("{{ s.m() }}{{ t.m() }}" if how == "imports"
             else "{% import 'in.j2' as s %}{% import 'secret.j2' as t %}{{ s.m() }}{{ t.m() }}")
    loaded = load_text(spec_with(value, extra), str(folders / "spec" / "spec.yaml"),
                       options=LoadOptions(template_paths=(str(folders),)))
    assert loaded.ok, loaded.all_diagnostics()
    assert "SECRET" in loaded.documents[0].app.roles[0].args[0]


def test_the_render_clock_is_not_lost_to_a_callback_that_swallows_it(monkeypatch) -> None:
    """The clock's signal handler runs wherever Python is when the alarm comes: inside a gc callback, a
    __del__ or a weakref callback the exception it raises is printed and dropped.  The render must still be
    stopped (found by the long fuzz run: a template ran on for 8 s past a 1 s clock)."""
    import gc
    import signal

    from torchspec.loader import template

    monkeypatch.setattr(template, "RENDER_SECONDS", 0.3)
    slept: list[bool] = []

    def slow_callback(phase: str, info: dict) -> None:
        clock_on = callable(signal.getsignal(signal.SIGALRM))
        if phase == "start" and clock_on and not slept:  # a collection during the render outlives the clock
            slept.append(True)
            time.sleep(0.5)

    def busy(rows: int) -> str:
        return ("{% for i in range(" + str(rows) + ") %}{% for j in range(1000) %}{% set x = [i, j] %}{% endfor %}"
                "{% endfor %}")

    dropped: list[object] = []
    monkeypatch.setattr("sys.unraisablehook", dropped.append)
    thresholds = gc.get_threshold()
    gc.callbacks.append(slow_callback)
    gc.set_threshold(1)  # collect at once, during the render
    try:
        start = time.monotonic()
        d = first_error(spec_with(busy(40_000)))
        took = time.monotonic() - start
        # the floor, in the same conditions (the callback has slept its once): 1/100 of that render, unclocked
        monkeypatch.setattr(template, "RENDER_SECONDS", 600)
        start = time.monotonic()
        assert load_text(spec_with(busy(400)), "spec.yaml").ok
        hundredth = time.monotonic() - start
    finally:
        gc.set_threshold(*thresholds)
        gc.callbacks.remove(slow_callback)
    assert slept and d.code == "TS403" and "longer than 0.3s" in d.message, str(d)
    assert took < 0.5 + 30 * hundredth, (took, hundredth)  # stopped, not run to its end (100 hundredths)
    assert not dropped  # the clock waited for the callback to return: nothing printed and dropped
