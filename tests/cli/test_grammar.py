"""docs/concepts/cli.md's "CLI grammar", held against click's command tree: every command, every option.

The tree is walked, so a command or option added later is checked too: a format option not spelled
``-o/--output``, a ``--json`` flag of its own, a ``-s`` that is no scheduler, a choice without a
did-you-mean, or an old spelling that is not a hidden alias of a visible option all fail here.
"""

from __future__ import annotations

import json
import os
import pathlib
import re
import subprocess
import sys
from dataclasses import dataclass
from typing import Callable, Iterator

import click
import pytest

from torchspec.cli.main import build_cli, main
from torchspec.errors import did_you_mean

ROOT = pathlib.Path(__file__).resolve().parents[2]

#: What a command may print its output as: an option choosing among these is a format option.
FORMATS = {"text", "json", "yaml", "github", "sarif", "markdown"}

BAD = "name: bad\nroles:\n  - name: trainer\n    image: img\n    entrypoint: python\n    num_replica: 2\n"


@dataclass(frozen=True)
class Row:
    """One line of the grammar table: the option's names, and the commands having it (with formats)."""

    names: tuple[str, ...]
    commands: dict[str, tuple[str, ...]]


def readme_grammar() -> list[Row]:
    text = (ROOT / "docs" / "concepts" / "cli.md").read_text()
    section = text.split("\n## CLI grammar\n", 1)[1].split("\n## ", 1)[0]
    rows = []
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split(" | ")]
        if not line.startswith("| ") or len(cells) != 3 or cells[0] == "what":
            continue
        on = {name: tuple(f.strip() for f in formats.split(",")) if formats else ()
              for name, formats in re.findall(r"(?<!alias )`([a-z-]+(?: [a-z-]+)*)`(?: \(([a-z, ]+)\))?", cells[2])}
        for spelling in re.findall(r"`([^`]+)`", cells[1]):
            rows.append(Row(tuple(spelling.split()[0].split("/")), on))
    return rows


Commands = dict[str, click.Command]


def commands() -> Commands:
    """Every command by its path (``lint``; ``group sub`` for a group's), aliases (``run``) once, as the command."""
    found: Commands = {}

    def walk(group: click.Group, ctx: click.Context, prefix: str) -> None:
        listed = group.list_commands(ctx)
        for name in listed:
            command = group.get_command(ctx, name)
            assert command is not None, name
            if command.name != name and command.name in listed:
                continue  # an alias: checked under the command's own name
            found[prefix + name] = command
            if isinstance(command, click.Group):
                walk(command, click.Context(command, parent=ctx, info_name=name), f"{prefix}{name} ")

    cli = build_cli()
    walk(cli, click.Context(cli, info_name="torchspec"), "")
    return found


def options(tree: Commands, hidden: bool = False) -> Iterator[tuple[str, click.Option]]:
    """(command, option) for every option but --help; the hidden ones only with ``hidden``."""
    for name, command in tree.items():
        for param in command.params:
            if isinstance(param, click.Option) and param.name != "help" and param.hidden == hidden:
                yield name, param


def is_format_option(option: click.Option) -> bool:
    return isinstance(option.type, click.Choice) and bool(FORMATS & {str(c) for c in option.type.choices})


def spelt(option: click.Option) -> str:
    return "/".join(option.opts)


def cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    """``torchspec ARGS`` in this process, as the executable runs it: (exit code, stdout, stderr)."""
    with pytest.raises(SystemExit) as done:
        main(list(args))
    out = capsys.readouterr()
    assert "Traceback" not in out.err, out.err
    return int(done.value.code or 0), out.out, out.err


