"""A secrets canary: credentials of many formats, planted in text that must never leave.

Each :class:`Canary` is a realistic line (a shell export, a config file, a
JSON credential document, a key file...) and the secret inside it. Plant
:func:`canary_text` in a session, send it through an outbound path (a
summarizer, a memory provider, a log handler) and check with
:func:`leaked` that none of the secrets arrived. All values are made up;
they only have the shape of real credentials.

Used by hermes-core's own tests and torture scenarios, and by plugin authors
who want to check that their provider or summarizer only sees redacted text.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True)
class Canary:
    """One planted credential: a name for reports, the line it sits in, the secret itself."""

    name: str
    text: str
    secret: str


_PEM_BODY = "MIIEpAIBAAKCAQEAcanaryPEMbodyQ7wE1rT4yU8iO2pA5sD9fG3hJ6kL0zXc"
_OPENSSH_BODY = "b3BlbnNzaC1rZXktdjEAAAAABG5vbmUcanaryOPENSSHbodyHh3Jj4Kk5Ll6"
_PUTTY_PRIVATE = "AAAAgCanaryPuTTYprivateLineZt8qLm3Vx9KpR2sW7yB4nC6dF1gH5jA0"
_SESSION_TOKEN = (
    "IQoJb3JpZ2luX2VjECanarySessionTokenAaBbCcDdEeFfGgHhIiJjKkLlMmNnOoPpQqRrSsTtUuVv"
    "WwXxYyZz0123456789+/AaBbCcDdEeFfGgHhIiJjKkLlMmNnOoPpQqRrSsTtUuVvWwXxYyZz01234"
)

CANARIES: tuple[Canary, ...] = (
    Canary(
        "openai_api_key",
        "export OPENAI_API_KEY=sk-proj-CanaryZt8qLm3Vx9KpR2sW7yB4nC6dF1gH5jA0eUiO",
        "sk-proj-CanaryZt8qLm3Vx9KpR2sW7yB4nC6dF1gH5jA0eUiO",
    ),
    Canary(
        "anthropic_api_key",
        "ANTHROPIC_API_KEY: sk-ant-api03-CanaryYk2LmQ9vR4tW7zA1bC3dE5fG6hJ8kN0pS2uV4wX6yZ",
        "sk-ant-api03-CanaryYk2LmQ9vR4tW7zA1bC3dE5fG6hJ8kN0pS2uV4wX6yZ",
    ),
    Canary(
        "aws_access_key_id",
        "[default]\naws_access_key_id = AKIAQ3EGRT7PXCANARY2\n",
        "AKIAQ3EGRT7PXCANARY2",
    ),
    Canary(
        "aws_secret_access_key",
        "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYCanary9K0z",
        "wJalrXUtnFEMI/K7MDENG/bPxRfiCYCanary9K0z",
    ),
    Canary(
        "aws_json_secret_access_key",
        '{"Credentials": {"AccessKeyId": "ASIAQ3EGRT7PXLMHN2KZ", '
        '"SecretAccessKey": "Zq4Xw8Ce2Vr6Bt1Ny5Mu9Ki3CanaryJSONsecret00",',
        "Zq4Xw8Ce2Vr6Bt1Ny5Mu9Ki3CanaryJSONsecret00",
    ),
    Canary(
        "aws_json_session_token",
        f'"SessionToken": "{_SESSION_TOKEN}", "Expiration": "2026-12-01T10:00:00Z"}}}}',
        _SESSION_TOKEN,
    ),
    Canary(
        "github_token",
        "git remote set-url origin https://ghp_Canary9wQ2zX7cV1bN8mK3jH6gF5dS0aP2oI9u@github.com/a/b",
        "ghp_Canary9wQ2zX7cV1bN8mK3jH6gF5dS0aP2oI9u",
    ),
    Canary(
        "github_fine_grained_token",
        "GH_TOKEN=github_pat_11CANARY0abcdefghijkl_MNOPQRSTUVWXYZ0123456789abcdefghijklmnopqr",
        "github_pat_11CANARY0abcdefghijkl_MNOPQRSTUVWXYZ0123456789abcdefghijklmnopqr",
    ),
    Canary(
        "slack_token",
        "SLACK_BOT_TOKEN=xoxb-2848192837-4827364510293-CanaryLm9Qw3Er5Ty8Ui1Op4",
        "xoxb-2848192837-4827364510293-CanaryLm9Qw3Er5Ty8Ui1Op4",
    ),
    Canary(
        "slack_webhook",
        "post to https://hooks.slack.com/services/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",
        "T024BE7LD/B08F6Q2KZ/CanaryCe2Vr6Bt1Ny5Mu9Ki3",
    ),
    Canary(
        "jwt",
        "id_token=eyJhbGciOiJSUzI1NiIsImtpZCI6IjEifQ.eyJjYW5hcnkiOiJqd3QiLCJzdWIiOiIxMjM0In0"
        ".dBjftJeZ4CVPmB92K27uhbUJU1p1r_wW1gFWFOEjXk",
        "eyJjYW5hcnkiOiJqd3QiLCJzdWIiOiIxMjM0In0",
    ),
    Canary(
        "pem_private_key",
        f"-----BEGIN RSA PRIVATE KEY-----\n{_PEM_BODY}\nQ2xkAAAA\n-----END RSA PRIVATE KEY-----",
        _PEM_BODY,
    ),
    Canary(
        "openssh_private_key",
        f"-----BEGIN OPENSSH PRIVATE KEY-----\n{_OPENSSH_BODY}\n-----END OPENSSH PRIVATE KEY-----",
        _OPENSSH_BODY,
    ),
    Canary(
        "putty_private_key",
        "PuTTY-User-Key-File-3: ssh-ed25519\nEncryption: none\nComment: ada@box\n"
        "Public-Lines: 2\nAAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0\nSdG6UOoqKLsabgH5C9okWi0dh2l9GKJl\n"
        f"Private-Lines: 1\n{_PUTTY_PRIVATE}\n"
        "Private-MAC: 6f3a9c2e1b7d4f8a0c5e9b3d7f1a2c4e6b8d0f2a4c6e8b0d2f4a6c8e0b2d4f6a",
        _PUTTY_PRIVATE,
    ),
    Canary(
        "stripe_live_key",
        "STRIPE_SECRET_KEY=sk_live_51CanaryQ7wE1rT4yU8iO2pA5sD9fG3hJ6kL0zXcVbNm",
        "sk_live_51CanaryQ7wE1rT4yU8iO2pA5sD9fG3hJ6kL0zXcVbNm",
    ),
    Canary(
        "stripe_restricted_key",
        "stripe.api_key = rk_test_CanaryHh3Jj4Kk5Ll6Mm7Nn8Oo9Pp0",
        "rk_test_CanaryHh3Jj4Kk5Ll6Mm7Nn8Oo9Pp0",
    ),
    Canary(
        "google_api_key",
        "maps key AIzaSyD3x9K2mPq7Rt4Wv8CanaryCd6Ef0Gh2Ij in config.js",
        "AIzaSyD3x9K2mPq7Rt4Wv8CanaryCd6Ef0Gh2Ij",
    ),
    Canary(
        "google_oauth_token",
        "access token ya29.a0AfH6SMBxCanaryLm9Pz4Rt8Wv1Yb3Cd5Ef7Gh9Ij",
        "ya29.a0AfH6SMBxCanaryLm9Pz4Rt8Wv1Yb3Cd5Ef7Gh9Ij",
    ),
    Canary(
        "url_password",
        "DATABASE_URL=postgres://app:CanaryPg-Pa55word@db.internal:5432/app",
        "CanaryPg-Pa55word",
    ),
    Canary(
        "bearer_token",
        "curl -H 'Authorization: Bearer 9f8e7d6c5b4aCanary1706f5e4d3c2b1a0' https://api.example.com",
        "9f8e7d6c5b4aCanary1706f5e4d3c2b1a0",
    ),
    Canary(
        "npm_token",
        "NPM_TOKEN=npm_CanaryQ7wE1rT4yU8iO2pA5sD9fG3hJ6kL0zXcVb",
        "npm_CanaryQ7wE1rT4yU8iO2pA5sD9fG3hJ6kL0zXcVb",
    ),
    Canary(
        "npmrc_auth_token",
        "//registry.npmjs.org/:_authToken=00a1b2c3-Canary-4d5e-8f90-a1b2c3d4e5f6",
        "00a1b2c3-Canary-4d5e-8f90-a1b2c3d4e5f6",
    ),
    Canary(
        "huggingface_token",
        "HF_TOKEN=hf_CanaryQwErTyUiOpAsDfGhJkLzXcVbNmQwErTy",
        "hf_CanaryQwErTyUiOpAsDfGhJkLzXcVbNmQwErTy",
    ),
    Canary(
        "password_assignment",
        "DATABASE_PASSWORD=CanaryTr0ub4dor&3",
        "CanaryTr0ub4dor&3",
    ),
    Canary(
        "sendgrid_api_key",
        "SENDGRID=SG.CanaryAbCdEfGhIjKlMnOp.CanaryQrStUvWxYz0123456789AbCdEfGhIjKlMnOpQ",
        "SG.CanaryAbCdEfGhIjKlMnOp.CanaryQrStUvWxYz0123456789AbCdEfGhIjKlMnOpQ",
    ),
    Canary(
        "gitlab_token",
        "CI_TOKEN=glpat-CanaryXw8Ce2Vr6Bt1Ny5M",
        "glpat-CanaryXw8Ce2Vr6Bt1Ny5M",
    ),
)


def canary_text(canaries: Iterable[Canary] = CANARIES) -> str:
    """Every canary line, one after another, separated by blank lines."""
    return "\n\n".join(canary.text for canary in canaries)


def leaked(text: str, canaries: Iterable[Canary] = CANARIES) -> list[str]:
    """The names of the canaries whose secret appears in ``text`` (empty: nothing leaked)."""
    return [canary.name for canary in canaries if canary.secret in text]
