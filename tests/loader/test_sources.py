"""Files come through a Source (the disk, or a git commit for diff); the loader reports which files a spec used."""

from __future__ import annotations

import os
import pathlib

from torchspec.loader import LoadOptions, load_file

SPEC = """name: "{{ m.name() }}"
imports:
  m: lib/macros.j2
params:
  n: {type: integer}
roles:
  - name: r
    image: img
    entrypoint: echo
    args: ["{% include 'lib/arg.j2' %}"]
    num_replicas: "{{ n }}"
"""


class DictSource:
    """Files held in memory, by absolute path, as a git commit would serve them."""

    def __init__(self, files: dict[str, str]) -> None:
        self.files = {os.path.normpath(k): v.encode() for k, v in files.items()}
        self.reads: list[str] = []

    def read(self, path: str, limit: int) -> bytes:
        path = os.path.normpath(path)
        if path not in self.files:
            raise FileNotFoundError(2, "No such file or directory", path)
        self.reads.append(path)
        return self.files[path][:limit]

    def realpath(self, path: str) -> str:
        return os.path.normpath(os.path.abspath(path))

    def exists(self, path: str) -> bool:
        path = os.path.normpath(path)
        return path in self.files or any(f.startswith(path + os.sep) for f in self.files)

    def is_file(self, path: str) -> bool:
        return os.path.normpath(path) in self.files

    def size(self, path: str) -> int:
        return len(self.files[os.path.normpath(path)])

    def stamp(self, path: str) -> object:
        return None


def _files(root: str, name: str = "job", arg: str = "--fast") -> dict[str, str]:
    return {f"{root}/job.yaml": SPEC,
            f"{root}/lib/macros.j2": f"{{% macro name() %}}{name}{{% endmacro %}}",
            f"{root}/lib/arg.j2": arg,
            f"{root}/values.yaml": "n: 3\n"}


def test_a_spec_loads_from_a_source_with_its_imports_includes_and_params_file(tmp_path: pathlib.Path) -> None:
    root = str(tmp_path / "not-on-disk")
    source = DictSource(_files(root, name="from-git"))
    loaded = load_file(f"{root}/job.yaml", LoadOptions(params_file=f"{root}/values.yaml", source=source))
    assert loaded.ok, loaded.all_diagnostics()
    doc, = loaded.documents
    assert doc.app is not None and doc.app.name == "from-git"
    assert doc.app.roles[0].args == ["--fast"] and doc.app.roles[0].num_replicas == 3
    assert doc.dependencies == sorted([f"{root}/lib/arg.j2", f"{root}/lib/macros.j2", f"{root}/values.yaml"])
    assert not os.path.exists(root)


def test_dependencies_are_reported_when_templates_come_from_the_cache(tmp_path: pathlib.Path) -> None:
    """Jinja caches loaded templates; every document that uses one still names it."""
    root = str(tmp_path / "mem")
    source = DictSource(_files(root))
    first = load_file(f"{root}/job.yaml", LoadOptions(params={"n": "1"}, source=source)).documents[0]
    again = load_file(f"{root}/job.yaml", LoadOptions(params={"n": "1"}, source=source)).documents[0]
    assert first.dependencies == again.dependencies == [f"{root}/lib/arg.j2", f"{root}/lib/macros.j2"]


def test_a_spec_on_disk_names_its_dependencies_and_a_failed_render_still_does(tmp_path: pathlib.Path) -> None:
    for path, text in _files(str(tmp_path)).items():
        pathlib.Path(path).parent.mkdir(parents=True, exist_ok=True)
        pathlib.Path(path).write_text(text)
    real = os.path.realpath(tmp_path)
    doc = load_file(str(tmp_path / "job.yaml"), LoadOptions(params={"n": "2"})).documents[0]
    assert doc.ok and doc.dependencies == [f"{real}/lib/arg.j2", f"{real}/lib/macros.j2"]
    (tmp_path / "lib" / "arg.j2").write_text("{{ nope }}")
    doc = load_file(str(tmp_path / "job.yaml"), LoadOptions(params={"n": "2"})).documents[0]
    assert not doc.ok and f"{real}/lib/arg.j2" in doc.dependencies


def test_stand_ins_fill_required_params_and_still_build_the_app(tmp_path: pathlib.Path) -> None:
    root = str(tmp_path / "mem")
    doc = load_file(f"{root}/job.yaml", LoadOptions(stand_ins=True, source=DictSource(_files(root)))).documents[0]
    assert doc.ok and doc.app is not None and doc.app.roles[0].num_replicas == 1
    assert doc.stand_ins == ["n"]


def test_a_source_keeps_imports_inside_the_spec_folder(tmp_path: pathlib.Path) -> None:
    root = str(tmp_path / "mem")
    files = _files(root)
    files[f"{root}/job.yaml"] = SPEC.replace("lib/arg.j2", "../outside.j2")
    files[f"{tmp_path}/outside.j2"] = "secret"
    loaded = load_file(f"{root}/job.yaml", LoadOptions(params={"n": "1"}, source=DictSource(files)))
    assert not loaded.ok and "TS405" in {d.code for d in loaded.all_diagnostics()}


def test_a_template_edited_between_two_loads_in_one_process_is_seen(tmp_path: pathlib.Path) -> None:
    """Compiled templates are cached per process (the language server, lint of many files): the cache must
    notice an edit, even one that keeps the file's size and puts its modification time back (a tool that
    restores times, or two saves within one tick of a coarse file-system clock)."""
    for path, text in _files(str(tmp_path)).items():
        pathlib.Path(path).parent.mkdir(parents=True, exist_ok=True)
        pathlib.Path(path).write_text(text)
    arg = tmp_path / "lib" / "arg.j2"
    arg.write_text("--aaaa")
    before = os.stat(arg)
    doc = load_file(str(tmp_path / "job.yaml"), LoadOptions(params={"n": "1"})).documents[0]
    assert doc.app is not None and doc.app.roles[0].args == ["--aaaa"]
    arg.write_text("--bbbb")  # same size
    os.utime(arg, ns=(before.st_atime_ns, before.st_mtime_ns))
    doc = load_file(str(tmp_path / "job.yaml"), LoadOptions(params={"n": "1"})).documents[0]
    assert doc.app is not None and doc.app.roles[0].args == ["--bbbb"]
    replaced = tmp_path / "lib" / "arg.j2.new"  # an editor's atomic save: a new file renamed over the old
    replaced.write_text("--cccc")
    os.utime(replaced, ns=(before.st_atime_ns, before.st_mtime_ns))
    os.replace(replaced, arg)
    doc = load_file(str(tmp_path / "job.yaml"), LoadOptions(params={"n": "1"})).documents[0]
    assert doc.app is not None and doc.app.roles[0].args == ["--cccc"]
