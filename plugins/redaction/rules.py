"""The default redaction rules: common credential formats, scrubbed before text reaches memory.

Each rule is a :class:`~hermes_hookspecs.RedactionRule` (a name, a regular
expression and a replacement). The core applies all contributed rules in
``name`` order, so the rules here are written to work regardless of which ran
before them: every replacement reads ``[REDACTED:<what>]`` and no pattern
matches that text.

What is caught, and what is deliberately left alone:

* ``anthropic_api_key``: ``sk-ant-...`` keys (checked before the OpenAI rule).
* ``authorization_header``: the value of ``Authorization:`` / ``Proxy-Authorization:``
  headers (also ``"authorization": "..."`` in JSON and ``authorization=...``); the
  scheme word (``Bearer``, ``Basic``...) is kept. A bare value must look like a
  credential (16+ characters with a digit) so prose such as
  ``Authorization: required`` survives.
* ``aws_access_key_id``: ``AKIA``/``ASIA``/... + 16 upper-case characters.
* ``aws_secret_access_key``: a 40-character secret after an ``aws_secret_access_key``
  / ``AWS_SECRET_ACCESS_KEY`` key (a bare 40-character string is too ambiguous:
  git object ids look the same).
* ``bearer_token``: ``Bearer <token>`` where the token has 16+ characters and a digit
  ("the bearer of bad news" survives).
* ``github_token``: ``ghp_``/``gho_``/``ghu_``/``ghs_``/``ghr_`` tokens and
  ``github_pat_`` fine-grained tokens.
* ``google_api_key``: ``AIza`` + 35 characters; ``google_oauth_token``: ``ya29.`` tokens.
* ``jwt``: three base64url segments whose first two start with ``eyJ``.
* ``openai_api_key``: ``sk-...`` / ``sk-proj-...`` / ``sk-svcacct-...`` keys of 20+
  characters (``scikit-learn`` survives).
* ``password_assignment``: the value in ``password=...``, ``DB_PASSWORD: ...``,
  ``"password": "..."``, ``api_key = '...'``, ``client_secret=...`` and similar
  assignments. Code that only *refers* to a secret survives: ``password = None``,
  ``password=$DB_PASSWORD``, ``password = os.environ["X"]``, ``password = get()``.
* ``private_key_block``: PEM/OpenSSH/PGP private key blocks, whole (also a block cut
  off before its END line). Public keys and certificates survive.
* ``slack_token``: ``xoxb-``/``xoxp-``/``xoxa-``/``xoxr-``/``xoxs-``/``xapp-`` tokens;
  ``slack_webhook``: ``https://hooks.slack.com/services/...`` URLs.
* ``url_password``: the password in ``scheme://user:password@host`` URLs (the user
  name and host are kept).

Rules that only match after a key name (``authorization_header``,
``aws_secret_access_key``, ``password_assignment``) also accept the key quoted, as in
JSON (``"password": "..."``). After a colon, an unquoted ``password_assignment`` value
must end the line or the item (``password: hunter2``), so prose such as
``reset your password: click the link`` survives.
"""

from __future__ import annotations

from hermes_hookspecs import RedactionRule

_PASSWORD_KEYS = (
    r"password|passwd|passphrase|pwd|secret[_-]?key|client[_-]?secret|api[_-]?key|apikey"
    r"|access[_-]?token|auth[_-]?token|refresh[_-]?token|private[_-]?key"
)
# values that only refer to a secret, or are placeholders
_NOT_A_SECRET = (
    r"[\"']?(?:None|null|nil|true|false|undefined|\*+|x{3,}|\.\.\.|<[^>\s]*>)[\"']?"
    r"(?![^\s\"',;)}\]])"
)


