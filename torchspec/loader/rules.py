"""The semantic checks (TS5xx): what a schema cannot say about a spec.

The documents these rules see were rendered and then passed the strict JSON
Schema, so every rule may trust types and shapes (``roles`` is a non-empty
list of mappings, ``port_map`` values are ints, ...) and only asks whether the
values make sense together.  Each rule is a small generator registered with
:func:`rule`; :func:`check` runs them all, so one lint run reports every
problem rather than the first.  Adding a check means writing one function.
"""

from __future__ import annotations

import re
from string import Template
from typing import Any, Callable, Iterable, Iterator

from torchspec import codes
from torchspec.errors import Diagnostic, did_you_mean, did_you_mean_hint, format_path
from torchspec.loader.document import Document, Path

__all__ = ["HOSTS_MACRO", "MACROS", "SUBSTITUTED_FIELDS", "Rule", "RULES", "check", "find_macros", "fix_env_name",
           "parse_mount_string", "rule", "secret_problems"]

Rule = Callable[[Document], Iterable[Diagnostic]]

#: Runtime macros TorchX schedulers fill in (``torchx.specs.macros.Values``).
MACROS = ("img_root", "base_img_root", "app_id", "replica_id", "rank0_env")
#: ``${hosts_env:ROLE}``: the one macro with an argument, a role's name (string.Template cannot read it).
HOSTS_MACRO = "hosts_env:"
#: Role fields whose strings schedulers pass through ``macros.Values.apply``; nothing else is substituted.
SUBSTITUTED_FIELDS = ("args", "env")

RULES: list[Rule] = []


def rule(fn: Rule) -> Rule:
    """Register ``fn`` so :func:`check` runs it; rules run in the order they are defined."""
    RULES.append(fn)
    return fn


def check(doc: Document) -> list[Diagnostic]:
    """Every diagnostic every rule finds in one rendered, schema-valid document."""
    found: list[Diagnostic] = []
    for each in RULES:
        found.extend(each(doc))
    return found


def _diag(doc: Document, code: str, message: str, path: Path, hint: str | None = None,
          key: bool = False) -> Diagnostic:
    """A diagnostic with the catalogue's severity, so changing a code's severity needs no rule edits."""
    return doc.diagnostic(code, message, path, hint=hint, severity=codes.severity(code), key=key)


def _roles(doc: Document) -> Iterator[tuple[int, dict[str, Any]]]:
    roles = doc.data.get("roles") if isinstance(doc.data, dict) else None
    for index, role in enumerate(roles or []):
        if isinstance(role, dict):
            yield index, role


def _quote(text: str) -> str:
    """Quote a user's value in a message, shortened so one odd value cannot flood a report."""
    if len(text) > 80:
        text = text[:77] + "..."
    return repr(text)


# ---------------------------------------------------------------- macros (TS501, TS502)

#: ``${ app_id }``-style braces that string.Template leaves alone because the name is not an identifier.
_LOOSE_BRACES = re.compile(r"\{([^{}$]*)\}")


def find_macros(text: str) -> list[tuple[str, str]]:
    """Each ``${...}`` use in ``text`` as ``(what was written, name)``, read as string.Template reads it.

    Scanning with ``Template.pattern`` itself keeps us exact where it matters:
    ``$$`` is an escaped dollar (``$${app_id}`` is the shell's ``${app_id}``,
    not a macro) and bare ``$name`` is shell syntax that we ignore.  Braces
    Template does not accept but whose content is a macro name with stray
    spaces (``${ app_id }``, a Jinja habit) are reported too, since a
    scheduler would leave them unsubstituted.
    """
    found: list[tuple[str, str]] = []
    for match in Template.pattern.finditer(text):
        braced = match.group("braced")
        if braced is not None:
            found.append((match.group(0), braced))
        elif match.group("invalid") is not None:
            loose = _LOOSE_BRACES.match(text, match.end())
            if loose and (loose.group(1).strip().lower() in MACROS or loose.group(1).startswith(HOSTS_MACRO)):
                found.append(("$" + loose.group(0), loose.group(1)))
    return found


