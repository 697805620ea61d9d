"""The hook markers shared by hosts and plugins.

``hookspec`` marks a hook specification in :mod:`hermes_hookspecs.specs`;
``hookimpl`` marks a plugin's implementation. Both carry the project name
``hermes_core``, which is also the entry-point group plugins are loaded from.
"""

from __future__ import annotations

import pluggy

PROJECT_NAME = "hermes_core"
ENTRY_POINT_GROUP = "hermes_core"

hookspec = pluggy.HookspecMarker(PROJECT_NAME)
hookimpl = pluggy.HookimplMarker(PROJECT_NAME)
