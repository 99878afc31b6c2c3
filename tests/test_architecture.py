"""The shape docs/architecture.md promises, checked: layers point one way, modules and functions stay small.

Every ``import`` in the package counts, including the ones inside functions
(lazy imports are still dependencies) and under ``TYPE_CHECKING``.
"""

from __future__ import annotations

import ast
import pathlib

import pytest

PACKAGE = pathlib.Path(__file__).resolve().parent.parent / "torchspec"

#: Lowest first.  A module may import its own layer and the layers below it, never one above.
LAYERS: list[tuple[str, tuple[str, ...]]] = [
    ("foundation", ("torchspec", "torchspec.version", "torchspec.errors", "torchspec.exit_codes", "torchspec.codes",
                    "torchspec.terminal", "torchspec.entry_points", "torchspec.redaction", "torchspec.install",
                    "torchspec.times")),
    ("specs", ("torchspec.specs", "torchspec.workspace", "torchspec.tracker")),
    # TorchX's specs.finder and specs.builders find and call components: the loader's work, where TorchX users
    # import them from
    ("loader", ("torchspec.loader", "torchspec.config", "torchspec.components", "torchspec.specs.finder",
                "torchspec.specs.builders")),
    ("lint", ("torchspec.lint", "torchspec.report")),
    ("schedulers", ("torchspec.schedulers",)),
    ("runner", ("torchspec.runner",)),
    ("gitops", ("torchspec.gitops", "torchspec.tsm")),
    ("scaffold", ("torchspec.scaffold",)),
    ("front ends", ("torchspec.cli", "torchspec.__main__", "torchspec.lsp", "torchspec.ui")),
]

MAX_MODULE_LINES = 700
MAX_FUNCTION_LINES = 80


