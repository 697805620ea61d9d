"""Tests for the redaction step: the default rules (hermes_plugin_redaction) and the Redactor."""

from __future__ import annotations

import json
import time

import pluggy
import pytest

import hermes_plugin_redaction
from hermes_core.redaction import Redactor
from hermes_hookspecs import (
    HandoffSummary,
    Message,
    RedactionRule,
    RegistrationError,
    SummarySection,
    ToolCall,
    ToolFunction,
    TurnRecord,
    hookimpl,
    specs,
)
from hermes_hookspecs.markers import PROJECT_NAME
from hermes_plugin_redaction import default_rules


@pytest.fixture
def redactor() -> Redactor:
    return Redactor(default_rules())


# (sample text, the secret inside it that must disappear, the rule expected to fire)
SECRETS: list[tuple[str, str, str]] = [
    (
        "export OPENAI_API_KEY=sk-proj-Zt8qLm3Vx9KpR2sW7yB4nC6dF1gH5jA0eUiO",
        "sk-proj-Zt8qLm3Vx9KpR2sW7yB4nC6dF1gH5jA0eUiO",
        "",
    ),
    (
        "client = OpenAI(api_key='sk-Q7wE1rT4yU8iO2pA5sD9fG3hJ6kL0zXc')",
        "sk-Q7wE1rT4yU8iO2pA5sD9fG3hJ6kL0zXc",
        "",
    ),
    (
        "old-style key sk-svcacct-Hh3Jj4Kk5Ll6Mm7Nn8Oo9Pp0Qq1Rr2Ss3Tt in the log",
        "sk-svcacct-Hh3Jj4Kk5Ll6Mm7Nn8Oo9Pp0Qq1Rr2Ss3Tt",
        "openai_api_key",
    ),
    (
        "ANTHROPIC_API_KEY: "
        "sk-ant-api03-x8Yk2LmQ9vR4tW7zA1bC3dE5fG6hJ8kN0pS2uV4wX6yZ-_aB1cD3eF5gH7j",
        "sk-ant-api03-x8Yk2LmQ9vR4tW7zA1bC3dE5fG6hJ8kN0pS2uV4wX6yZ-_aB1cD3eF5gH7j",
        "",
    ),
    (
        "git remote set-url origin https://ghp_4rT9wQ2zX7cV1bN8mK3jH6gF5dS0aP2oI9uY@github.com/a/b",
        "ghp_4rT9wQ2zX7cV1bN8mK3jH6gF5dS0aP2oI9uY",
        "",
    ),
    (
        "token "
        "github_pat_11ABCDEFG0abcdefghijkl_MNOPQRSTUVWXYZ0123456789abcdefghijklmnopqrstuvwxyz012",
        "github_pat_11ABCDEFG0abcdefghijkl_MNOPQRSTUVWXYZ0123456789abcdefghijklmnopqrstuvwxyz012",
        "github_token",
    ),
    (
        "[default]\naws_access_key_id = AKIAQ3EGRT7PX5LMHN2K\n",
        "AKIAQ3EGRT7PX5LMHN2K",
        "aws_access_key_id",
    ),
    (
        "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYzq8Lm3Vx9K",
        "wJalrXUtnFEMI/K7MDENG/bPxRfiCYzq8Lm3Vx9K",
        "aws_secret_access_key",
    ),
    (
        '{"AWS_SECRET_ACCESS_KEY": "wJalrXUtnFEMI/K7MDENG/bPxRfiCYzq8Lm3Vx9K"}',
        "wJalrXUtnFEMI/K7MDENG/bPxRfiCYzq8Lm3Vx9K",
        "",
    ),
    (
        "SLACK_BOT_TOKEN=xoxb-2848192837-4827364510293-Gh7Jk2Lm9Qw3Er5Ty8Ui1Op4",
        "xoxb-2848192837-4827364510293-Gh7Jk2Lm9Qw3Er5Ty8Ui1Op4",
        "",
    ),
    (
        "post to https://hooks.slack.com/services/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",
        "hooks.slack.com/services/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",
        "slack_webhook",
    ),
    (
        "maps key AIzaSyD3x9K2mPq7Rt4Wv8Yz1Ab5Cd6Ef0Gh2Ij in config.js",
        "AIzaSyD3x9K2mPq7Rt4Wv8Yz1Ab5Cd6Ef0Gh2Ij",
        "google_api_key",
    ),
    (
        "access token ya29.a0AfH6SMBx7Kq2Lm9Pz4Rt8Wv1Yb3Cd5Ef7Gh9Ij",
        "ya29.a0AfH6SMBx7Kq2Lm9Pz4Rt8Wv1Yb3Cd5Ef7Gh9Ij",
        "google_oauth_token",
    ),
    (
        "curl -H 'Authorization: Bearer 9f8e7d6c5b4a39281706f5e4d3c2b1a0' https://api.example.com",
        "9f8e7d6c5b4a39281706f5e4d3c2b1a0",
        "authorization_header",
    ),
    (
        "the proxy sent bearer abc123def456ghi789jkl012 upstream",
        "abc123def456ghi789jkl012",
        "bearer_token",
    ),
    (
        "GET / HTTP/1.1\nHost: x\nAuthorization: Basic YWxhZGRpbjpvcGVuc2VzYW1l\nAccept: */*",
        "YWxhZGRpbjpvcGVuc2VzYW1l",
        "authorization_header",
    ),
    (
        'requests.get(url, headers={"authorization": "token 0a1b2c3d4e5f6a7b8c9d"})',
        "0a1b2c3d4e5f6a7b8c9d",
        "authorization_header",
    ),
    (
        "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA7b9x\nQ2xk\n"
        "-----END RSA PRIVATE KEY-----",
        "MIIEowIBAAKCAQEA7b9x",
        "private_key_block",
    ),
    (
        "key:\n-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmU\n(truncated",
        "b3BlbnNzaC1rZXktdjEAAAAABG5vbmU",
        "private_key_block",
    ),
    (
        "-----BEGIN PGP PRIVATE KEY BLOCK-----\n\nlQOYBF0\n-----END PGP PRIVATE KEY BLOCK-----",
        "lQOYBF0",
        "private_key_block",
    ),
    ("DATABASE_PASSWORD=Tr0ub4dor&3", "Tr0ub4dor&3", "password_assignment"),
    ("db:\n  user: app\n  password: hunter2\n", "hunter2", "password_assignment"),
    ('{"username": "ada", "password": "c0rrect horse"}', "c0rrect horse", "password_assignment"),
    ("mysql -u root --password=S3cr3tPass", "S3cr3tPass", "password_assignment"),
    ("client_secret='GOCSPX-2kq9xW3mZ7'", "GOCSPX-2kq9xW3mZ7", "password_assignment"),
    (
        "DATABASE_URL=postgres://app:pg-Pa55word@db.internal:5432/app",
        "pg-Pa55word",
        "url_password",
    ),
    (
        "id_token=eyJhbGciOiJSUzI1NiIsImtpZCI6IjEifQ.eyJzdWIiOiIxMjM0NTY3ODkwIiwiaWF0IjoxNTE2MjM5MDIyfQ.dBjftJeZ4CVPmB92K27uhbUJU1p1r_wW1gFWFOEjXk",
        "eyJzdWIiOiIxMjM0NTY3ODkwIiwiaWF0IjoxNTE2MjM5MDIyfQ",
        "",
    ),
]

