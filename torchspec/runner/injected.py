"""What torchspec adds to an app on its way to a scheduler, so that ``describe`` can show the app as written.

The runner sets the job id (and the parent run id where there is one) and the
trackers, under torchspec's names and TorchX's
(:func:`~torchspec.runner.torchx_names.is_job_env`), in every role, and the provenance summary
as the label :data:`~torchspec.runner.provenance.LABEL`; the scheduler keeps
the app with them.  ``describe`` leaves them out unless asked for everything.
"""

from __future__ import annotations

import copy

from torchspec.runner.torchx_names import is_job_env
from torchspec.runner.provenance import LABEL
from torchspec.specs import AppDef


def without_injected(app: AppDef) -> AppDef:
    """A copy of ``app`` without what the runner injected into its roles' env and its labels; ``app`` is
    left as it is."""
    shown = copy.deepcopy(app)
    shown.metadata = {key: value for key, value in shown.metadata.items() if key != LABEL}
    for role in shown.roles:
        role.env = {name: value for name, value in role.env.items() if not is_job_env(name)}
    return shown