def _walk_strings(value: Any, path: Path) -> Iterator[tuple[Path, str, bool]]:
    """Every string under ``value`` that holds a ``$``, as ``(path, text, is_key)``.

    Keys count, since a macro there is lost too.  Strings without ``$`` cannot
    hold a macro, and skipping them here keeps the macro rules cheap on big specs.
    """
    if isinstance(value, str):
        if "$" in value:
            yield path, value, False
    elif isinstance(value, dict):
        for key, item in value.items():
            if isinstance(key, str) and "$" in key:
                yield path + (key,), key, True
            if isinstance(item, str):
                if "$" in item:
                    yield path + (key,), item, False
            else:
                yield from _walk_strings(item, path + (key,))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            if isinstance(item, str):
                if "$" in item:
                    yield path + (index,), item, False
            else:
                yield from _walk_strings(item, path + (index,))


def _is_substituted(path: Path, is_key: bool) -> bool:
    """Whether schedulers substitute macros at ``path``: an ``args`` item or an ``env`` value of a role."""
    if is_key or len(path) != 4 or path[0] != "roles":
        return False
    return path[2] in SUBSTITUTED_FIELDS


def _macro_strings(doc: Document) -> Iterator[tuple[Path, str, bool]]:
    """The strings that macros may appear in: every role string, the app name and the app metadata.

    ``params`` and ``imports`` are skipped: they are not templated, and a
    param's value only reaches the app through a template, where it is checked.
    """
    data = doc.data if isinstance(doc.data, dict) else {}
    if isinstance(data.get("name"), str) and "$" in data["name"]:
        yield ("name",), data["name"], False
    if isinstance(data.get("metadata"), dict):
        yield from _walk_strings(data["metadata"], ("metadata",))
    for index, role in _roles(doc):
        yield from _walk_strings(role, ("roles", index))


def _field_name(path: Path, is_key: bool) -> str:
    where = format_path(path)
    return f"the key {where}" if is_key else where


@rule
def unknown_macro(doc: Document) -> Iterator[Diagnostic]:
    """TS501: a misspelt macro (``${app_idd}``) reaches the job verbatim and breaks it at run time.

    Only names close to a real macro are reported: ``${HOME}`` or a loop's
    ``${i}`` in a ``bash -c`` line are shell variables that schedulers pass
    through untouched, and flagging them would teach users to ignore TS501.
    """
    roles = [role["name"] for _, role in _roles(doc) if isinstance(role.get("name"), str)]
    for path, text, is_key in _macro_strings(doc):
        for written, name in find_macros(text):
            if name.startswith(HOSTS_MACRO):
                role = name[len(HOSTS_MACRO):]
                if role not in roles:
                    yield _diag(doc, "TS501", f"{_quote(written)} names no role of the app", path,
                                did_you_mean_hint(role, roles, "the app's roles"), key=is_key)
                continue
            if name in MACROS:
                continue
            guess = did_you_mean(name.strip(), MACROS)
            if not guess:
                continue  # ${HOME}, ${i}: a shell variable, which schedulers pass through untouched
            hint = f"did you mean '${{{guess}}}'? (for a shell variable, write '$${{{name}}}')"
            yield _diag(doc, "TS501", f"unknown macro {_quote(written)} in {_quote(text)}", path, hint, key=is_key)


@rule
def macro_not_substituted(doc: Document) -> Iterator[Diagnostic]:
    """TS502: schedulers substitute macros in ``args`` items and ``env`` values only; elsewhere they stay literal."""
    for path, text, is_key in _macro_strings(doc):
        if _is_substituted(path, is_key):
            continue
        for written, name in find_macros(text):
            if name not in MACROS and not name.startswith(HOSTS_MACRO):
                continue
            if is_key and len(path) == 4 and path[2] == "env":
                hint = (f"schedulers substitute macros in env values, not names: use a fixed name and put "
                        f"'{written}' in its value")
            else:
                hint = (f"schedulers substitute macros only in args items and env values: move '{written}' into "
                        f"args (e.g. '--flag={written}') or an env value")
            yield _diag(doc, "TS502", f"macro {_quote(written)} in {_field_name(path, is_key)} is never "
                        f"substituted: {_quote(text)}", path, hint, key=is_key)


