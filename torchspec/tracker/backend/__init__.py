"""Tracker backends that ship with torchspec, registered in the ``torchspec.tracker`` entry-point group."""
