# torchspec in a container image, for CI systems that run each step in one (GitLab CI, Jenkins, Tekton...):
# `torchspec lint` over the folder mounted at /work. Built from the release's wheel:
#
#   python -m build --wheel                     # dist/torchspec_cli-X.Y.Z-py3-none-any.whl
#   docker build -t torchspec-cli .
#   docker run --rm -v "$PWD:/work:ro" torchspec-cli                   # torchspec lint .
#   docker run --rm -v "$PWD:/work:ro" torchspec-cli torchspec lint -o sarif jobs/
#
# The core install only (lint, render, schema, dryrun need no backend SDK). No ENTRYPOINT: CI systems run
# their own shell commands in the image (GitLab's script:, Jenkins' docker.image().inside), so the command
# is a plain CMD. tests/test_image.py builds this file (with BASE set to a locally made stand-in for the
# Python image: its test engine reaches no registry) and runs it on a good and a bad spec.
ARG BASE=python:3.11-slim
FROM ${BASE}

ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_ROOT_USER_ACTION=ignore

COPY dist/torchspec_cli-*.whl /tmp/wheels/
RUN python -m pip install --no-cache-dir /tmp/wheels/torchspec_cli-*.whl && rm -rf /tmp/wheels

# A user of its own, written to /etc/passwd directly: useradd (Debian), adduser (Alpine, busybox) differ
# between bases, and this works on any base with a shell. Its home is writable (torchspec's caches); the
# mounted folder may be read-only. A CI system that runs the container as another uid (Jenkins passes its
# own) works too: a cache that cannot be written only costs time.
RUN echo "torchspec:x:10001:10001:torchspec:/home/torchspec:/bin/sh" >> /etc/passwd \
    && echo "torchspec:x:10001:" >> /etc/group \
    && mkdir -p /home/torchspec /work \
    && chown 10001:10001 /home/torchspec
USER 10001:10001
ENV HOME=/home/torchspec
WORKDIR /work

LABEL org.opencontainers.image.title="torchspec-cli" \
      org.opencontainers.image.description="torchspec lint and friends: declarative job specs for distributed PyTorch" \
      org.opencontainers.image.licenses="BSD-3-Clause" \
      org.opencontainers.image.source="https://github.com/torchspec/torchspec"
CMD ["torchspec", "lint", "."]