# formats added for issue #16 (each rule must catch its own sample)
SECRETS += [
    (
        '{"SecretAccessKey": "Zq4Xw8Ce2Vr6Bt1Ny5Mu9Ki3aBcDeFgHiJkLmNoPqR", "SessionToken": "x"}',
        "Zq4Xw8Ce2Vr6Bt1Ny5Mu9Ki3aBcDeFgHiJkLmNoPqR",
        "aws_session_credentials",
    ),
    (
        "export AWS_SESSION_TOKEN=IQoJb3JpZ2luX2VjEaBcDeFgHiJkLmNoPqRsTuVwXyZ0123456789+/=",
        "IQoJb3JpZ2luX2VjEaBcDeFgHiJkLmNoPqRsTuVwXyZ0123456789+/=",
        "aws_session_credentials",
    ),
    (
        "charge with sk_live_51HxYzAbCdEfGhIjKlMnOpQrStUvWxYz0123456789AbCdEfGhIjKlMnOpQr",
        "sk_live_51HxYzAbCdEfGhIjKlMnOpQrStUvWxYz0123456789AbCdEfGhIjKlMnOpQr",
        "stripe_key",
    ),
    (
        "login with hf_AbCdEfGhIjKlMnOpQrStUvWxYzAbCdEfGh then pull",
        "hf_AbCdEfGhIjKlMnOpQrStUvWxYzAbCdEfGh",
        "huggingface_token",
    ),
    (
        "token npm_AbCdEfGhIjKlMnOpQrStUvWxYz0123456789 published",
        "npm_AbCdEfGhIjKlMnOpQrStUvWxYz0123456789",
        "npm_token",
    ),
    (
        "PuTTY-User-Key-File-2: ssh-rsa\nEncryption: none\nPrivate-Lines: 1\n"
        "AAAAgQDsecretPuTTYline0123\nPrivate-MAC: 0a1b2c3d\nafter",
        "AAAAgQDsecretPuTTYline0123",
        "putty_private_key",
    ),
]

