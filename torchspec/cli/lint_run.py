"""``torchspec lint`` without click: the command's work, for the click command and for ``main``'s fast path.

``torchspec lint FILE...`` (paths only, no options) is run from here without
importing click at all (~20 ms of a lint of one file, a quarter of it); any
option goes through the click command in ``lint_cmd.py``, which calls
:func:`run_lint` with what it parsed.  The defaults below are the options'.
"""

from __future__ import annotations

import sys

from torchspec.cli.options import parse_params, split_commas


def run_lint(paths: tuple[str, ...], fmt: str = "text", output: str | None = None, select: tuple[str, ...] = (),
             ignore: tuple[str, ...] = (), exclude: tuple[str, ...] = (), strict: bool | None = None,
             max_file_size: int | None = None, explain: str | None = None, color: bool | None = None,
             only_specs: bool = False, show_env: bool = False, scheduler: str | None = None,
             cfg: str | None = None, k8s_versions: tuple[str, ...] = (), crd_paths: tuple[str, ...] = (),
             params: tuple[str, ...] = (), params_file: str | None = None,
             template_paths: tuple[str, ...] = (), jobs: int | None = None,
             allow_python: bool | None = None) -> int:
    """Lint ``paths`` (default: the current folder) and print the report; the exit code."""
    from torchspec.config import load_config
    from torchspec.config import template_paths as config_template_paths
    from torchspec.lint import LintOptions, lint_paths
    from torchspec.report import get_reporter

    if explain is not None:
        return _explain(explain)
    if not scheduler and (cfg or k8s_versions or crd_paths):
        from torchspec.errors import UsageError

        raise UsageError("-c, --k8s-version and --crd need --scheduler", "e.g. --scheduler kubernetes")
    full_config = load_config()
    config = full_config.section("lint")
    options = LintOptions(
        select=split_commas(select) or list(config.get("select", [])),
        ignore=split_commas(ignore) or list(config.get("ignore", [])),
        exclude=list(exclude) or list(config.get("exclude", [])),
        params=parse_params(params),
        params_file=params_file,
        template_paths=config_template_paths(full_config, template_paths),
        only_specs=only_specs,
        scheduler=scheduler,
        scheduler_cfg=cfg or {},
        k8s_versions=tuple(k8s_versions),
        crd_paths=tuple(crd_paths),
        config=full_config if scheduler else None,
        allow_python_components=bool(allow_python if allow_python is not None
                                     else config.get("allow_python_components", False)),
    )
    if jobs is None and config.get("jobs") is not None:
        jobs = config["jobs"]
        if not isinstance(jobs, int) or isinstance(jobs, bool) or jobs < 0:
            from torchspec.errors import UsageError

            raise UsageError(f"lint.jobs in {full_config.sources.get('lint.jobs', 'the config')} is {jobs!r}, "
                             "not a whole number >= 0",
                             "0: one process per CPU, 1: this one only")
    if jobs is not None:
        options.jobs = jobs
    if max_file_size or config.get("max_file_size"):
        options.max_file_bytes = int(max_file_size or config["max_file_size"])
    if scheduler:
        from torchspec.runner.check import lint_paths as lint_with_scheduler

        result = lint_with_scheduler(paths or (".",), options)
    else:
        result = lint_paths(paths or (".",), options)
    try:
        stream = open(output, "w", encoding="utf-8") if output else sys.stdout
    except OSError as e:
        from torchspec.errors import UsageError

        raise UsageError(f"cannot write the report to {output}: {e.strerror or e}") from None
    try:
        if color is None:
            from torchspec.terminal import should_color

            color = fmt == "text" and should_color(stream)
        text = get_reporter(fmt)().render(result, color=color)
        stream.write(text if text.endswith("\n") or not text else text + "\n")
    finally:
        if output:
            stream.close()
    for note in result.notes:
        _echo(f"note: {note}", err=True)
    if show_env:
        for path, names in result.env_read.items():
            _echo(f"{path}: environment variables read: {', '.join(names)}", err=True)
    return result.exit_code(strict=bool(strict if strict is not None else config.get("strict", False)))


def _echo(text: str, err: bool = False) -> None:
    print(text, file=sys.stderr if err else sys.stdout, flush=True)  # as click.echo


def _explain(code: str) -> int:
    from torchspec.errors import UsageError
    from torchspec import codes

    if code.lower() == "all":
        for entry in codes.CODES.values():
            _echo(f"{entry.code}  {entry.name:<24} {entry.severity:<8} {entry.summary}")
        return 0
    entry = codes.get(code)
    if entry is None:
        from torchspec.errors import did_you_mean

        guess = did_you_mean(code, list(codes.CODES) + list(codes.NAMES))
        raise UsageError(f"unknown lint code {code!r}", f"did you mean {guess!r}?" if guess else
                         "list every code with: torchspec lint --explain all")
    _echo(entry.explain())
    return 0


__all__ = ["run_lint"]
