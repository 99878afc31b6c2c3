"""Sweep: the grid a ``--sweep`` gives, the names of its points, what is refused before anything is submitted."""

from __future__ import annotations

import pytest

from torchspec.errors import UsageError
from torchspec.runner.sweep import MAX_NAME, Sweep, new_sweep_id, point_name


def test_the_grid_varies_the_first_key_slowest() -> None:
    sweep = Sweep.parse(["lr=1e-4, 3e-4", "batch=32,64,128"])
    assert sweep.points() == [{"lr": lr, "batch": b} for lr in ("1e-4", "3e-4") for b in ("32", "64", "128")]
    assert Sweep.parse(["x=1"]).points() == [{"x": "1"}]


@pytest.mark.parametrize("words, said", [
    (["lr"], "give KEY=VALUE"), (["=1,2"], "give KEY=VALUE"), (["lr="], "needs one or more values"),
    (["lr=1,,2"], "none of them empty"), (["lr=1", "lr=2"], "given twice"),
])
def test_bad_sweeps_are_usage_errors(words: list, said: str) -> None:
    with pytest.raises(UsageError) as error:
        Sweep.parse(words)
    assert said in error.value.message and error.value.hint


def test_keys_must_be_declared_params_not_also_given_by_p() -> None:
    sweep = Sweep.parse(["lr=1,2"])
    sweep.check(["lr", "batch"], {"batch": "3"})
    sweep.check(None, {})  # the spec cannot tell: the loader judges each point
    with pytest.raises(UsageError, match="not a param of the spec") as error:
        Sweep.parse(["lrr=1"]).check(["lr"], {})
    assert error.value.hint == "did you mean 'lr'?"
    with pytest.raises(UsageError, match="given by -p and swept"):
        sweep.check(["lr"], {"lr": "3"})


def test_point_names_say_the_point_and_stay_short() -> None:
    assert point_name("train", {"lr": "1e-4", "batch": "32"}, 0) == "train-lr-1e-4-batch-32"
    assert point_name("Train", {"opt": "Adam W", "p": "0.5"}, 3) == "train-opt-adam-w-p-0-5"
    long = point_name("train", {"model": "x" * 60}, 7)
    assert long == "train-7" and len(point_name("t", {"a": "b" * (MAX_NAME - 4)}, 0)) <= MAX_NAME


def test_sweep_ids_are_label_values_and_differ() -> None:
    ids = {new_sweep_id() for _ in range(50)}
    assert len(ids) == 50 and all(i.startswith("sw-") and i.replace("-", "").isalnum() and i == i.lower()
                                  for i in ids)