def default_rules() -> list[RedactionRule]:
    """Fresh copies of the default rules (see the module docstring for what each catches)."""
    return [
        RedactionRule(
            name="anthropic_api_key",
            pattern=r"(?<![A-Za-z0-9_-])sk-ant-[A-Za-z0-9_-]{20,}",
            replacement="[REDACTED:anthropic_api_key]",
        ),
        RedactionRule(
            name="authorization_header",
            pattern=(
                r"(?i)(\b(?:proxy-)?authorization[\"']?\s*[:=]\s*[\"']?)"
                r"(?:"
                r"((?:basic|bearer|token|digest|negotiate|apikey|aws4-hmac-sha256)\s+)"
                r"(?!\[REDACTED)[^\s\"']{8,}[^\"'\n]*"
                r"|(?!\[REDACTED)(?=[^\s\"',;]*\d)[^\s\"',;]{16,}"
                r")"
            ),
            replacement=r"\g<1>\g<2>[REDACTED:authorization]",
        ),
        RedactionRule(
            name="aws_access_key_id",
            pattern=r"(?<![A-Z0-9])(?:AKIA|ASIA|ABIA|ACCA|AGPA|AIDA|AROA|ANPA)[A-Z0-9]{16}(?![A-Z0-9])",
            replacement="[REDACTED:aws_access_key_id]",
        ),
        RedactionRule(
            name="aws_secret_access_key",
            pattern=(
                r"(?i)(aws_?secret_?(?:access_?)?key[\"']?\s*[:=]\s*[\"']?)"
                r"[A-Za-z0-9/+=]{40}(?![A-Za-z0-9/+=])"
            ),
            replacement=r"\g<1>[REDACTED:aws_secret_access_key]",
        ),
        RedactionRule(
            name="aws_session_credentials",
            # the JSON of `aws sts` / `aws configure export-credentials` and the
            # session-token variables: SecretAccessKey, SessionToken, aws_session_token
            pattern=(
                r"(?i)((?<![A-Za-z0-9])(?:aws_?)?(?:secret_?access_?key|session_?token"
                r"|security_?token)[\"']?\s*[:=]\s*[\"']?)(?!\[REDACTED)[A-Za-z0-9/+=]{16,}+"
            ),
            replacement=r"\g<1>[REDACTED:aws_session_credentials]",
        ),
        RedactionRule(
            name="bearer_token",
            pattern=r"(?i)\b(bearer\s+)(?=[A-Za-z0-9._~+/-]*\d)[A-Za-z0-9._~+/-]{16,}=*",
            replacement=r"\g<1>[REDACTED:bearer_token]",
        ),
        RedactionRule(
            name="github_token",
            pattern=(
                r"(?<![A-Za-z0-9_])(?:gh[pousr]_[A-Za-z0-9]{36,}|github_pat_[A-Za-z0-9_]{22,})"
            ),
            replacement="[REDACTED:github_token]",
        ),
        RedactionRule(
            name="google_api_key",
            pattern=r"(?<![A-Za-z0-9_-])AIza[0-9A-Za-z_-]{35}(?![0-9A-Za-z_-])",
            replacement="[REDACTED:google_api_key]",
        ),
        RedactionRule(
            name="google_oauth_token",
            pattern=r"(?<![A-Za-z0-9_-])ya29\.[0-9A-Za-z_-]{20,}",
            replacement="[REDACTED:google_oauth_token]",
        ),
        RedactionRule(
            name="huggingface_token",
            pattern=r"(?<![A-Za-z0-9_])hf_[A-Za-z0-9]{30,}+",
            replacement="[REDACTED:huggingface_token]",
        ),
        RedactionRule(
            name="jwt",
            pattern=(
                r"(?<![A-Za-z0-9_-])eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}"
                r"\.[A-Za-z0-9_-]*"
            ),
            replacement="[REDACTED:jwt]",
        ),
        RedactionRule(
            name="npm_token",
            # npm_ granular/automation tokens, and the value of an .npmrc _authToken line
            pattern=(
                r"(?<![A-Za-z0-9_])npm_[A-Za-z0-9]{36,}+"
                r"|(?<=:_authToken=)(?!\[REDACTED)[^\s\"']++"
            ),
            replacement="[REDACTED:npm_token]",
        ),
        RedactionRule(
            name="openai_api_key",
            pattern=r"(?<![A-Za-z0-9_-])sk-(?!ant-)(?:proj-|svcacct-|admin-)?[A-Za-z0-9_-]{20,}",
            replacement="[REDACTED:openai_api_key]",
        ),
        RedactionRule(
            name="password_assignment",
            pattern=(
                rf"(?im)((?<![A-Za-z])(?:{_PASSWORD_KEYS})[\"']?\s*)(?:(=\s*)|(:(?!//)\s*))"
                rf"(?!{_NOT_A_SECRET})"
                r"(?:"
                r"([\"'])(?!\$)[^\"'\n]+(?=\4)"
                r"|(?![\"'$\[])[^\s\"'`,;()\[\]{}<>]++(?![(\[.])"
                # after a colon (YAML, prose) the value must end the line or the item
                r"(?(3)(?=[ \t]*(?:$|[,;}\]#])))"
                r")"
            ),
            replacement=r"\g<1>\g<2>\g<3>\g<4>[REDACTED:password]",
        ),
        RedactionRule(
            name="private_key_block",
            pattern=(
                r"-----BEGIN ((?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?)-----"
                r"[\s\S]*?(?:-----END \1-----|\Z)"
            ),
            replacement="[REDACTED:private_key]",
        ),
        RedactionRule(
            name="putty_private_key",
            # a .ppk file, whole: header, public and private lines, up to its MAC line
            pattern=(
                r"PuTTY-User-Key-File-\d++:[\s\S]*?"
                r"(?:Private-(?:MAC|Hash):[ \t]*+[0-9A-Fa-f]*+|\Z)"
            ),
            replacement="[REDACTED:putty_private_key]",
        ),
        RedactionRule(
            name="slack_token",
            pattern=r"(?<![A-Za-z0-9_-])(?:xox[abposr]|xapp)-[A-Za-z0-9-]{10,}",
            replacement="[REDACTED:slack_token]",
        ),
        RedactionRule(
            name="slack_webhook",
            pattern=r"https://hooks\.slack\.com/(?:services|workflows|triggers)/[A-Za-z0-9/_-]+",
            replacement="[REDACTED:slack_webhook]",
        ),
        RedactionRule(
            name="stripe_key",
            pattern=r"(?<![A-Za-z0-9_])(?:sk|rk)_(?:live|test)_[0-9A-Za-z]{16,}+",
            replacement="[REDACTED:stripe_key]",
        ),
        RedactionRule(
            name="url_password",
            # a match can only start where a scheme starts (the look-behind), and the
            # possessive runs never give characters back: one pass over the text
            pattern=(
                r"(?i)(?<![a-z0-9+.-])([a-z][a-z0-9+.-]*+://[^/\s:@\[]++:)"
                r"(?!\[REDACTED)[^/\s@]++@"
            ),
            replacement=r"\g<1>[REDACTED:url_password]@",
        ),
    ]