# texts that must pass through unchanged
NON_SECRETS: list[str] = [
    "pip install scikit-learn and import sklearn",
    "commit 3f786850e387550fdab836ed7e6dc881de23001b fixed the task-1234 regression",
    "request id 123e4567-e89b-12d3-a456-426614174000 took 250ms",
    "the bearer of bad news arrived; bearer tokens are documented in RFC 6750",
    "Authorization: required for every endpoint",
    "reset your password: click the link in the email",
    "password = None",
    'password = os.environ["DB_PASSWORD"]',
    "password=$DB_PASSWORD ./run.sh",
    "password: ${{ secrets.DB_PASSWORD }}",
    "api_key = get_api_key()",
    "password = '********'",
    "-----BEGIN PUBLIC KEY-----\nMIIBIjANBgkqhkiG9w0BAQEFAAOCAQ8AMIIBCgKCAQEA\n"
    "-----END PUBLIC KEY-----",
    "-----BEGIN CERTIFICATE-----\nMIIDdzCCAl+gAwIBAgIEAgAAuTANBgkqhkiG9w0BAQUFADBa\n"
    "-----END CERTIFICATE-----",
    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl ada@box",
    "see https://docs.python.org/3/library/re.html#re.sub and http://localhost:8080/api",
    "sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
    "The AKIA prefix marks AWS access keys; ghp_ marks GitHub tokens.",
    "use a task-scoped token: see docs/auth.md",
    "日本語のテキスト and emoji 🎉 survive",
]


@pytest.mark.parametrize(("text", "secret", "rule"), SECRETS, ids=[s[0][:30] for s in SECRETS])
def test_default_rules_scrub_realistic_secrets(
    redactor: Redactor, text: str, secret: str, rule: str
) -> None:
    out = redactor.redact(text)
    assert secret not in out, out
    assert "[REDACTED:" in out
    if rule:
        only = Redactor([r for r in default_rules() if r.name == rule])
        assert secret not in only.redact(text), f"rule {rule!r} alone does not catch it"


@pytest.mark.parametrize("text", NON_SECRETS, ids=[t[:30] for t in NON_SECRETS])
def test_default_rules_leave_non_secrets_alone(redactor: Redactor, text: str) -> None:
    assert redactor.redact(text) == text


def test_redaction_keeps_the_surrounding_text(redactor: Redactor) -> None:
    out = redactor.redact("deploy with password=hunter2 then restart nginx")
    assert out == "deploy with password=[REDACTED:password] then restart nginx"
    out = redactor.redact("Authorization: Bearer 9f8e7d6c5b4a39281706f5e4d3c2b1a0")
    assert out == "Authorization: Bearer [REDACTED:authorization]"


def test_redaction_is_idempotent(redactor: Redactor) -> None:
    for text, _secret, _rule in SECRETS:
        once = redactor.redact(text)
        assert redactor.redact(once) == once, once