def module_name(path: pathlib.Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def layer_of(module: str) -> int:
    """The index of the layer a module belongs to: the longest matching prefix wins."""
    best, best_len = -1, -1
    for index, (_, prefixes) in enumerate(LAYERS):
        for prefix in prefixes:
            # the package itself is only itself: every module must be placed by name
            inside = module.startswith(prefix + ".") and prefix != "torchspec"
            if (module == prefix or inside) and len(prefix) > best_len:
                best, best_len = index, len(prefix)
    return best


def imported_modules(path: pathlib.Path, module: str) -> list[tuple[int, str]]:
    """(line, module) of every torchspec module ``path`` imports."""
    tree = ast.parse(path.read_text(), str(path))
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.extend((node.lineno, alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[:len(base) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            found.append((node.lineno, target))
            # ``from torchspec import codes`` imports the module torchspec.codes, not the package
            found.extend((node.lineno, f"{target}.{alias.name}") for alias in node.names)
    return [(line, name) for line, name in found if name == "torchspec" or name.startswith("torchspec.")]


def sources() -> list[pathlib.Path]:
    return sorted(PACKAGE.rglob("*.py"))


def test_every_module_belongs_to_a_layer() -> None:
    unplaced = [module_name(p) for p in sources() if layer_of(module_name(p)) < 0]
    assert unplaced == []


def test_layers_point_one_way() -> None:
    upward = []
    for path in sources():
        module = module_name(path)
        own = layer_of(module)
        for line, target in imported_modules(path, module):
            if not (PACKAGE.parent / (target.replace(".", "/") + ".py")).exists() and \
                    not (PACKAGE.parent / target.replace(".", "/") / "__init__.py").exists():
                continue  # a name imported from a package, not a module
            if layer_of(target) > own:
                upward.append(f"{path.relative_to(PACKAGE.parent)}:{line}: {module} ({LAYERS[own][0]}) imports "
                              f"{target} ({LAYERS[layer_of(target)][0]})")
    assert upward == []


def test_no_backend_imports_another() -> None:
    backends = [p.name for p in (PACKAGE / "schedulers").iterdir() if (p / "__init__.py").exists()]
    crossing = []
    for name in backends:
        for path in (PACKAGE / "schedulers" / name).rglob("*.py"):
            for line, target in imported_modules(path, module_name(path)):
                other = target.split(".")[2] if target.count(".") >= 2 else ""
                if target.startswith("torchspec.schedulers.") and other in backends and other != name:
                    crossing.append(f"{path.relative_to(PACKAGE.parent)}:{line} imports {target}")
    assert crossing == []


#: The front ends, and the one module of each other front end a CLI command may import: the command that
#: starts it (``torchspec ui`` serves the dashboard, ``torchspec lsp`` the language server).
FRONT_ENDS = ("torchspec.cli", "torchspec.ui", "torchspec.lsp")
STARTERS = {"torchspec.cli.ui_cmd": "torchspec.ui", "torchspec.cli.lsp_cmd": "torchspec.lsp"}


def test_front_ends_never_import_each_other() -> None:
    """What two front ends share lives a floor lower; the CLI only starts the others."""
    crossing = []
    for path in sources():
        module = module_name(path)
        own = next((f for f in FRONT_ENDS if module == f or module.startswith(f + ".")), None)
        if own is None:
            continue
        for line, target in imported_modules(path, module):
            other = next((f for f in FRONT_ENDS if target == f or target.startswith(f + ".")), None)
            if other not in (None, own) and STARTERS.get(module) != other:
                crossing.append(f"{path.relative_to(PACKAGE.parent)}:{line}: {module} imports {target}")
    assert crossing == []


@pytest.mark.parametrize("path", sources(), ids=lambda p: str(p.relative_to(PACKAGE.parent)))
def test_modules_and_functions_stay_small(path: pathlib.Path) -> None:
    text = path.read_text()
    assert text.count("\n") <= MAX_MODULE_LINES, f"{path.name} has {text.count(chr(10))} lines"
    long = [f"{node.name} (line {node.lineno}): {node.end_lineno - node.lineno + 1} lines"
            for node in ast.walk(ast.parse(text))
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
            and node.end_lineno is not None and node.end_lineno - node.lineno + 1 > MAX_FUNCTION_LINES]
    assert long == []


_BLOCK_SDKS = '''
import importlib.abc, sys

class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("docker", "kubernetes", "kubernetes_validate", "ray"):
            raise ImportError(f"{name} is blocked by the test")
        return None

sys.meta_path.insert(0, Block())
'''


def test_every_backend_module_imports_and_the_cli_works_without_the_sdks(tmp_path: pathlib.Path) -> None:
    """docker, kubernetes and ray are imported only by the commands that talk to them."""
    import subprocess
    import sys

    examples = PACKAGE.parent / "examples"
    script = _BLOCK_SDKS + f'''
import pkgutil, importlib, io, contextlib
import torchspec.schedulers
for info in pkgutil.walk_packages(torchspec.schedulers.__path__, "torchspec.schedulers."):
    importlib.import_module(info.name)
from torchspec.cli.main import main
for argv in (["--help"], ["lint", {str(examples / "hello.yaml")!r}], ["render", {str(examples / "ddp.yaml")!r}],
             ["dryrun", "-s", "local", {str(examples / "hello.yaml")!r}],
             # a dry run needs no SDK, so the core install (no docker, kubernetes extra) has them
             ["dryrun", "-s", "docker", {str(examples / "ddp.yaml")!r}],
             ["dryrun", "-s", "kubernetes", {str(examples / "ddp.yaml")!r}],
             ["diff", "-s", "kubernetes", {str(examples / "hello.yaml")!r}, {str(examples / "hello.yaml")!r}]):
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        try:
            main(argv)
        except SystemExit as e:
            assert e.code == 0, (argv, e.code)
    assert out.getvalue().strip(), argv
assert not any(m.split(".")[0] in ("docker", "kubernetes", "ray") for m in sys.modules)
print("ok")
'''
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=tmp_path,
                       env={**__import__("os").environ, "TORCHSPEC_HOME": str(tmp_path / "home")})
    assert r.returncode == 0 and r.stdout.strip().endswith("ok"), r.stderr
