"""MkDocs hooks (``hooks:`` in mkdocs.yml): the reference pages' tables, generated from the code at build time.

A page holds a marker, ``<!-- generated: NAME -->`` or ``<!-- generated: NAME ARG -->`` on a line of its
own (indented, inside a list item, the Markdown is indented as much), and :func:`on_page_markdown` puts
the Markdown that ``GENERATORS[NAME]`` returns (given ARG, such as a scheduler's name) in its place, so
nothing in those tables is typed by hand. An unknown name fails the build. :func:`on_post_build` publishes
the JSON Schema at the path its ``$id`` names (``/schemas/appdef.schema.json``).

The generators only read: the lint code catalogue (``torchspec.codes``), the ``ExitCode`` enum, the
built-in schedulers' ``run_opts()`` (each scheduler is built, no backend is contacted) and the schema.
"""

from __future__ import annotations

import json
import pathlib
import re
from typing import Any, Callable, Dict, Iterator, List, Tuple

ROOT = pathlib.Path(__file__).resolve().parent.parent
SCHEMA = ROOT / "schemas" / "appdef.schema.json"
MARKER = re.compile(r"^( *)<!-- generated: ([a-z-]+)(?: ([a-z0-9_-]+))? -->$", re.M)

#: the families of lint codes, by the code's first digit (torchspec/codes.py's docstring)
FAMILIES = {
    "0": "Reading the file",
    "1": "Syntax",
    "2": "The schema",
    "3": "Params",
    "4": "Templates",
    "5": "Semantic checks",
    "6": "What a scheduler makes of the spec (`lint --scheduler`)",
}


def prose(text: str) -> str:
    """Plain text written for a terminal (the catalogue's summaries, a run option's help) as Markdown: what
    Markdown would read as links, emphasis or HTML escaped, outside `code spans`, which stay code."""
    parts = re.split(r"(`[^`]*`)", text)
    return "".join(part if part.startswith("`") else re.sub(r"([\\\[\]*_])", r"\\\1", part).replace("<", "&lt;")
                   for part in parts)


def cell(text: Any) -> str:
    """``text`` fit for a Markdown table cell."""
    return str(text).replace("|", "\\|").replace("\n", " ")


def lint_codes() -> str:
    from torchspec.codes import CODES

    lines = ["| code | name | severity | what it finds |", "| --- | --- | --- | --- |"]
    lines += [f"| [{c.code}](#{c.code.lower()}) | `{c.name}` | {c.severity} | {cell(prose(c.summary))} |"
              for c in CODES.values()]
    family = None
    for c in CODES.values():
        if c.code[2] != family:
            family = c.code[2]
            lines += ["", f"## {FAMILIES.get(family, f'TS{family}xx')}"]
        lines += ["", f"### {c.code} `{c.name}` {{ #{c.code.lower()} }}", "",
                  f"**{c.severity}**: {prose(c.summary)}"]
        if c.why:
            lines += ["", f"**Why it matters.** {prose(c.why)}"]
        if c.fix:
            lines += ["", f"**How to fix it.** {prose(c.fix)}"]
        if c.example:
            lines += ["", "**Example** (what raises it, then its fix):", "", "```text", c.example, "```"]
    return "\n".join(lines)


def exit_codes() -> str:
    from torchspec.exit_codes import ExitCode

    names: Dict[int, List[str]] = {}
    for name, member in ExitCode.__members__.items():
        names.setdefault(int(member), []).append(f"`ExitCode.{name}`")
    lines = ["| code | name | meaning |", "| --- | --- | --- |"]
    lines += [f"| {int(code)} | {', '.join(names[int(code)])} | {cell(code.meaning)} |" for code in ExitCode]
    return "\n".join(lines)


def builtin_schedulers() -> Iterator[Tuple[str, Any]]:
    """(name, scheduler) for each scheduler torchspec itself registers, in the registry's order."""
    from torchspec.entry_points import entry_points
    from torchspec.schedulers.registry import GROUP, get_scheduler_factories
    from torchspec.version import is_own_dist

    builtin = {ep.name for ep in entry_points(GROUP) if is_own_dist(ep.dist)}
    for name, factory in get_scheduler_factories().items():
        if name in builtin:
            yield name, factory("docs")


def run_option_table(scheduler: Any) -> List[str]:
    from torchspec.specs.runopts import get_type_name

    try:
        opts = list(scheduler.run_opts())
    finally:
        scheduler.close()
    if not opts:
        return ["No run options."]
    lines = ["| option | type | default | what it does |", "| --- | --- | --- | --- |"]
    for key, opt in opts:
        default = "required" if opt.is_required else "" if opt.default is None else f"`{opt.default!r}`"
        lines.append(f"| `{key}` | `{cell(get_type_name(opt.opt_type))}` | {default} | {cell(prose(opt.help))} |")
    return lines


def run_options(only: str = "") -> str:
    """Every built-in scheduler's run options, a section each; with ``only``, that scheduler's table alone
    (a scheduler's own page)."""
    lines: List[str] = []
    for name, scheduler in builtin_schedulers():
        if only and name != only:
            scheduler.close()
            continue
        if not only:
            lines += ["", f"## `{name}` {{ #{name} }}", "", f"`torchspec runopts {name}`; set with "
                      f"`-c KEY=VALUE` or `[scheduler.{name}]` in `.torchspec.toml`.", ""]
        lines += run_option_table(scheduler)
    if only and not lines:
        raise ValueError(f"run-options: no built-in scheduler named {only!r}")
    return "\n".join(lines).strip()