def test_every_default_rule_is_exercised() -> None:
    fired: set[str] = set()
    for rule in default_rules():
        single = Redactor([rule])
        if any(single.redact(text) != text for text, _s, _r in SECRETS):
            fired.add(rule.name)
    assert fired == {rule.name for rule in default_rules()}


def test_rules_apply_in_name_order_whatever_the_input_order() -> None:
    first = RedactionRule(name="a-first", pattern=r"secret-(\w+)", replacement=r"<\g<1>>")
    second = RedactionRule(name="b-second", pattern=r"<(\w+)>", replacement="[gone]")
    for order in ([first, second], [second, first]):
        redactor = Redactor(order)
        assert [r.name for r in redactor.rules] == ["a-first", "b-second"]
        assert redactor.redact("x secret-abc y") == "x [gone] y"


def test_duplicate_rule_names_are_an_error() -> None:
    rule = RedactionRule(name="dup", pattern="x")
    with pytest.raises(RegistrationError, match="'dup'"):
        Redactor([rule, rule.model_copy()])


def test_bad_pattern_is_refused_naming_the_field() -> None:
    with pytest.raises(ValueError, match="pattern does not compile"):
        RedactionRule(name="bad", pattern="(unclosed")


def test_a_replacement_naming_a_missing_group_is_refused_when_made() -> None:
    # before, it failed only on the first text that needed redacting (or, with the fast
    # path, never: a text it does not match was returned as it was)
    with pytest.raises(ValueError, match=r"replacement '\\\\2' does not fit the pattern"):
        RedactionRule(name="bad", pattern=r"(a)bc", replacement=r"\2")
    with pytest.raises(ValueError, match="does not fit the pattern"):
        RedactionRule(name="bad", pattern=r"abc", replacement=r"\g<name>")
    assert RedactionRule(name="ok", pattern=r"(a)bc", replacement=r"\1[X]").replacement


def test_redact_message_covers_content_parts_tool_arguments_and_summary(
    redactor: Redactor,
) -> None:
    key = "sk-proj-Zt8qLm3Vx9KpR2sW7yB4nC6dF1gH5jA0eUiO"
    call = ToolCall(
        id="c1",
        function=ToolFunction(
            name="shell", arguments=json.dumps({"cmd": f"curl -u x:{key}", "n": 3})
        ),
    )
    message = Message(
        role="assistant",
        content=[{"type": "text", "text": f"key {key}"}, {"type": "image_url", "image_url": {}}],
        tool_calls=[call],
    )
    out = redactor.redact_message(message)
    assert key not in out.model_dump_json()
    assert json.loads(out.tool_calls[0].function.arguments)["n"] == 3  # type: ignore[index]
    assert out.content[1] == {"type": "image_url", "image_url": {}}  # type: ignore[index]
    # input untouched
    assert message.tool_calls[0].function.arguments == call.function.arguments  # type: ignore[index]

    summary = Message(
        role="user",
        kind="summary",
        content="summary",
        summary=HandoffSummary(
            critical_context=f"token {key}",
            extra=[SummarySection(title="Identifiers", body=f"password=hunter2 {key}")],
        ),
    )
    red = redactor.redact_message(summary)
    assert key not in red.model_dump_json() and "hunter2" not in red.model_dump_json()


def test_unchanged_tool_arguments_keep_their_bytes(redactor: Redactor) -> None:
    arguments = '{"path":  "a.txt"}'
    message = Message(
        role="assistant",
        tool_calls=[ToolCall(id="c", function=ToolFunction(name="read", arguments=arguments))],
    )
    assert redactor.redact_message(message).tool_calls[0].function.arguments == arguments  # type: ignore[index]


def test_redact_turn_and_nested_values(redactor: Redactor) -> None:
    turn = TurnRecord(
        session_id="s",
        turn_id="t",
        user_text="my password: hunter2",
        assistant_text="stored AKIAQ3EGRT7PX5LMHN2K",
        messages=[Message(role="user", content="my password: hunter2")],
    )
    out = redactor.redact_turn(turn)
    assert "hunter2" not in out.model_dump_json()
    assert "AKIAQ3EGRT7PX5LMHN2K" not in out.assistant_text
    nested = {"a": ["password=hunter2", 5, {"b": "ghp_4rT9wQ2zX7cV1bN8mK3jH6gF5dS0aP2oI9uY"}]}
    assert "hunter2" not in json.dumps(redactor.redact_value(nested))
    assert "ghp_" not in json.dumps(redactor.redact_value(nested))


