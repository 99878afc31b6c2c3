"""TorchElastic's Training Session Manager API (``torchelastic.tsm.driver``) over torchspec.

Code written for TSM runs with its import line changed::

    import torchspec.tsm as tsm            # was: import torchelastic.tsm.driver as tsm

    trainer = tsm.ElasticRole(name="trainer", nproc_per_node=2, nnodes="2:2").runs("train.py").on(
        tsm.Container(image="/home/me/trainer")).replicas(2)
    session = tsm.session(name="my_session")
    handle = session.run(tsm.Application(name="job").of(trainer), scheduler="local")
    session.wait(handle)

The builders are in :mod:`torchspec.tsm.api`, the session in
:mod:`torchspec.tsm.session`; the spec objects TSM shared with TorchX
(``Resource``, ``RetryPolicy``, ``macros``, ``AppState``...) are torchspec's.
"""

from torchspec.specs import (AppDryRunInfo, AppState, AppStatus, Resource, RetryPolicy, UnknownAppException, macros,
                             runopts)
from torchspec.tsm.api import (ALL, AppNotReRunnableException, Application, Container, ElasticRole, Role, RunConfig,
                               SchedulerBackend, SessionMismatchException)
from torchspec.tsm.session import DEFAULT, Session, StandaloneSession, session

__all__ = ["ALL", "DEFAULT", "AppDryRunInfo", "AppNotReRunnableException", "AppState", "AppStatus", "Application",
           "Container", "ElasticRole", "Resource", "RetryPolicy", "Role", "RunConfig", "SchedulerBackend", "Session",
           "SessionMismatchException", "StandaloneSession", "UnknownAppException", "macros", "runopts", "session"]
