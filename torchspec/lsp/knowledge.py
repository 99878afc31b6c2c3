"""What the editor is told about names: schema fields, runtime macros, imported macros, components, schedulers.

Every answer comes from the library's own sources, so it cannot drift from
what lint and submit do: field docs from the JSON Schema, macro docs from
:class:`torchspec.specs.api.macros`'s docstring, component params from the
component's spec file, run options from the scheduler's ``run_opts()``.
"""

from __future__ import annotations

import functools
import json
import re
from dataclasses import dataclass
from typing import Any, Iterable

from torchspec.loader.schema import TEMPLATE_REF, schemas_at

Path = tuple[Any, ...]


# ---------------------------------------------------------------- the schema


def field_nodes(path: Path) -> list[dict[str, Any]]:
    """The schema nodes that describe the value at ``path`` (template alternatives left out)."""
    return [n for n in schemas_at(path) if n.get("title") != "Jinja template" and n != TEMPLATE_REF]


def properties(path: Path) -> dict[str, dict[str, Any]]:
    """The keys the mapping at ``path`` may hold: name -> its schema."""
    found: dict[str, dict[str, Any]] = {}
    for node in field_nodes(path):
        for name, sub in (node.get("properties") or {}).items():
            found.setdefault(name, sub)
    return found


def enum_values(path: Path) -> list[Any]:
    """The values the schema allows at ``path`` when it lists them (enum, const, booleans)."""
    values: list[Any] = []
    for node in field_nodes(path):
        values.extend(node.get("enum") or [])
        if "const" in node:
            values.append(node["const"])
        types = node.get("type")
        if types == "boolean" or isinstance(types, list) and "boolean" in types:
            values.extend([True, False])
    return list({json.dumps(v): v for v in values}.values())


def field_doc(path: Path) -> str | None:
    """Markdown for the field at ``path``: title, type, description, allowed values, default."""
    nodes = field_nodes(path)
    described = next((n for n in nodes if n.get("description")), None)
    if described is None:
        return None
    types = sorted({t for n in nodes for t in _types(n)})
    lines = [f"**{described.get('title') or path[-1]}**" + (f" · `{' | '.join(types)}`" if types else "")]
    lines.append(described["description"])
    values = enum_values(path)
    if values and "boolean" not in types:
        lines.append("Allowed: " + ", ".join(f"`{v}`" for v in values))
    if "default" in described:
        lines.append(f"Default: `{json.dumps(described['default'])}`")
    return "\n\n".join(lines)


def _types(node: dict[str, Any]) -> list[str]:
    t = node.get("type")
    return [] if t is None else t if isinstance(t, list) else [t]


# ---------------------------------------------------------------- runtime macros


@functools.lru_cache(maxsize=None)
def runtime_macros() -> dict[str, str]:
    """Macro name -> what fills it and when, read from :class:`torchspec.specs.api.macros`'s docstring."""
    from torchspec.specs.api import macros

    doc = re.sub(r"\s+", " ", macros.__doc__ or "").replace("``", "`")
    intro = doc.split(" 1. ")[0].strip()
    found = {}
    for name, text in re.findall(r"\d\. `(\w+)`: (.*?)(?= \d\. `|`base_img_root`|$)", doc):
        found[name] = f"{text.strip()}\n\n{intro}"
    for name in vars(macros):
        if not name.startswith("_") and isinstance(getattr(macros, name), str) and name not in found:
            found[name] = f"Deprecated, kept for old specs.\n\n{intro}"
    return found


# ---------------------------------------------------------------- imported templates


@dataclass
class TemplateName:
    """A macro (or a top-level ``{% set %}``) of an imported template file."""

    name: str
    signature: str
    doc: str
    line: int  # 0-based


_TAG = re.compile(r"\{%-?\s*(macro|set|endmacro)\b\s*([A-Za-z_][A-Za-z0-9_]*)?\s*(\([^)]*\))?")


def template_names(text: str) -> dict[str, TemplateName]:
    """The macros and top-level variables a template file defines, each with the comment just above it."""
    found: dict[str, TemplateName] = {}
    depth = 0
    for m in _TAG.finditer(text):
        kind, name, args = m.group(1), m.group(2), m.group(3)
        if kind == "endmacro":
            depth = max(0, depth - 1)
            continue
        if kind == "macro":
            depth += 1
        elif depth or name is None or name.startswith("_"):
            continue
        if name is None or name in found:
            continue
        before = text[:m.start()].rstrip()
        doc = _dedent(before[before.rfind("{#") + 2:-2].strip("-")) if before.endswith("#}") else ""
        signature = f"{name}{args or '()'}" if kind == "macro" else name
        found[name] = TemplateName(name, signature, doc, text.count("\n", 0, m.start()))
    return found


