"""Which tiktoken encoding counts the tokens of which model.

Rule (applied to the model name after normalising it):

1. Normalise: strip surrounding whitespace, lower-case, drop everything up to
   the last ``/`` (provider or router prefixes such as ``openai/``,
   ``azure/``, ``openrouter/openai/``) and a leading ``ft:`` (fine-tuned
   models such as ``ft:gpt-4o-mini:org::id``).
2. A name that is itself an encoding name (``o200k_base``, ``cl100k_base``,
   ``p50k_base``, ``r50k_base``) selects that encoding.
3. ``o200k_base`` for the current OpenAI families: ``gpt-4o``,
   ``chatgpt-4o``, ``gpt-4.1``, ``gpt-4.5``, ``gpt-5``, ``o1``, ``o3``,
   ``o4`` and ``gpt-oss``, where the family is the whole name or is followed
   by ``-``, ``.``, ``:``, ``_`` or ``@`` (so ``gpt-4o-mini``, ``gpt-5.1``,
   ``o4-mini``, ``gpt-oss-120b`` match, ``gpt-4`` and ``o10`` do not).
   ``gpt-oss`` is published with ``o200k_harmony``, which has the same ranks
   and pattern as ``o200k_base`` and differs only in special tokens, so
   ordinary-text counts are identical.
4. ``cl100k_base`` for everything else, including ``None``, ``gpt-4``,
   ``gpt-3.5-turbo``, the ``text-embedding-3`` models and non-OpenAI models
   (for those the count is a cl100k count, not the model's own tokenizer's).
"""

from __future__ import annotations

from .published_encodings import SUPPORTED_ENCODINGS

DEFAULT_ENCODING = "cl100k_base"
O200K_ENCODING = "o200k_base"
O200K_FAMILIES: tuple[str, ...] = (
    "gpt-4o",
    "chatgpt-4o",
    "gpt-4.1",
    "gpt-4.5",
    "gpt-5",
    "o1",
    "o3",
    "o4",
    "gpt-oss",
)
_FAMILY_BOUNDARIES = ("-", ".", ":", "_", "@")


def normalise_model_name(model: str) -> str:
    """Lower-case `model` and strip provider prefixes and a leading `ft:`."""
    name = model.strip().lower().rsplit("/", 1)[-1]
    return name.removeprefix("ft:")


def encoding_name_for_model(model: str | None) -> str:
    """Return the encoding for `model` by the rule in this module's docstring."""
    if model is None:
        return DEFAULT_ENCODING
    if not isinstance(model, str):
        raise TypeError(f"model must be a str or None, got {type(model).__name__}: {model!r}")
    name = normalise_model_name(model)
    if name in SUPPORTED_ENCODINGS:
        return name
    for family in O200K_FAMILIES:
        if name == family or (name.startswith(family) and name[len(family)] in _FAMILY_BOUNDARIES):
            return O200K_ENCODING
    return DEFAULT_ENCODING
