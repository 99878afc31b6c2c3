"""What a spec or a run option adds to the job beyond what torchspec models, each checked before it is written.

- the ``slurm.*`` keys of a spec (a typo refused with a did-you-mean, at its place);
- ``signal`` (``USR1@120``), ``exclusive``, and the pass-through flags ``sbatch_args`` / ``srun_args``,
  checked against the option names the cluster's own ``sbatch --help`` / ``srun --help`` list
  (:class:`ClientHelp`, read by the scheduler; unknown on a laptop, where the flags are written unchecked
  and the script says so);
- a role's OCI image (``docker://...``, ``nvcr.io/nvidia/pytorch:24.01-py3``) as pyxis' ``--container-image``.

Pure: the scheduler runs the ``--help`` commands and hands their text here.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from typing import Any, FrozenSet, List, Mapping, Optional, Sequence, Tuple

from torchspec.errors import AppRefusedError, did_you_mean
from torchspec.schedulers.images import is_folder_image
from torchspec.schedulers.slurm.options import sbatch_value
from torchspec.schedulers.slurm.states import CAP_CONSTRAINT, CAP_EXCLUSIVE, CAP_GRES
from torchspec.schedulers.spec_keys import check_backend_keys
from torchspec.specs import AppDef, CfgVal, Role

#: Every ``slurm.*`` resource capability the backend reads; it reads no ``slurm.*`` role metadata.
CAPABILITIES = (CAP_GRES, CAP_CONSTRAINT, CAP_EXCLUSIVE)
#: The srun option pyxis adds (``srun --help`` lists it under the plugins' options).
PYXIS_OPTION = "--container-image"

#: Flags torchspec itself sets or depends on: in ``sbatch_args``/``srun_args`` they would break the job or
#: what torchspec reads back, so they are refused with what to do instead.
SBATCH_MANAGED = {
    "--output": "torchspec gives it on sbatch's command line (LOG_DIR/JOBID.batch.log)",
    "--error": "the batch log is LOG_DIR/JOBID.batch.log; each replica has its own logs",
    "--input": "the batch script reads nothing", "--parsable": "torchspec gives it",
    "--job-name": "use the run option job_name_prefix", "--comment": "use the run option comment",
    "--requeue": "retries are the role's retry_policy and max_retries", "--no-requeue": "see --requeue",
    "--array": "one app is one job", "--wrap": "torchspec writes the script", "--test-only": "use dryrun",
    "--wait": "use torchspec wait", "--nodes": "set the role's num_replicas", "--ntasks": "set num_replicas",
    "--signal": "use the run option signal", "--exclusive": "use the run option exclusive",
    "--licenses": "use the run option licenses", "--chdir": "each replica runs in its image folder",
    "--uid": "sbatch runs as you", "--gid": "sbatch runs as you",
    "--export": "the replicas' environment is the role's env (and the run option env)",
    "--export-file": "see --export",
}
SRUN_MANAGED = {
    "--het-group": "torchspec places each replica in its role's component",
    "--exact": "torchspec gives it", "--nodes": "each replica is one task on one node",
    "--ntasks": "each replica is one task", "--nodelist": "use the run option nodelist",
    "--job-name": "each step is named ROLE/K", "--chdir": "each replica runs in its image folder",
    "--output": "each replica logs to LOG_DIR/JOBID/ROLE/K", "--error": "see --output",
    "--input": "see --output", "--pty": "replicas run in the background", "--label": "see --output",
    "--unbuffered": "see --output", "--export": "the replicas' environment is the role's env",
    "--container-image": "set the role's image to the container image",
}
#: The short spellings of the managed flags, by command.
SHORT = {"sbatch": {"-o": "--output", "-e": "--error", "-i": "--input", "-J": "--job-name", "-a": "--array",
                    "-W": "--wait", "-N": "--nodes", "-n": "--ntasks", "-D": "--chdir", "-L": "--licenses"},
         "srun": {"-o": "--output", "-e": "--error", "-i": "--input", "-J": "--job-name", "-N": "--nodes",
                  "-n": "--ntasks", "-w": "--nodelist", "-D": "--chdir", "-l": "--label", "-u": "--unbuffered"}}
#: Signal names Slurm reads (``--signal``), without their ``SIG``.
SIGNAL_NAMES = ("HUP", "INT", "QUIT", "ABRT", "KILL", "ALRM", "TERM", "USR1", "USR2", "URG", "CONT", "STOP",
                "TSTP", "TTIN", "TTOU", "XCPU")
_SIGNAL = re.compile(r"(?:(?P<flags>[RB]{1,2}):)?(?P<sig>[A-Za-z0-9]+)(?:@(?P<time>[0-9]+))?")
#: An option as ``--help`` lists it: ``  -A, --account=name``, ``      --exclusive[=user]``, ``  -B  --extra...``.
_HELP_LINE = re.compile(r"^ {1,8}(?:-(?P<short>[A-Za-z])(?:,\s*|\s+)(?=-)|(?=--))(?:--(?P<long>[A-Za-z][\w-]*))?")
#: An option as ``--usage`` lists it: ``[-N nnodes]``, ``[--cpu-bind=...]``.
_USAGE_OPTION = re.compile(r"\[(-[A-Za-z](?![\w-])|--[A-Za-z][\w-]*)")
_FLAG = re.compile(r"(?P<flag>--[A-Za-z][\w-]*|-[A-Za-z])(?:[= ](?P<value>.*))?", re.S)
#: An OCI image reference (registry/repository[:tag][@digest]), or enroot's ``registry#repository``.
_IMAGE_REF = re.compile(r"(?:(?P<registry>[A-Za-z0-9.-]+(?::[0-9]+)?)[/#])?"
                        r"(?P<path>[a-z0-9]+(?:[._-]+[a-z0-9]+)*(?:/[a-z0-9]+(?:[._-]+[a-z0-9]+)*)*)"
                        r"(?P<tag>:[\w][\w.-]{0,127})?(?P<digest>@sha256:[0-9a-f]{64})?")


@dataclass(frozen=True)
class ClientHelp:
    """The option names a Slurm client command lists in its ``--help`` (``--exclusive``, ``-A``...), or, where
    it could not be read (not installed, no slurm.conf), None and why."""

    command: str
    options: Optional[FrozenSet[str]] = None
    why_unknown: str = ""

    def has(self, option: str) -> Optional[bool]:
        """Whether the command takes ``option``; None when its help could not be read."""
        return None if self.options is None else option in self.options


def help_options(help_text: str, usage_text: str = "") -> FrozenSet[str]:
    """The option names a Slurm client lists in its ``--help`` (plug-ins' options, pyxis', included) and its
    ``--usage`` (which also lists those ``--help`` leaves out where their plug-in is off: ``--cpu-bind``)."""
    found = set(_USAGE_OPTION.findall(usage_text))
    for line in help_text.splitlines():
        match = _HELP_LINE.match(line)
        if match:
            found.update(f"-{s}" for s in [match["short"]] if s)
            found.update(f"--{s}" for s in [match["long"]] if s)
    return frozenset(found)


def check_slurm_keys(app: AppDef) -> None:
    """Refuse every ``slurm.*`` capability or role metadata key the backend does not read (a typo)."""
    check_backend_keys(app, "slurm", CAPABILITIES)


def exclusive_capability(role: Role) -> Optional[str]:
    """The ``--exclusive`` option the capability ``slurm.exclusive`` asks for (true, "user", "mcs"), or None."""
    value = role.resource.capabilities.get(CAP_EXCLUSIVE)
    if value in (None, False) or str(value).lower() in ("false", "no", "0", ""):
        return None
    if value is True or str(value).lower() in ("true", "yes", "1"):
        return "--exclusive"
    if str(value) in ("user", "mcs", "topo"):
        return f"--exclusive={value}"
    raise AppRefusedError(f"role {role.name!r}: resource capability {CAP_EXCLUSIVE} is {value!r}: write true,"
                          f" false, user, mcs or topo")


def signal_opt(value: CfgVal) -> Optional[str]:
    """The run option ``signal`` as ``--signal=...``: ``[R:]SIG[@SECONDS]``, SIG a name (USR1, SIGUSR1) or a
    number; refused with why otherwise."""
    if not value:
        return None
    text = str(value).strip()
    match = _SIGNAL.fullmatch(text)
    hint = "write SIGNAL[@SECONDS], e.g. USR1@120 (a name like USR1 or SIGTERM, or a number 1-64)"
    if match is None:
        raise AppRefusedError(f"run option signal {text!r} is not a signal: {hint}")
    flags, sig, time = match["flags"] or "", match["sig"], match["time"]
    if "B" in flags:
        raise AppRefusedError(f"run option signal {text!r}: 'B:' signals only the batch script, which only starts"
                              f" and waits for the replicas (it would end the job); drop 'B:' so the signal"
                              f" reaches every replica")
    if len(set(flags)) != len(flags):
        raise AppRefusedError(f"run option signal {text!r} is not a signal: {hint}")
    name = sig.upper().removeprefix("SIG")
    if sig.isdigit() and not 1 <= int(sig) <= 64 or not sig.isdigit() and name not in SIGNAL_NAMES:
        guess = did_you_mean(name, SIGNAL_NAMES)
        raise AppRefusedError(f"run option signal {text!r}: {sig!r} is not a signal Slurm knows"
                              + (f"; did you mean {guess!r}?" if guess else ""), hint)
    if time is not None and int(time) > 65535:
        raise AppRefusedError(f"run option signal {text!r}: Slurm takes at most 65535 seconds before the end")
    return f"--signal={flags + ':' if flags else ''}{sig if sig.isdigit() else name}" + (f"@{time}" if time else "")


def extra_flags(key: str, items: Any, help_: ClientHelp, managed: Mapping[str, str]) -> List[str]:
    """The run option ``key`` (``sbatch_args``, ``srun_args``): each item a flag ``--name``, ``--name=value``
    or ``--name value`` (``-c`` cannot hold '='), returned as ``--name=value``; a flag the cluster's command
    does not list (when its help could be read) is refused with a did-you-mean, one torchspec sets with what
    to use instead, and every value is checked for an ``#SBATCH`` line (no quotes, whitespace, control
    characters), so that none can add a line or a word."""
    out: List[str] = []
    for raw in _items(items):
        match = _FLAG.fullmatch(raw.strip())
        if match is None:
            raise AppRefusedError(f"run option {key}: {raw!r} is not a flag: write --name or --name=value")
        flag, value = match["flag"], match["value"]
        long = SHORT.get(help_.command, {}).get(flag, flag)
        if long in managed:
            raise AppRefusedError(f"run option {key}: torchspec sets {long} itself: {managed[long]}")
        known = help_.has(flag)
        if known is False:
            guess = did_you_mean(flag, sorted(help_.options or ()))
            raise AppRefusedError(f"run option {key}: {flag} is not an option of this cluster's {help_.command}"
                                  f" (`{help_.command} --help` does not list it)"
                                  + (f"; did you mean {guess}?" if guess else ""))
        word = flag if value is None else (f"{flag}={value}" if flag.startswith("--") else f"{flag}{value}")
        out.append(sbatch_value(f"run option {key}: {flag}", word))
    return out


def _items(items: Any) -> List[str]:
    """The items of a list option; an item not starting with '-' continues the one before (its value held a
    ',', which ``-c`` splits lists at: ``--mail-type END,FAIL``)."""
    if isinstance(items, str):
        items = [items]
    out: List[str] = []
    for item in items or ():
        text = str(item)
        if out and not text.lstrip().startswith("-"):
            out[-1] += "," + text
        else:
            out.append(text)
    return out


def unchecked_note(helps: Sequence[Tuple[str, ClientHelp]]) -> List[str]:
    """Script comments saying which flags were written without the cluster's ``--help`` to check them."""
    return [f"# torchspec: {key} not checked against `{h.command} --help` ({h.why_unknown}): run dryrun on a login"
            f" node to check them" for key, h in helps if h.options is None]


