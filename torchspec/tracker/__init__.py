"""Experiment tracking, as ``torchx.tracker``: ``app_run_from_env().add_metadata(lr=0.1)`` inside a job.

See :mod:`torchspec.tracker.api` for the API and how a job finds its
trackers, and :mod:`torchspec.tracker.backend.fsspec` for the file tracker.
"""

from torchspec.tracker.api import (AppRun, AppRunTrackableSource, Lineage, TrackerArtifact, TrackerBase, TrackerSource,
                                   app_run_from_env, build_trackers, tracker_config_env_var_name,
                                   trackers_from_environ)

__all__ = ["AppRun", "AppRunTrackableSource", "Lineage", "TrackerArtifact", "TrackerBase", "TrackerSource",
           "app_run_from_env", "build_trackers", "tracker_config_env_var_name", "trackers_from_environ"]
