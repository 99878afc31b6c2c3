"""A sweep: one spec submitted once per point of a grid of param values (``submit job.yaml --sweep lr=1e-4,3e-4
--sweep batch=32,64``: four apps).

Why not a shell loop: every app of a sweep carries one label (:data:`SWEEP_LABEL`, the sweep's id), so ``list``,
``cancel`` and ``delete`` take ``--sweep ID`` and act on the sweep as one thing; each app's name says its point
(``train-lr-1e-4-batch-32``) and its provenance records its params, so ``describe`` and ``rerun`` show and
repeat exactly that point.  Every point is loaded and dry-run before the first is submitted: a point that
cannot run (a value its param refuses, a scheduler's refusal) stops the sweep with nothing submitted.

A point's params are ``-p`` values: a key given both by ``-p`` and ``--sweep`` is refused, as is a key the spec
does not declare, a key given twice and a key with no values.
"""

from __future__ import annotations

import itertools
import random
import re
import string
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Dict, List, Mapping, Optional, Sequence, Tuple

from torchspec.errors import UsageError, did_you_mean_hint

if TYPE_CHECKING:
    from torchspec.runner.api import Runner
    from torchspec.specs import AppDryRunInfo, CfgVal

#: The label every app of a sweep carries: the sweep's id.
SWEEP_LABEL = "torchspec.dev/sweep"
#: The longest app name a point gets before its params are replaced by its number (Kubernetes names are short).
MAX_NAME = 40


@dataclass(frozen=True)
class Sweep:
    """The grid: each swept param with its values, in the order given (the first varies slowest)."""

    grid: Tuple[Tuple[str, Tuple[str, ...]], ...]
    #: the params a params file's ``sweep:`` block sweeps: the loader finds what is wrong with those, at their place
    from_file: Tuple[str, ...] = ()

    @classmethod
    def parse(cls, words: Sequence[str]) -> "Sweep":
        """From ``--sweep KEY=V1,V2`` words; a UsageError naming the word for one with no key or no values, or a
        key given twice."""
        grid: Dict[str, Tuple[str, ...]] = {}
        for word in words:
            key, eq, text = word.partition("=")
            key = key.strip()
            values = tuple(v.strip() for v in text.split(",")) if eq else ()
            if not key or not eq:
                raise UsageError(f"--sweep {word!r}: give KEY=VALUE[,VALUE...]", "e.g. --sweep lr=1e-4,3e-4,1e-3")
            if not values or any(v == "" for v in values):
                raise UsageError(f"--sweep {word!r}: {key} needs one or more values, none of them empty",
                                 f"e.g. --sweep {key}=1,2,3")
            if key in grid:
                raise UsageError(f"--sweep {key!r} is given twice", f"give its values once: --sweep {key}=A,B,C")
            grid[key] = values
        return cls(tuple(grid.items()))

    def with_file(self, params_file: Optional[str]) -> "Sweep":
        """This grid and the params file's ``sweep:`` block, the file's params after these; a param swept by
        both is a UsageError."""
        found = file_sweep(params_file) if params_file else {}
        both = [key for key, _ in self.grid if key in found]
        if both:
            raise UsageError(f"{both[0]!r} is swept by --sweep and by the params file's sweep", "sweep it one way")
        return Sweep(self.grid + tuple((key, tuple(values)) for key, values in found.items()), tuple(found))

    def points(self) -> List[Dict[str, str]]:
        """Every combination, the first key varying slowest."""
        keys = [key for key, _ in self.grid]
        return [dict(zip(keys, combo)) for combo in itertools.product(*(values for _, values in self.grid))]

    def check(self, declared: Optional[Sequence[str]], given: Mapping[str, Any]) -> None:
        """Refuse a swept key the spec does not declare (``declared`` None: the spec cannot tell, so the loader
        judges each point) or that ``-p`` also sets."""
        for key, _ in self.grid:
            if declared is not None and key not in declared and key not in self.from_file:
                raise UsageError(f"--sweep {key!r} is not a param of the spec",
                                 did_you_mean_hint(key, declared, "its params"))
            if key in given:
                raise UsageError(f"{key!r} is given by -p and swept by --sweep", "give it one way")


def file_sweep(params_file: str) -> Dict[str, List[str]]:
    """A params file's ``sweep:`` block, each value as ``-p`` gives it; {} without one (or one with problems:
    loading the spec reports them, at their place)."""
    from torchspec.loader import read_params_file
    from torchspec.loader.params import sweep_value

    block = read_params_file(params_file).sweep or {}
    return {key: [sweep_value(v) for v in values] for key, values in block.items()}


def new_sweep_id() -> str:
    """A short id no other sweep is likely to have, valid as a label value on every engine."""
    return "sw-" + "".join(random.choices(string.ascii_lowercase + string.digits, k=8))


def point_name(base: str, point: Mapping[str, str], number: "int | str") -> str:
    """The name of a point's app: the app's name and the point's params (``train-lr-1e-4-batch-32``), lower
    case, ``-`` for anything but letters and digits; ``{base}-{number}`` where that would be too long (``apply``
    gives a digest of the point as its number, so a point keeps its name when the grid changes)."""
    words = "-".join(f"{key}-{value}" for key, value in point.items())
    name = re.sub(r"-+", "-", re.sub(r"[^a-z0-9]+", "-", f"{base}-{words}".lower())).strip("-")
    return name if len(name) <= MAX_NAME else f"{base}-{number}"


def dryrun_sweep(runner: "Runner", component: str, given: Dict[str, str], sweep: Sweep, scheduler: str,
                 cfg: Mapping[str, "CfgVal"], *, sweep_id: Optional[str] = None, **load: Any
                 ) -> List["AppDryRunInfo[Any]"]:
    """Every point's dry run, in grid order, each app named for its point and labelled with the sweep's id;
    ``load``: ``params_file``, ``app_name``, ``template_paths``, ``workspace`` as :meth:`Runner.run_component`
    takes them.  Nothing is submitted."""
    from torchspec.components import ComponentNotFoundError, find_component, is_python_component
    from torchspec.loader import declared_params
    from torchspec.runner.provenance import Source

    if is_python_component(component):
        raise UsageError("--sweep takes a spec's params; a Python component takes its arguments on its command line",
                         "loop over its arguments in the shell, or write the job as a spec with params")
    try:
        declared = declared_params(find_component(component))
    except ComponentNotFoundError:
        declared = None  # the runner says so, with its did-you-mean, when it loads the first point
    sweep.check(declared, given)
    sweep_id = sweep_id or new_sweep_id()
    workspace = load.pop("workspace", None)
    infos = []
    for number, point in enumerate(sweep.points()):
        args = {**given, **point}
        app = runner.load_component(component, args, **load)
        app.name = point_name(app.name, point, number)
        app.metadata[SWEEP_LABEL] = sweep_id
        source = Source(component, args, load.get("params_file"))
        infos.append(runner.dryrun(app, scheduler, cfg=cfg, workspace=workspace, source=source))
    return infos
