"""The catalogue of diagnostic codes.

Codes are stable: once published, a code keeps its meaning forever, so users
can select or ignore them in CI.  Families: TS0xx reading the file, TS1xx
syntax, TS2xx schema, TS3xx params, TS4xx templates, TS5xx semantic checks.
``torchspec lint --explain CODE`` prints the entry; README lists them all.
"""

from __future__ import annotations

from dataclasses import dataclass

from torchspec.errors import ERROR, WARNING


@dataclass(frozen=True)
class Code:
    code: str
    name: str
    severity: str
    summary: str
    why: str = ""
    fix: str = ""
    example: str = ""

    def explain(self) -> str:
        """The text ``torchspec lint --explain`` prints."""
        parts = [f"{self.code} ({self.name}, {self.severity}): {self.summary}"]
        if self.why:
            parts.append(f"Why it matters:\n  {self.why}")
        if self.fix:
            parts.append(f"How to fix it:\n  {self.fix}")
        if self.example:
            parts.append("Example:\n" + "\n".join("  " + line for line in self.example.splitlines()))
        return "\n\n".join(parts)


_ALL = [
    # reading the file
    Code("TS001", "unreadable-file", ERROR, "The file cannot be read, or is not UTF-8 text."),
    Code("TS002", "file-too-large", ERROR, "The file is larger than the configured limit."),
    Code("TS003", "empty-document", ERROR, "The file or document holds no spec."),
    # syntax
    Code("TS101", "yaml-syntax", ERROR, "The YAML is malformed."),
    Code("TS102", "toml-syntax", ERROR, "The TOML is malformed."),
    Code("TS103", "json-syntax", ERROR, "The JSON is malformed."),
    Code("TS104", "expansion-limit", ERROR, "Anchors and aliases expand to too many values, or nesting is too deep."),
    Code("TS105", "duplicate-key", ERROR, "A mapping holds the same key twice."),
    Code("TS106", "unsupported-yaml", ERROR, "A YAML tag or value type that a spec cannot hold."),
    # schema
    Code("TS201", "wrong-type", ERROR, "A value has the wrong type."),
    Code("TS202", "unknown-key", ERROR, "A key the schema does not define."),
    Code("TS203", "missing-key", ERROR, "A required key is missing."),
    Code("TS204", "invalid-choice", ERROR, "A value is not one of the allowed choices."),
    Code("TS205", "out-of-range", ERROR, "A number or a length is outside its bounds."),
    Code("TS206", "invalid-value", ERROR, "A value does not match the schema."),
    # params
    Code("TS301", "unknown-param", ERROR, "A value was given for a param the spec does not declare."),
    Code("TS302", "missing-param", ERROR, "A required param (one with no default) has no value."),
    Code("TS303", "param-type", ERROR, "A param value cannot be converted to its declared type."),
    Code("TS304", "param-constraint", ERROR, "A param value is not among its choices or outside min/max."),
    Code("TS305", "unused-param", WARNING, "A declared param is used nowhere in the spec."),
    Code("TS306", "bad-param-declaration", ERROR, "A param declaration contradicts itself."),
    Code("TS307", "bad-params-file", ERROR, "The values file given with --params-file is unusable."),
    # templates
    Code("TS401", "template-syntax", ERROR, "A Jinja template does not compile."),
    Code("TS402", "undefined-name", ERROR, "A template uses a name that is not defined."),
    Code("TS403", "template-sandbox", ERROR, "A template tried something the sandbox forbids."),
    Code("TS404", "template-error", ERROR, "A template failed while rendering."),
    Code("TS405", "bad-import", ERROR, "A file named in imports cannot be used."),
    Code("TS406", "env-not-set", ERROR, "env() read a variable that is not set and gave no default."),
    # semantic
    Code("TS501", "unknown-macro", ERROR, "A ${...} runtime macro that no scheduler knows."),
    Code("TS502", "macro-not-substituted", ERROR, "A runtime macro in a field where schedulers do not substitute it."),
    Code("TS503", "duplicate-role", ERROR, "Two roles have the same name."),
    Code("TS504", "duplicate-port", ERROR, "A role maps two port names to the same port."),
    Code("TS505", "invalid-env-name", ERROR, "An environment variable name that shells and schedulers reject."),
    Code("TS506", "unknown-named-resource", ERROR, "A resource name that no named-resource registry provides."),
    Code("TS507", "min-above-num-replicas", ERROR, "min_replicas is larger than num_replicas."),
    Code("TS508", "bad-mount", ERROR, "A mount in string form cannot be parsed."),
]

CODES: dict[str, Code] = {c.code: c for c in _ALL}
NAMES: dict[str, Code] = {c.name: c for c in _ALL}


def get(code_or_name: str) -> Code | None:
    """Find a code by ``TS202`` or by its name ``unknown-key`` (case-insensitive)."""
    key = code_or_name.strip()
    return CODES.get(key.upper()) or NAMES.get(key.lower())


def severity(code: str) -> str:
    entry = CODES.get(code)
    return entry.severity if entry else ERROR
