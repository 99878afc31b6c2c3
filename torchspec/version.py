"""The package version, kept in a module of its own so ``torchspec --version`` imports nothing else."""

__version__ = "0.1.0"
