"""Every exercise the grader knows, found by importing the modules of this package.

A chapter adds exercises by adding a module here that defines ``EXERCISES``
(a list of :class:`~autograder.exercise.Exercise`); nothing else changes.
"""

from __future__ import annotations

import importlib
import pkgutil

from ..exercise import Exercise

_registry: dict[str, Exercise] | None = None


def _discover() -> dict[str, Exercise]:
    found: dict[str, Exercise] = {}
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda i: i.name):
        if info.name.startswith("_"):
            continue
        module = importlib.import_module(f"{__name__}.{info.name}")
        for exercise in getattr(module, "EXERCISES", ()):
            if exercise.name in found:
                raise ValueError(f"exercise '{exercise.name}' is declared twice (second time in {module.__name__})")
            found[exercise.name] = exercise
    return found


def all_exercises() -> dict[str, Exercise]:
    """Name -> exercise, for every declared exercise."""
    global _registry
    if _registry is None:
        _registry = _discover()
    return dict(_registry)


def get_exercise(name: str) -> Exercise:
    exercises = all_exercises()
    if name not in exercises:
        raise KeyError(f"no exercise called '{name}' (known: {', '.join(sorted(exercises)) or 'none'})")
    return exercises[name]
