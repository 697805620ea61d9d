"""hermes-core default plugin: redaction.

Contributes the default :class:`~hermes_hookspecs.RedactionRule` set (API keys,
bearer tokens, Authorization headers, private key blocks, password
assignments, JWTs...; see :mod:`hermes_plugin_redaction.rules`) and the vendor
key formats of detect-secrets' detectors (:mod:`hermes_plugin_redaction.library`) through the
``redaction_rules`` hook. Integrators extend it by implementing the same hook
in their own plugin; block this plugin (``plugins.block = ["redaction"]``) to
replace the defaults entirely.
"""

from __future__ import annotations

from hermes_hookspecs import RedactionRule, hookimpl

from .library import library_rules
from .rules import default_rules

__all__ = ["default_rules", "library_rules", "redaction_rules"]


@hookimpl
def redaction_rules() -> list[RedactionRule]:
    """The default rules and the adopted detect-secrets formats (fresh objects on every call)."""
    return default_rules() + library_rules()