def capabilities() -> str:
    """Which built-in scheduler can do what beyond submit, status and cancel (``torchspec schedulers``)."""
    from torchspec.schedulers.api import Capability

    found = list(builtin_schedulers())
    lines = ["| capability | what it lets torchspec do | " + " | ".join(f"[`{n}`]({n}.md)" for n, _ in found) + " |",
             "| --- | --- |" + " --- |" * len(found)]
    for capability in Capability:
        marks = ["yes" if s.supports(capability) else "no" for _, s in found]
        lines.append(f"| `{capability.value}` | {cell(prose(capability.doing))} | " + " | ".join(marks) + " |")
    for _, scheduler in found:
        scheduler.close()
    return "\n".join(lines)


def commands() -> str:
    """Each command with the first line of its help, linked to its entry in the CLI reference."""
    from torchspec.cli.reference import cli

    lines = ["| command | what it does |", "| --- | --- |"]
    for name, command in sorted(cli.commands.items()):
        summary = command.get_short_help_str(limit=200)
        lines.append(f"| [`torchspec {name}`](../reference/cli.md#torchspec-{name}) | {cell(prose(summary))} |")
    return "\n".join(lines)


def app_states() -> str:
    """Each app state, whether it is an end, and the exit code ``wait`` ends with on it."""
    from torchspec.exit_codes import for_app_state
    from torchspec.specs import AppState, is_terminal

    lines = ["| state | value | an end | `wait` exits with |", "| --- | --- | --- | --- |"]
    for state in AppState:
        code = for_app_state(state) if is_terminal(state) else None
        exits = f"{int(code)} (`ExitCode.{code.name}`)" if code is not None else "(still waiting)"
        lines.append(f"| `{state.name}` | {state.value} | {'yes' if is_terminal(state) else 'no'} | {exits} |")
    return "\n".join(lines)


def kubernetes_flavors() -> str:
    from torchspec.schedulers.kubernetes.flavors import carry_table

    return carry_table()


def kubernetes_run_options() -> str:
    from torchspec.schedulers.kubernetes.options import run_options_table

    return run_options_table()


def schema_type(prop: Dict[str, Any]) -> str:
    """A short type for a schema property: its type(s), enum, $ref or the alternatives of anyOf/oneOf."""
    if "$ref" in prop:
        target = prop["$ref"].rsplit("/", 1)[-1]
        return f"[{target}](#{target.lower()})"
    if "enum" in prop:
        return " \\| ".join(f"`{json.dumps(v)}`" for v in prop["enum"])
    if "const" in prop:
        return f"`{json.dumps(prop['const'])}`"
    for key in ("anyOf", "oneOf"):
        if key in prop:
            return " or ".join(schema_type(p) for p in prop[key])
    kind = prop.get("type", "any")
    kinds = kind if isinstance(kind, list) else [kind]
    if "array" in kinds and isinstance(prop.get("items"), dict):
        kinds = [f"array of {schema_type(prop['items'])}" if k == "array" else k for k in kinds]
    return " or ".join(kinds)


def schema_object(title: str, anchor: str, node: Dict[str, Any]) -> List[str]:
    lines = ["", f"## {title} {{ #{anchor} }}", ""]
    if node.get("description"):
        lines += [node["description"], ""]
    props = node.get("properties", {})
    if not props:
        return lines + [f"Type: {schema_type(node)}."]
    required = set(node.get("required", []))
    lines += ["| key | type | required | default | description |", "| --- | --- | --- | --- | --- |"]
    for key, prop in props.items():
        default = f"`{json.dumps(prop['default'])}`" if "default" in prop else ""
        note = " (deprecated)" if prop.get("deprecated") else ""
        lines.append(f"| `{key}` | {schema_type(prop)} | {'yes' if key in required else ''} | {cell(default)} "
                     f"| {cell(prop.get('description', ''))}{note} |")
    return lines


def schema() -> str:
    data = json.loads(SCHEMA.read_text())
    lines = [f"`$id`: `{data['$id']}` (the JSON Schema dialect `{data['$schema']}`)"]
    lines += schema_object("AppDef (the document)", "appdef", data)
    for name, node in data.get("$defs", {}).items():
        lines += schema_object(name, name.lower(), node)
    lines += ["", "## The whole schema { #source }", "", "```json", json.dumps(data, indent=2), "```"]
    return "\n".join(lines)


GENERATORS: Dict[str, Callable[..., str]] = {
    "lint-codes": lint_codes,
    "exit-codes": exit_codes,
    "run-options": run_options,
    "capabilities": capabilities,
    "app-states": app_states,
    "commands": commands,
    "kubernetes-flavors": kubernetes_flavors,
    "kubernetes-run-options": kubernetes_run_options,
    "schema": schema,
}


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    def generate(match: "re.Match[str]") -> str:
        indent, name = match.group(1), match.group(2)
        if name not in GENERATORS:
            from mkdocs.exceptions import PluginError

            raise PluginError(f"{page.file.src_path}: no generator named {name!r} (docs/hooks.py knows "
                           f"{', '.join(GENERATORS)})")
        text = GENERATORS[name](*filter(None, [match.group(3)]))
        return "\n".join(indent + line if line else line for line in text.splitlines())

    return MARKER.sub(generate, markdown)


def on_post_build(config: Any) -> None:
    target = pathlib.Path(config["site_dir"]) / "schemas" / SCHEMA.name
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(SCHEMA.read_bytes())