# ---------------------------------------------------------------- roles and ports (TS503, TS504)

@rule
def duplicate_role(doc: Document) -> Iterator[Diagnostic]:
    """TS503: role names key replicas, logs and status; two roles with one name collide in every scheduler."""
    first: dict[str, int] = {}
    names = {role.get("name") for _, role in _roles(doc)}
    for index, role in _roles(doc):
        name = role.get("name")
        if not isinstance(name, str):
            continue
        if name not in first:
            first[name] = index
            continue
        suffix = 2
        while f"{name}-{suffix}" in names:
            suffix += 1
        names.add(f"{name}-{suffix}")
        yield _diag(doc, "TS503", f"role name {_quote(name)} is already used by roles[{first[name]}]",
                    ("roles", index, "name"), f"give each role its own name, e.g. '{name}-{suffix}'")
    yield from _same_hosts_env(doc)


def _same_hosts_env(doc: Document) -> Iterator[Diagnostic]:
    """TS503 too: two role names that give one ``TORCHSPEC_HOSTS_<ROLE>`` (``a-b``, ``a_b``); one role's hosts
    would be lost, so every scheduler refuses them."""
    named = [(index, role["name"]) for index, role in _roles(doc) if isinstance(role.get("name"), str)]
    if len(named) < 2:
        return  # lint of a one-role spec never imports the spec objects (test_lint_start_up_stays_light)
    from torchspec.specs.api import HOSTS_CLASH_HINT, hosts_env_clashes

    for position, message in hosts_env_clashes([name for _, name in named]):
        yield _diag(doc, "TS503", message, ("roles", named[position][0], "name"), HOSTS_CLASH_HINT)


@rule
def duplicate_port(doc: Document) -> Iterator[Diagnostic]:
    """TS504: two port names on one port cannot both be bound; the second service never starts."""
    for index, role in _roles(doc):
        port_map = role.get("port_map")
        if not isinstance(port_map, dict):
            continue
        taken: dict[int, str] = {}
        for name, port in port_map.items():
            if not isinstance(port, int):
                continue
            if port in taken:
                free = _free_port(port, set(port_map.values()))
                yield _diag(doc, "TS504", f"port {port} of {_quote(name)} is already mapped to "
                            f"{_quote(taken[port])}", ("roles", index, "port_map", name),
                            f"give {_quote(name)} a port of its own, e.g. {free}, or drop one of the two names")
            else:
                taken[port] = name


def _free_port(port: int, used: set[int]) -> int:
    """The next port after ``port`` that the role does not use yet, to suggest in a hint."""
    candidate = port + 1
    while candidate in used or candidate > 65535:
        candidate = 1024 if candidate > 65535 else candidate + 1
    return candidate


# ---------------------------------------------------------------- env names (TS505)

_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def fix_env_name(name: str) -> str:
    """The nearest valid environment variable name: bad characters become ``_``, a leading digit gets one."""
    fixed = re.sub(r"[^A-Za-z0-9_]", "_", name)
    if not fixed or fixed[0].isdigit():
        fixed = "_" + fixed
    return fixed


@rule
def invalid_env_name(doc: Document) -> Iterator[Diagnostic]:
    """TS505: shells cannot read such a name and Kubernetes and Docker reject or drop it."""
    for index, role in _roles(doc):
        env = role.get("env")
        if not isinstance(env, dict):
            continue
        for name in env:
            if not isinstance(name, str) or _ENV_NAME.fullmatch(name) or find_macros(name):
                continue  # names holding a macro are reported by TS501/TS502 instead
            what = "is empty" if not name else "must start with a letter or '_' and hold only letters, digits and '_'"
            yield _diag(doc, "TS505", f"env name {_quote(name)} {what}", ("roles", index, "env", name),
                        f"rename it to {fix_env_name(name)!r}", key=True)


# ---------------------------------------------------------------- named resources (TS506)