@pytest.fixture
def here(tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> pathlib.Path:
    """A folder of its own to run in, with a broken spec, no config and no apps."""
    monkeypatch.chdir(tmp_path)
    for var, value in {"TORCHSPEC_HOME": "home", "XDG_CONFIG_HOME": "xdg"}.items():
        monkeypatch.setenv(var, str(tmp_path / value))
    monkeypatch.setenv("NO_COLOR", "1")
    (tmp_path / "bad.yaml").write_text(BAD)
    return tmp_path


# --------------------------------------------------------------------------------------------------------- the rules


def not_as_the_readme_says(tree: Commands) -> list[str]:
    """Each row's option is spelled exactly so on exactly the commands the row names (formats and their order
    too: the first is the default), and no other option takes any of its names."""
    wrong = []
    for row in readme_grammar():
        having = {}
        for command, option in options(tree):
            if set(option.opts) & set(row.names):
                having[command] = option
                if tuple(option.opts) != row.names:
                    wrong.append(f"{command}: {spelt(option)} is not {'/'.join(row.names)}")
        if sorted(having) != sorted(row.commands):
            wrong.append(f"{'/'.join(row.names)} is on {sorted(having)}; the page says {sorted(row.commands)}")
        for command, option in having.items():
            choices = [str(c) for c in getattr(option.type, "choices", ())]
            if row.commands.get(command) and choices != list(row.commands[command]):
                wrong.append(f"{command} {spelt(option)}: {choices}; the page says {list(row.commands[command])}")
    return wrong


def formats_not_by_dash_o(tree: Commands) -> list[str]:
    """A format is chosen with -o/--output (default: its first), -o chooses a format, a file is --output-file."""
    wrong = []
    for command, option in options(tree):
        long_names = [n for n in option.opts if n.startswith("--")]
        if is_format_option(option):
            if option.opts != ["-o", "--output"]:
                wrong.append(f"{command}: the format option is {spelt(option)}, not -o/--output")
            if option.default != option.type.choices[0]:  # type: ignore[attr-defined]
                wrong.append(f"{command}: -o defaults to {option.default!r}, not its first format")
        elif {"-o", "--output"} & set(option.opts):
            wrong.append(f"{command}: {spelt(option)} takes no format (a file to write is --output-file)")
        if option.is_flag and {n.lstrip("-") for n in long_names} & FORMATS:
            wrong.append(f"{command}: {spelt(option)} picks a format as a flag: -o FORMAT does")
        if any("output" in n or "format" in n for n in long_names) and not is_format_option(option) \
                and option.opts != ["--output-file"]:
            wrong.append(f"{command}: {spelt(option)}: an output format is -o, a file to write --output-file")
    return wrong


#: The one name with two meanings, as docs/concepts/cli.md's table says (and the issue that asked for it spelt it):
#: ``submit --sweep PARAM=V1,V2`` makes a sweep, the other commands' ``--sweep ID`` names one.
TWO_MEANINGS = {"--sweep"}


def names_that_drift(tree: Commands) -> list[str]:
    """An option name means one thing (one parameter, one metavar) on every command, and a parameter has one
    spelling: `lint --scheduler` without -s, or a `--sched` of a new command, is drift."""
    by_name: dict[str, set[tuple[str | None, str]]] = {}
    by_dest: dict[str | None, set[str]] = {}
    ctx = click.Context(click.Command("x"))
    for _, option in options(tree):
        metavar = "" if option.is_flag else "FORMAT" if is_format_option(option) else option.make_metavar(ctx)
        for name in option.opts + option.secondary_opts:
            by_name.setdefault(name, set()).add((option.name, metavar))
        by_dest.setdefault(option.name, set()).add(spelt(option))
    return [f"{name} means {sorted(map(str, meanings))}" for name, meanings in by_name.items()
            if len(meanings) > 1 and name not in TWO_MEANINGS] \
        + [f"{dest} is spelt {sorted(spellings)}" for dest, spellings in by_dest.items() if len(spellings) > 1]


def hidden_but_no_alias(tree: Commands) -> list[str]:
    """A hidden option is an old spelling (``options.alias_option``) of a visible option of the same command."""
    visible = {command: {n for c, o in options(tree) if c == command for n in o.opts} for command in tree}
    return [f"{command}: {spelt(option)} is hidden but no alias of a visible option"
            for command, option in options(tree, hidden=True)
            if not set(str(getattr(option, "alias_of", "")).split("/")) <= visible[command]]


def choice_options(tree: Commands) -> list[tuple[str, click.Option]]:
    return [(command, option) for hidden in (False, True) for command, option in options(tree, hidden)
            if isinstance(option.type, click.Choice)]


def near_miss(option: click.Option) -> tuple[str, str]:
    """(a typo, the choice it misses): the first choice whose last letter dropped is guessed back."""
    choices = [str(c) for c in option.type.choices]  # type: ignore[attr-defined]
    meant = next(c for c in choices if c[:-1] not in choices and did_you_mean(c[:-1], choices) == c)
    return meant[:-1], meant


def choices_without_help_or_guess(tree: Commands) -> list[str]:
    """A fixed set is listed in --help, and a near miss is refused with a guess (not click's bare list)."""
    wrong = []
    ctx = click.Context(click.Command("x"))
    for command, option in choice_options(tree):
        choices = [str(c) for c in option.type.choices]  # type: ignore[attr-defined]
        if not option.hidden and not all(c in (option.get_help_record(ctx) or ("", ""))[0] for c in choices):
            wrong.append(f"{command} {spelt(option)}: --help does not list {choices}")
        typo, meant = near_miss(option)
        try:
            tree[command].main([max(option.opts, key=len), typo], prog_name=command, standalone_mode=False)
            wrong.append(f"{command} {spelt(option)} {typo}: accepted")
        except click.ClickException as e:
            if f"did you mean {meant!r}?" not in e.format_message():
                wrong.append(f"{command} {spelt(option)} {typo}: {e.format_message()}")
    return wrong


def test_the_readme_states_the_grammar() -> None:
    names = {name for row in readme_grammar() for name in row.names}
    assert {"-o", "--output-file", "-s", "-c", "-p", "--app", "--since", "--until", "--timeout"} <= names
    assert len([row for row in readme_grammar() if row.names == ("-o", "--output")][0].commands) >= 10


RULES = [not_as_the_readme_says, formats_not_by_dash_o, names_that_drift, hidden_but_no_alias,
         choices_without_help_or_guess]


@pytest.mark.parametrize("rule", RULES, ids=lambda rule: rule.__name__)
def test_every_command_keeps_the_grammar(rule: Callable[[Commands], list[str]]) -> None:
    assert rule(commands()) == []


def test_the_rules_catch_a_command_that_breaks_them() -> None:
    """A new command with every mistake the rules are there for: each rule finds its own."""
    @click.command("new")
    @click.option("--format", "fmt", type=click.Choice(["text", "json"]))
    @click.option("-o", "--output", "out", metavar="FILE")
    @click.option("--json", "as_json", is_flag=True)
    @click.option("--sched", "scheduler")
    @click.option("-s", "--strict", is_flag=True)
    @click.option("--mode", type=click.Choice(["fast", "slow"]))
    @click.option("--old", hidden=True)
    def new(**_: object) -> None:
        pass

    tree = {**commands(), "new": new}
    found = {rule.__name__: rule(tree) for rule in RULES}
    assert "new: the format option is --format, not -o/--output" in found["formats_not_by_dash_o"]
    assert "new: -o/--output takes no format (a file to write is --output-file)" in found["formats_not_by_dash_o"]
    assert "new: --json picks a format as a flag: -o FORMAT does" in found["formats_not_by_dash_o"]
    assert any(line.startswith("scheduler is spelt") for line in found["names_that_drift"])
    assert any(line.startswith("-s means") for line in found["names_that_drift"])
    assert any(line.startswith("-s/--scheduler is on") for line in found["not_as_the_readme_says"])
    assert any(line.startswith("new --mode fas: ") for line in found["choices_without_help_or_guess"])
    assert found["hidden_but_no_alias"] == ["new: --old is hidden but no alias of a visible option"]


def test_every_fixed_set_is_checked() -> None:
    assert len(choice_options(commands())) >= 14  # -o on ten commands, --streams, --lock, the old --format


@pytest.mark.parametrize("command,option", choice_options(commands()), ids=lambda x: getattr(x, "name", x))
def test_a_wrong_value_of_a_fixed_set_is_exit_2_with_a_guess(here: pathlib.Path, capsys: pytest.CaptureFixture[str],
                                                           command: str, option: click.Option) -> None:
    typo, meant = near_miss(option)
    code, out, err = cli(capsys, *command.split(), max(option.opts, key=len), typo)
    assert code == 2 and out == "", err
    assert f"did you mean {meant!r}?" in err and ", ".join(map(str, option.type.choices)) in err  # type: ignore


# ------------------------------------------------------------------------------- the old spellings keep working


def test_lint_dash_o_prints_the_format_and_writes_no_file(here: pathlib.Path,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    """Before, `lint -o json` wrote the text report to a file named json and exited 0."""
    code, out, err = cli(capsys, "lint", "-o", "json", "bad.yaml")
    assert code == 1 and json.loads(out)["summary"]["errors"] == 1 and err == ""
    assert sorted(p.name for p in here.iterdir()) == ["bad.yaml"]
    (here / "out").mkdir()
    code, out, err = cli(capsys, "lint", "-o", "sarif", "--output-file", "out/report.sarif", "bad.yaml")
    assert code == 1 and out == "" and json.loads((here / "out" / "report.sarif").read_text())["version"] == "2.1.0"


@pytest.mark.parametrize("path", ["report.json", "out/report.txt", "report"])
def test_lint_dash_o_with_a_file_says_to_use_output_file(here: pathlib.Path, capsys: pytest.CaptureFixture[str],
                                                         path: str) -> None:
    code, out, err = cli(capsys, "lint", "-o", path, "bad.yaml")
    assert code == 2 and out == "" and f"use --output-file {path}" in err
    assert sorted(p.name for p in here.iterdir()) == ["bad.yaml"]


@pytest.mark.parametrize("old", [["-f", "json"], ["--format", "json"], ["--format", "json", "-o", "json"]])
def test_lint_format_is_an_alias_with_a_warning(here: pathlib.Path, capsys: pytest.CaptureFixture[str],
                                                old: list[str]) -> None:
    code, out, err = cli(capsys, "lint", *old, "bad.yaml")
    assert code == 1 and json.loads(out)["summary"]["errors"] == 1
    assert err == "warning: -f/--format is deprecated: use -o json\n"


def test_lint_format_with_dash_o_file_still_writes_the_file(here: pathlib.Path,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    """The GitHub Action's old `lint --format sarif -o FILE`: the file is written, and the warning says how now."""
    code, out, err = cli(capsys, "lint", "--format", "sarif", "-o", "report.sarif", "bad.yaml")
    assert code == 1 and out == "" and json.loads((here / "report.sarif").read_text())["version"] == "2.1.0"
    assert "use -o sarif --output-file report.sarif" in err
    code, _, err = cli(capsys, "lint", "-f", "json", "-o", "sarif", "bad.yaml")
    assert code == 2 and "-o sarif and -f/--format json disagree" in err


@pytest.mark.parametrize("args", [["render", "bad.yaml", "-p", "x=1"], ["diff", "bad.yaml", "bad.yaml"]])
def test_format_is_an_alias_of_dash_o(here: pathlib.Path, capsys: pytest.CaptureFixture[str],
                                      args: list[str]) -> None:
    (here / "bad.yaml").write_text("name: a\nparams: {x: {type: integer}}\nroles: [{name: r, image: i, "
                                   "entrypoint: e, num_replicas: '{{ x }}'}]\n")
    new = cli(capsys, *args, "-o", "json")
    old = cli(capsys, *args, "--format", "json")
    assert new[:2] == old[:2] and json.loads(new[1]) is not None
    assert old[2] == new[2] + "warning: --format is deprecated: use -o json\n"


@pytest.mark.parametrize("args", [["schedulers"], ["builtins"], ["config"], ["list", "-s", "local"]])
def test_json_is_an_alias_of_dash_o_json(here: pathlib.Path, capsys: pytest.CaptureFixture[str],
                                         args: list[str]) -> None:
    new = cli(capsys, *args, "-o", "json")
    assert new == cli(capsys, *args, "--json") and new[0] == 0
    assert json.loads(new[1]) is not None and new[1] != cli(capsys, *args)[1]


def test_runopts_takes_dash_s_as_the_others_do(here: pathlib.Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli(capsys, "runopts", "-s", "local") == cli(capsys, "runopts", "local")
    assert "did you mean 'local'?" in cli(capsys, "runopts", "-s", "locl")[2]
    assert cli(capsys, "runopts", "-s", "local", "docker")[0] == 2


def test_convert_writes_output_file_and_still_dash_o(here: pathlib.Path) -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    component = f"{ROOT / 'examples' / 'torchx' / 'components.py'}:echo"
    for flag, name in (("--output-file", "new.yaml"), ("-o", "old.yaml")):
        done = subprocess.run([sys.executable, "-m", "torchspec", "convert", component, "--msg", "hi", flag, name],
                              capture_output=True, text=True, env=env, cwd=here, timeout=120)
        assert done.returncode == 0 and (here / name).is_file(), done.stderr
        assert ("-o FILE is deprecated: use --output-file old.yaml" in done.stderr) == (flag == "-o")
    assert (here / "new.yaml").read_text() == (here / "old.yaml").read_text()