def container_image(image: str, folder_exists: bool) -> Optional[str]:
    """The pyxis ``--container-image`` value (enroot's ``REGISTRY#REPOSITORY:TAG``) of a role's image that is a
    container image, or None for a folder.

    ``docker://NAME`` is always an image; a path (``/``, ``./``, ``~``) or an existing folder never is; any
    other name is one when it reads as an image reference with a registry (``nvcr.io/nvidia/pytorch``), a tag
    (``ubuntu:22.04``), a digest or enroot's ``#`` (``nvcr.io#nvidia/pytorch``).
    """
    explicit = image.startswith("docker://")
    ref = image[len("docker://"):] if explicit else image
    if not explicit and (is_folder_image(image) or folder_exists):
        return None
    match = _IMAGE_REF.fullmatch(ref)
    if match is None:
        if explicit:
            raise AppRefusedError(f"image {image!r} is not a container image reference (docker://REGISTRY/NAME:TAG)")
        return None
    registry = match["registry"]
    if registry is not None and not ("." in registry or ":" in registry or registry == "localhost" or "#" in ref):
        registry = None  # a Docker Hub user (pytorch/pytorch), part of the repository's path
    if not explicit and registry is None and not (match["tag"] or match["digest"]):
        return None
    path = match["path"] if registry is not None else ref.split(":")[0].split("@")[0]
    return (f"{registry}#" if registry else "") + path + (match["tag"] or "") + (match["digest"] or "")


