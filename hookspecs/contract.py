"""The contract's version, how a plugin declares the versions it supports, and deprecations.

``CONTRACT_VERSION`` names the version of this package's hooks and types (not
of the distribution that ships them). It follows semantic versioning:

* a **minor** bump adds a hook, an argument or a type field, or deprecates one
  (a deprecated hook or argument keeps working and warns when implemented);
* a **major** bump removes or changes what an earlier minor deprecated.

A plugin states the contract range it was written for with a module (or
plugin object) attribute holding a PEP 440 specifier::

    hermes_contract = ">=1,<2"

The host refuses to register a plugin whose range does not contain
``CONTRACT_VERSION``, with a message naming both (``hermes-core plugins``
lists it as failed; strict mode raises). A plugin without the attribute is
assumed compatible.

Deprecations use pluggy's own mechanism: a hookspec marked
``@hookspec(warn_on_impl=deprecated(...))`` warns when a plugin implements
the hook, and ``warn_on_impl_args={"arg": deprecated(...)}`` warns when an
implementation declares that argument. The warning is a
:class:`HermesDeprecationWarning` naming the version it was deprecated in,
the version that removes it and what to use instead.
"""

from __future__ import annotations

#: the PyPI distribution that ships this contract, the core and the default plugins
DISTRIBUTION = "hermes-session-core"

#: the version of the hook contract (hooks, their arguments and the types crossing them)
CONTRACT_VERSION = "1.0"

#: the attribute a plugin module or object sets to the contract range it supports
CONTRACT_ATTRIBUTE = "hermes_contract"


class HermesDeprecationWarning(DeprecationWarning):
    """A plugin implements a hook, or declares a hook argument, that is deprecated."""


def deprecated(what: str, *, since: str, removal: str, use: str) -> HermesDeprecationWarning:
    """The warning a hookspec attaches to a deprecated hook or argument.

    :param what: the hook or argument, e.g. ``"hook on_foo"`` or ``"argument bar of on_foo"``.
    :param since: the contract version that deprecated it.
    :param removal: the contract version that removes it (the next major).
    :param use: what to implement or declare instead.
    """
    return HermesDeprecationWarning(
        f"{what} is deprecated since hermes contract {since} and is removed in {removal}; "
        f"use {use} instead"
    )