@rule
def unknown_named_resource(doc: Document) -> Iterator[Diagnostic]:
    """TS506: a named resource is looked up at submit time; a typo there fails the job only when launched."""
    for index, role in _roles(doc):
        resource = role.get("resource")
        if not isinstance(resource, str):
            continue
        from torchspec.specs.named_resources import named_resources

        if resource in named_resources:
            continue
        known = sorted(str(n) for n in named_resources)
        guess = did_you_mean(resource, known)
        if guess:
            hint = f"did you mean {guess!r}?"
        elif known:
            shown = ", ".join(known[:8]) + (", ..." if len(known) > 8 else "")
            hint = f"registered names: {shown}; or give the resource as a mapping (cpu, gpu, memMB)"
        else:
            hint = "no named resources are registered; give the resource as a mapping (cpu, gpu, memMB)"
        yield _diag(doc, "TS506", f"unknown named resource {_quote(resource)}", ("roles", index, "resource"), hint)


# ---------------------------------------------------------------- replicas (TS507)

@rule
def min_above_num_replicas(doc: Document) -> Iterator[Diagnostic]:
    """TS507: a job that needs more replicas to start than it ever asks for can never start."""
    for index, role in _roles(doc):
        low = role.get("min_replicas")
        high = role.get("num_replicas", 1)
        if not isinstance(low, int) or not isinstance(high, int) or low <= high:
            continue
        yield _diag(doc, "TS507", f"min_replicas {low} is larger than num_replicas {high}",
                    ("roles", index, "min_replicas"),
                    f"set min_replicas to at most {high}, or num_replicas to at least {low}")


# ---------------------------------------------------------------- mounts (TS508)

#: TorchX's ``parse_mounts`` keys, each mapped to what it means, plus ``permissions`` as the mapping form spells it.
MOUNT_KEYS = {
    "type": "type",
    "src": "src", "source": "src",
    "dst": "dst", "destination": "dst", "target": "dst",
    "readonly": "readonly", "read_only": "readonly",
    "perm": "perm", "permissions": "perm",
}
MOUNT_TYPES = ("bind", "volume", "device")
_MOUNT_NEEDS = {"bind": ("src", "dst"), "volume": ("src", "dst"), "device": ("src",)}
_MOUNT_ALLOWS = {"bind": {"src", "dst", "readonly"}, "volume": {"src", "dst", "readonly"},
                 "device": {"src", "dst", "perm"}}
_MOUNT_EXAMPLE = {"bind": "type=bind,src=/host/path,dst=/container/path[,readonly]",
                  "volume": "type=volume,src=<volume name>,dst=/container/path[,readonly]",
                  "device": "type=device,src=/dev/<device>[,dst=/dev/<device>][,perm=rwm]"}
_MOUNT_FORMS = "; ".join(_MOUNT_EXAMPLE.values())


def parse_mount_string(text: str) -> list[tuple[str, str]]:
    """Every problem with one TorchX mount string, as ``(message, hint)``; empty when it parses.

    Stricter than TorchX's ``parse_mounts`` where TorchX silently does the
    unexpected: ``readonly=false`` still mounts read-only there, a repeated
    key keeps only the last value, and options of another mount type are
    dropped.  A string may hold several mounts, each starting at ``type=``.
    """
    if not text.strip():
        return [("the mount string is empty", f"write one of: {_MOUNT_FORMS}")]
    problems: list[tuple[str, str]] = []
    mounts: list[dict[str, tuple[str, str]]] = []  # canonical key -> (key as written, value)
    for part in text.split(","):
        written, eq, value = part.partition("=")
        key = MOUNT_KEYS.get(written)
        if not part:
            problems.append((f"empty option (',,' or a trailing ',') in {_quote(text)}", "remove the stray ','"))
            continue
        if key is None:
            problems.append((f"unknown mount option {_quote(written)} in {_quote(text)}", _unknown_key_hint(written)))
            continue
        if key == "type":
            mounts.append({})
        elif not mounts:
            problems.append((f"{_quote(part)} comes before 'type=' in {_quote(text)}",
                             f"start each mount with its type: {_MOUNT_FORMS}"))
            continue
        current = mounts[-1]
        if key in current:
            problems.append((f"{_quote(current[key][0])} and {_quote(written)} both set {key} in one mount of "
                             f"{_quote(text)}", "keep one; TorchX silently uses the last"))
        if key == "readonly":
            if eq and value.lower() != "true":
                problems.append((f"{_quote(part)} in {_quote(text)}: readonly is a flag and takes no value",
                                 "write 'readonly' to mount read-only, or leave it out for read-write "
                                 "(TorchX treats any readonly option, even readonly=false, as read-only)"))
        elif not value:
            wanted = " or ".join(f"type={t}" for t in MOUNT_TYPES) if key == "type" else f"{written}=<value>"
            problems.append((f"{_quote(written)} has no value in {_quote(text)}", f"write {wanted}"))
        current[key] = (written, value)
    for mount in mounts:
        problems.extend(_check_mount(mount, text))
    return problems


