"""GitOps: what a change to checked-in spec files changes in what would run (``torchspec diff``), and running
each of them once (``torchspec apply``).

- :mod:`torchspec.specs.canonical` (a layer below, as the runner records the hash at submit too): an AppDef
  as a canonical plain dict, and the content hash (``content_hash``) that ``apply`` stores on a job;
- :mod:`torchspec.gitops.git`: the files changed since a ref, and a commit's files as a loader source;
- :mod:`torchspec.gitops.changes`: which spec files a change touches (itself, or through a file it uses);
- :mod:`torchspec.gitops.diff`: both sides of each changed spec loaded and compared, field by field and,
  with a scheduler, as the scheduler's native request;
- :mod:`torchspec.gitops.report`: the comparison as text, markdown, json or GitHub annotations;
- :mod:`torchspec.gitops.apply`: ``torchspec apply``: each spec's identity and hash, the plan (create,
  unchanged, replace, prune) against the scheduler's labelled apps, and carrying it out;
- :mod:`torchspec.gitops.lock`: the lock that makes two applies take turns;
- :mod:`torchspec.gitops.apply_report`: a plan or what was applied as text, markdown or json.

The layer sits between the runner (dry runs) and the CLI; nothing here prints.
"""
