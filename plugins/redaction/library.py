"""Provider key formats adopted from detect-secrets (Yelp), as redaction rules.

detect-secrets keeps a maintained set of regex-based detectors for vendor
credentials (Stripe, Twilio, GitLab, SendGrid, Discord, Telegram, Azure,
Mailchimp, Square, PyPI, IBM, SoftLayer, Cloudant, Artifactory...). Rather
than copying those formats into a private list, this module reads each
adopted detector's ``denylist`` at run time and turns every pattern into a
:class:`~hermes_hookspecs.RedactionRule` named
``vendor.detect_secrets.<Detector>.<n>`` whose replacement names the detector's
``secret_type``. The ``vendor.`` prefix sorts after the plugin's own rules, so
those apply first: they keep more context (``password=[REDACTED:password]``)
and take a whole token where a detect-secrets pattern stops at a fixed length
(``sk_live_`` keys are longer than the 24 characters its Stripe pattern takes).
A new detect-secrets release therefore brings its new and corrected formats
with it; the linear-time property test
(``tests/test_redaction_linear.py``) runs over these rules as well, so a
release that introduced a backtracking pattern would fail it.

Not adopted, and why:

* ``JwtTokenDetector``, ``NpmDetector``, ``OpenAIDetector``: their patterns are
  not linear (``eyJ[...]+\\.`` on ``eyJeyJeyJ...``, ``//.+/:_authToken`` on
  ``////...``, ``sk-[...]*[...]{20}T3BlbkFJ`` on ``sk-sk-sk-...`` take 0.1-1.2 s
  on 20 KB and grow with the square of the length). The same formats are
  covered by the guarded ``jwt``, ``npm_token`` and ``openai_api_key`` rules.
* ``PrivateKeyDetector``: matches only the ``BEGIN`` line; ``private_key_block``
  and ``putty_private_key`` remove the whole key.
* ``BasicAuthDetector``: ``url_password`` removes the same password but keeps the
  scheme, user and host readable.
* ``IPPublicDetector``: an IP address is not a credential.
* ``KeywordDetector`` and the entropy detectors are not regex-based (they depend on
  the file type and a Shannon-entropy threshold); ``password_assignment`` covers
  keyword assignments.

detect-secrets matches the regex flags of a pattern; they are carried over as
inline flags so the rule is a plain pattern string like every other rule.
"""

from __future__ import annotations

import importlib
import re
from typing import Any

from hermes_hookspecs import RedactionRule

#: (module under ``detect_secrets.plugins``, detector class) adopted as rules
ADOPTED: tuple[tuple[str, str], ...] = (
    ("artifactory", "ArtifactoryDetector"),
    ("aws", "AWSKeyDetector"),
    ("azure_storage_key", "AzureStorageKeyDetector"),
    ("cloudant", "CloudantDetector"),
    ("discord", "DiscordBotTokenDetector"),
    ("github_token", "GitHubTokenDetector"),
    ("gitlab_token", "GitLabTokenDetector"),
    ("ibm_cloud_iam", "IbmCloudIamDetector"),
    ("ibm_cos_hmac", "IbmCosHmacDetector"),
    ("mailchimp", "MailchimpDetector"),
    ("pypi_token", "PypiTokenDetector"),
    ("sendgrid", "SendGridDetector"),
    ("slack", "SlackDetector"),
    ("softlayer", "SoftlayerDetector"),
    ("square_oauth", "SquareOAuthDetector"),
    ("stripe", "StripeDetector"),
    ("telegram_token", "TelegramBotTokenDetector"),
    ("twilio", "TwilioKeyDetector"),
)

_FLAGS = ((re.IGNORECASE, "i"), (re.MULTILINE, "m"), (re.DOTALL, "s"), (re.VERBOSE, "x"))


def _inline(pattern: re.Pattern[str]) -> str:
    letters = "".join(letter for flag, letter in _FLAGS if pattern.flags & flag)
    return f"(?{letters}){pattern.pattern}" if letters else pattern.pattern


def _slug(secret_type: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", secret_type.lower()).strip("_")


def library_rules() -> list[RedactionRule]:
    """One rule per pattern of every adopted detect-secrets detector (see :data:`ADOPTED`)."""
    rules: list[RedactionRule] = []
    for module_name, class_name in ADOPTED:
        module = importlib.import_module(f"detect_secrets.plugins.{module_name}")
        detector: Any = getattr(module, class_name)
        for index, pattern in enumerate(detector.denylist):
            rules.append(
                RedactionRule(
                    name=f"vendor.detect_secrets.{class_name}.{index}",
                    pattern=_inline(pattern),
                    replacement=f"[REDACTED:{_slug(detector.secret_type)}]",
                )
            )
    return rules