@dataclass
class Extras:
    """What every component gets beyond its role's resources: the run options exclusive, signal and
    sbatch_args as ``#SBATCH`` options, srun_args for each step, and what a container image needs (whether
    srun has pyxis, the log root to mount); ``notes``: what could not be checked here."""

    log_root: str
    sbatch_opts: List[str] = field(default_factory=list)
    srun_opts: List[str] = field(default_factory=list)
    srun_help: ClientHelp = ClientHelp("srun", None, "not asked")
    notes: List[str] = field(default_factory=list)


def image_of(role: Role, cwd: str) -> Optional[str]:
    """The role's container image (pyxis' form), or None when its image is a folder."""
    return container_image(role.image.strip(), os.path.isdir(os.path.join(cwd, os.path.expanduser(role.image))))


def container_opts(role: Role, group: int, image: str, extras: Extras) -> List[str]:
    """The srun options that run a replica in ``image`` with pyxis (refused where srun has no pyxis), the log
    root mounted at its own path (the step writes its exit code there)."""
    has_pyxis = extras.srun_help.has(PYXIS_OPTION)
    if has_pyxis is False:
        raise AppRefusedError(
            f"role {role.name!r}: image {role.image!r} is a container image, and this cluster's srun cannot run one:"
            f" it has no pyxis (`srun --help` lists no {PYXIS_OPTION})",
            "install NVIDIA's pyxis (with enroot) on the cluster, or make the image a folder on the file system the"
            " nodes share", path=("roles", group, "image"))
    if has_pyxis is None:
        extras.notes.append(f"# torchspec: role {role.name} runs in a container image, which needs pyxis on the"
                            f" cluster: not checked ({extras.srun_help.why_unknown})")
    if "," in extras.log_root or ":" in extras.log_root:
        raise AppRefusedError(f"log_dir {extras.log_root!r} holds ',' or ':', which pyxis' --container-mounts"
                              f" cannot carry (role {role.name!r} runs in a container image)")
    return [f"{PYXIS_OPTION}={image}", f"--container-mounts={extras.log_root}:{extras.log_root}"]