def test_large_input_is_redacted_quickly(redactor: Redactor) -> None:
    filler = "lorem ipsum dolor sit amet, bearer of news; password: see docs. " * 20_000
    text = filler + "password=hunter2" + "x" * 100_000 + "Authorization" * 2_000
    started = time.monotonic()
    out = redactor.redact(text)
    assert time.monotonic() - started < 5.0
    assert "hunter2" not in out


def test_rules_come_from_the_hook_and_integrators_extend_them() -> None:
    class AcmeRules:
        @hookimpl
        def redaction_rules(self) -> list[RedactionRule]:
            return [RedactionRule(name="acme_token", pattern=r"acme_[0-9a-f]{16}")]

    pm = pluggy.PluginManager(PROJECT_NAME)
    pm.add_hookspecs(specs)
    pm.register(hermes_plugin_redaction)
    pm.register(AcmeRules())
    redactor = Redactor.from_hook(pm.hook)
    names = [rule.name for rule in redactor.rules]
    assert "acme_token" in names and "openai_api_key" in names
    assert names == sorted(names)
    out = redactor.redact("acme_0123456789abcdef and password=hunter2")
    assert "acme_0123456789abcdef" not in out and "hunter2" not in out


def test_hook_returning_garbage_is_named() -> None:
    class Broken:
        @hookimpl
        def redaction_rules(self) -> list[str]:
            return ["not a rule"]

    pm = pluggy.PluginManager(PROJECT_NAME)
    pm.add_hookspecs(specs)
    pm.register(Broken())
    with pytest.raises(RegistrationError, match="not a rule"):
        Redactor.from_hook(pm.hook)


def test_url_password_is_linear_on_dash_runs(redactor: Redactor) -> None:
    # issue #16: 100 KB of "x-x-x-..." took 36 s (every word boundary rescanned the run)
    text = "x-" * 50_000
    started = time.perf_counter()
    assert redactor.redact(text) == text
    assert time.perf_counter() - started < 0.5


def test_secrets_canary_is_caught_by_the_installed_rules() -> None:
    from hermes_core.testing.canary import CANARIES, canary_text, leaked

    assert len(CANARIES) >= 22
    full = Redactor(hermes_plugin_redaction.redaction_rules())
    assert leaked(full.redact(canary_text())) == []
    for canary in CANARIES:  # one at a time too: no rule relies on a neighbour
        assert canary.secret not in full.redact(canary.text), canary.name


def test_detect_secrets_formats_are_adopted_after_the_own_rules() -> None:
    from hermes_plugin_redaction import library_rules

    rules = library_rules()
    names = [rule.name for rule in rules]
    assert any(".StripeDetector." in name for name in names)
    assert all(name.startswith("vendor.detect_secrets.") for name in names)
    assert max(rule.name for rule in default_rules()) < min(names)  # own rules first
    excluded = ("JwtTokenDetector", "NpmDetector", "OpenAIDetector", "IPPublicDetector")
    assert not [name for name in names if any(f".{cls}." in name for cls in excluded)]
    redactor = Redactor(rules)
    twilio = "SK" + "0123456789abcdef" * 2
    sendgrid = "SG." + "a" * 22 + "." + "b" * 43
    out = redactor.redact(f"twilio {twilio} and sendgrid {sendgrid}")
    assert twilio not in out and sendgrid not in out
    assert "[REDACTED:twilio_api_key]" in out


def test_redact_value_walks_values_nested_thousands_deep() -> None:
    from hermes_core.redaction import Redactor
    from hermes_plugin_redaction import default_rules

    secret = "sk-" + "a" * 48
    deep: object = {"token": secret}
    for _ in range(5_000):
        deep = [deep, "plain"]
    out = Redactor(default_rules()).redact_value(deep)
    for _ in range(5_000):
        assert isinstance(out, list) and out[1] == "plain"
        out = out[0]
    assert out == {"token": "[REDACTED:openai_api_key]"}