def _unknown_key_hint(written: str) -> str:
    if written.strip() in MOUNT_KEYS:
        return f"remove the spaces around {written.strip()!r}; options are separated by ',' alone"
    guess = did_you_mean(written, MOUNT_KEYS)
    return f"did you mean {guess!r}?" if guess else f"options: {', '.join(MOUNT_KEYS)}"


def _check_mount(mount: dict[str, tuple[str, str]], text: str) -> Iterator[tuple[str, str]]:
    """What is missing from, or foreign to, one parsed mount of ``text``."""
    kind = mount["type"][1]
    if not kind:
        return  # already reported as an option without a value
    if kind not in MOUNT_TYPES:
        guess = did_you_mean(kind, MOUNT_TYPES)
        yield (f"mount type {_quote(kind)} in {_quote(text)} is not one of: {', '.join(MOUNT_TYPES)}",
               f"did you mean 'type={guess}'?" if guess else f"forms: {_MOUNT_FORMS}")
        return
    for needed in _MOUNT_NEEDS[kind]:
        if needed not in mount:
            yield (f"{kind} mount in {_quote(text)} has no {needed}=", f"write {_MOUNT_EXAMPLE[kind]}")
    for extra in sorted(set(mount) - _MOUNT_ALLOWS[kind] - {"type"}):
        yield (f"{_quote(mount[extra][0])} does not apply to a {kind} mount in {_quote(text)}",
               f"remove it; a {kind} mount takes: {_MOUNT_EXAMPLE[kind]}")
    perm = mount.get("perm", ("", ""))[1]
    if kind == "device" and perm:
        bad = sorted(set(perm) - set("rwm"))
        if bad:
            yield (f"device permissions {_quote(perm)} in {_quote(text)} hold {', '.join(map(repr, bad))}; "
                   "only r, w and m are allowed",
                   "use some of r (read), w (write), m (mknod), e.g. perm=rw")


@rule
def bad_mount(doc: Document) -> Iterator[Diagnostic]:
    """TS508: TorchX parses mount strings only when the job is built; catch the mistake while editing."""
    for index, role in _roles(doc):
        mounts = role.get("mounts")
        if not isinstance(mounts, list):
            continue
        for position, mount in enumerate(mounts):
            if not isinstance(mount, str):
                continue
            for message, hint in parse_mount_string(mount):
                yield _diag(doc, "TS508", message, ("roles", index, "mounts", position), hint)


# ---------------------------------------------------------------- secrets (TS509)

#: A Kubernetes object name (a DNS subdomain), and a Secret's or ConfigMap's key.
_SECRET_NAME = re.compile(r"[a-z0-9]([-a-z0-9.]*[a-z0-9])?")
_SECRET_KEY = re.compile(r"[-._a-zA-Z0-9]+")
_SECRET_TARGETS = ("env", "env_prefix", "mount")