def helps_needed(app: AppDef, cfg: Mapping[str, CfgVal], cwd: str) -> List[str]:
    """The Slurm commands whose ``--help`` the request needs: sbatch for sbatch_args, srun for srun_args and
    container images (does it have pyxis?)."""
    needed = ["sbatch"] if cfg.get("sbatch_args") else []
    if cfg.get("srun_args") or any(image_of(role, cwd) for role in app.roles):
        needed.append("srun")
    return needed


def extras_of(cfg: Mapping[str, CfgVal], helps: Mapping[str, ClientHelp], log_root: str) -> Extras:
    """The run options exclusive, signal, sbatch_args and srun_args as flags, each checked."""
    sbatch_help = helps.get("sbatch") or ClientHelp("sbatch", None, "not asked")
    extras = Extras(log_root, srun_help=helps.get("srun") or ClientHelp("srun", None, "not asked"))
    signal = signal_opt(cfg.get("signal"))
    extras.sbatch_opts += ["--exclusive"] if cfg.get("exclusive") else []
    extras.sbatch_opts += [signal] if signal else []
    extras.sbatch_opts += extra_flags("sbatch_args", cfg.get("sbatch_args"), sbatch_help, SBATCH_MANAGED)
    extras.srun_opts += extra_flags("srun_args", cfg.get("srun_args"), extras.srun_help, SRUN_MANAGED)
    extras.notes += unchecked_note([(key, h) for key, h in (("sbatch_args", sbatch_help),
                                                             ("srun_args", extras.srun_help)) if cfg.get(key)])
    return extras
