"""Where kcl-cpp's log lines go: Python's logging, under the logger "kcl" and its children."""
from __future__ import annotations

import logging

_ROOT = logging.getLogger("kcl")


def effective_level() -> int:
    return _ROOT.getEffectiveLevel()


def forward(level: int, component: str, message: str) -> None:
    """Called by the extension module (with the GIL) for each line kcl-cpp logs."""
    name = component.split(" ", 1)[0] or "core"
    logger = logging.getLogger("kcl." + name)
    if logger.isEnabledFor(level):
        logger.log(level, "[%s] %s", component, message)