def _dedent(comment: str) -> str:
    lines = comment.strip("\n").splitlines()
    indents = [len(x) - len(x.lstrip()) for x in lines[1:] if x.strip()]
    cut = min(indents, default=0)
    return "\n".join([lines[0].strip()] + [x[cut:] for x in lines[1:]]).strip() if lines else ""


# ---------------------------------------------------------------- components


@dataclass
class Component:
    name: str
    path: str
    description: str
    params: dict[str, dict[str, Any]]
    header: str  # the spec file's leading comment block


def components() -> dict[str, str]:
    """Built-in component name -> one-line description."""
    from torchspec.components import list_builtins

    return {name: description for name, (_, description) in list_builtins().items()}


def component(name: str) -> Component | None:
    """A built-in component (or a spec file path) with its declared params, or None."""
    from torchspec.components import ComponentNotFoundError, find_component, list_builtins
    from torchspec.lsp.model import SpecModel, params_of
    from torchspec.loader.source import detect_format, read_text

    try:
        path = find_component(name)
    except ComponentNotFoundError:
        return None
    text, _ = read_text(path)
    if text is None:
        return None
    model = SpecModel.build(text, path, detect_format(path))
    header = "\n".join(line.lstrip("#").rstrip()[1:] if line.startswith("# ") else line.lstrip("#")
                       for line in _leading_comments(text))
    description = list_builtins().get(name, ("", ""))[1]
    return Component(name, path, description, params_of(model.document(0)), header.strip())


def _leading_comments(text: str) -> Iterable[str]:
    for line in text.splitlines():
        if not line.startswith("#"):
            return
        if "yaml-language-server:" not in line:
            yield line


def signature(name: str, params: dict[str, dict[str, Any]]) -> str:
    """``dist.ddp(script: string = "", j: string = "1x2", ...)``: a component as a call."""
    parts = []
    for pname, decl in params.items():
        part = f"{pname}: {decl.get('type', '?')}"
        if "default" in decl:
            part += f" = {json.dumps(decl['default'])}"
        parts.append(part)
    return f"{name}({', '.join(parts)})"


def param_doc(name: str, decl: dict[str, Any]) -> str:
    """Markdown for one declared param: type, default (or required), help, choices and bounds."""
    head = f"**param `{name}`** · `{decl.get('type', '?')}`"
    head += f" · default `{json.dumps(decl['default'])}`" if "default" in decl else " · required"
    lines = [head]
    if decl.get("help"):
        lines.append(str(decl["help"]))
    extra = [f"one of {', '.join(f'`{c}`' for c in decl['choices'])}"] if decl.get("choices") else []
    extra += [f"{bound} {decl[bound]}" for bound in ("min", "max") if bound in decl]
    if extra:
        lines.append("; ".join(extra))
    return "\n\n".join(lines)


# ---------------------------------------------------------------- schedulers


def schedulers() -> list[str]:
    from torchspec.schedulers import get_scheduler_factories

    try:
        return list(get_scheduler_factories())
    except Exception:  # noqa: BLE001 - a broken plug-in must not break the editor
        return []


@functools.lru_cache(maxsize=None)
def run_options(scheduler: str) -> dict[str, str]:
    """Run option name -> markdown (type, default, help) of ``scheduler``; empty when it cannot be loaded."""
    from torchspec.runner.api import DEFAULT_SESSION_NAME
    from torchspec.schedulers import get_scheduler_factory
    from torchspec.specs.runopts import get_type_name

    try:
        opts = get_scheduler_factory(scheduler)(DEFAULT_SESSION_NAME).run_opts()
    except Exception:  # noqa: BLE001 - an unknown or broken scheduler simply has no options to offer
        return {}
    found = {}
    for name, opt in opts:
        head = f"**run option `{name}`** ({scheduler}) · `{get_type_name(opt.opt_type)}`"
        head += " · required" if opt.is_required else f" · default `{opt.default!r}`"
        found[name] = f"{head}\n\n{opt.help}"
    return found