def secret_problems(item: dict[str, Any]) -> Iterator[tuple[tuple[str, ...], str, str]]:
    """Every problem of one ``secrets`` item, as ``(key of the item it is at, or (), message, hint)``."""
    name, key = item.get("name"), item.get("key")
    targets = [t for t in _SECRET_TARGETS if t in item]
    what = f"secret {name!r}" if name else "a secret reference"
    if not name:
        yield (), f"{what} has no name", "name the Secret (or ConfigMap) to read, e.g. 'name: hf-token'"
    elif len(name) > 253 or not _SECRET_NAME.fullmatch(name):
        yield ("name",), f"secret name {_quote(name)} is not a Kubernetes object name", \
            "use lower-case letters, digits, '-' and '.', starting and ending with a letter or digit"
    if not targets:
        yield (), f"{what} says neither env, env_prefix nor mount", \
            "add 'env: VARIABLE' (with key), 'env_prefix: PREFIX' (every key) or 'mount: /folder' (files)"
    elif len(targets) > 1:
        yield (targets[1],), f"{what} has both {targets[0]} and {targets[1]}", "write one reference for each use"
    if "env" in item:
        if not key:
            yield (), f"{what} for the variable {item['env']!r} has no key", \
                f"name the key whose value {item['env']} gets, e.g. 'key: token' (env_prefix takes every key)"
        if not _ENV_NAME.fullmatch(item["env"]):
            yield ("env",), f"env name {_quote(item['env'])} is not a valid variable name", \
                f"rename it to {fix_env_name(item['env'])!r}"
    if "env_prefix" in item:
        if key:
            yield ("key",), f"{what}: env_prefix takes every key of the secret, not only {key!r}", \
                "write 'env: VARIABLE' with the key instead, or drop the key"
        if item["env_prefix"] and not _ENV_NAME.fullmatch(item["env_prefix"]):
            yield ("env_prefix",), f"env_prefix {_quote(item['env_prefix'])} cannot start a variable name", \
                f"use {fix_env_name(item['env_prefix'])!r}"
    if "mount" in item and not item["mount"].startswith("/"):
        yield ("mount",), f"mount folder {_quote(item['mount'])} is not absolute", f"write '/{item['mount']}'"
    if key and not _SECRET_KEY.fullmatch(key):
        yield ("key",), f"key {_quote(key)} is not a Secret or ConfigMap key", \
            "use letters, digits, '-', '_' and '.' only"


@rule
def bad_secret(doc: Document) -> Iterator[Diagnostic]:
    """TS509: a reference without its name or key, or one Kubernetes would refuse, fails only when a replica
    starts; a variable set twice (by env and a secret, or two secrets) keeps one value silently."""
    for index, role in _roles(doc):
        items = role.get("secrets")
        if not isinstance(items, list):
            continue
        taken = {name: ("roles", index, "env", name) for name in role.get("env") or {}} \
            if isinstance(role.get("env"), dict) else {}
        for position, item in enumerate(items):
            if not isinstance(item, dict):
                continue
            at = ("roles", index, "secrets", position)
            for where, message, hint in secret_problems(item):
                yield _diag(doc, "TS509", message, at + where, hint)
            for field, kind in (("env", "variable"), ("mount", "mount folder")):
                value = item.get(field)
                if not isinstance(value, str):
                    continue
                if (field, value) in taken or (field == "env" and value in taken):
                    yield _diag(doc, "TS509", f"the {kind} {value!r} is set twice in role {role.get('name')!r}",
                                at + (field,), "keep one: a replica would get only one of the two values")
                taken[(field, value) if field == "mount" else value] = at


# ---------------------------------------------------------------- depends_on (TS510)

@rule
def bad_depends_on(doc: Document) -> Iterator[Diagnostic]:
    """TS510: a role waiting for a role the app lacks, for itself, or in a cycle would never start."""
    if not any(role.get("depends_on") for _, role in _roles(doc)):
        return  # most specs: lint imports no spec objects for them
    from torchspec.specs.dependencies import RoleDependency, dependency_problems

    roles: list[tuple[str, list[RoleDependency]]] = []
    where: list[int] = []
    for index, role in _roles(doc):
        items = role.get("depends_on")
        deps = [RoleDependency(item) if isinstance(item, str) else RoleDependency(str(item.get("role")),
                                                                                 str(item.get("when", "finished")))
                for item in (items if isinstance(items, list) else []) if isinstance(item, (str, dict))]
        roles.append((str(role.get("name")), deps))
        where.append(index)
    for position, (at, message, hint) in dependency_problems(roles):
        items = doc.data["roles"][where[position]].get("depends_on") or []
        if at[0] == "depends_on" and len(at) > 2 and isinstance(items[at[1]], str):
            at = at[:2]  # a name alone: the item itself is the role
        yield _diag(doc, "TS510", message, ("roles", where[position]) + at, hint)
