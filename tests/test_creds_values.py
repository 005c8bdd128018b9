"""Secrets by value, never by name alone (issue 19 item 3, issue 21 item 2): what `--env` and profile
exports may carry into a spec, and what is refused with `--env-secret` as the fix. Fast tier: pure."""

from __future__ import annotations

import secrets
import string

import pytest

from launchkit.core.parse import build_request
from launchkit.core.profiles import load_profiles
from launchkit.core.redact import redact_url, secret_value_kind
from launchkit.core.remoteurl import job_remote, strip_credentials
from launchkit.errors import UsageError

# Real --env values of gantry command lines in public repositories (and the kinds of ids their
# scripts pass): none of them is a secret, whatever the variable is called.
REAL_NOT_SECRETS = [
    ("GOOGLE_APPLICATION_CREDENTIALS", "/tmp/google_application_credentials.json"),  # ai2 ace scripts
    ("GOOGLE_APPLICATION_CREDENTIALS", "/path/to/key.json"),
    ("TOKEN_PATH", "/weka/oe-training-default/tokens/hf.txt"),
    ("KEY_ID_FILE", "key.json"),
    ("HF_HUB_TOKEN_PATH", "~/.cache/huggingface/token"),
    ("MAX_TOKENS", "4096"),
    ("API_KEY_REFRESH_SECONDS", "3600"),
    ("USE_TOKEN", "true"),
    ("SECRET_COUNT", "0"),
    ("AZURE_API_BASE", "https://my-resource.openai.azure.com/"),
    ("PYTORCH_ALLOC_CONF", "expandable_segments:True"),
    ("WANDB_RUN_GROUP", "samudra-anchor-4deg-coupled"),
    ("WANDB_NAME", "samudra-anchor4deg-coupled-eval-piC-ic0151-200yr"),
    ("WANDB_RUN_ID", "lk-3f2a9c1b0d4e5f67"),
    ("PRETRAIN_DATASET", "01JVQYZB8N5C37RN564Q8P24AP"),  # a Beaker dataset id (ULID)
    ("MODEL", "allenai/OLMo-2-1124-7B-Instruct"),
    ("MODEL", "HuggingFaceTB/SmolLM2-1.7B-Instruct"),
    ("MODEL", "OLMoE-1B-7B-0924-Instruct"),
    ("MODEL", "nvidia/Llama-3.1-Nemotron-70B-Instruct-HF"),
    ("RUN", "olmo2_7B_anneal_dolmino-mix-1124_50B_seed42069"),
    ("CKPT", "s3://ai2-llm/checkpoints/OLMo-small/bl8qyxia/step738020-unsharded"),
    ("CKPT", "/weka/oe-training-default/ai2-llm/checkpoints/OLMo-medium/peteish7/step928646-unsharded"),
    ("DATA", "gs://vcm-ml-intermediate/2026-07-14-X-SHiELD-AMIP-FME-3h-25km.zarr"),
    ("COMMIT", "a1b2c3d4e5f6a7b8c9d0e1f2a3b4c5d6e7f8a9b0"),  # git SHA
    ("DIGEST", "sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"),
    ("GREETING", "dGhpcyBpcyBhIHRlc3Q="),  # short base64 of plain text
    ("TORCH_DISTRIBUTED_DEBUG", "DETAIL"),
    ("DB_URL", "postgres://db.internal:5432/metrics"),
    ("CALLBACK", "https://example.com/done?run=abc&step=3#section"),
    ("TOKENIZERS_PARALLELISM", "false"),
]

JWT = (
    "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4gRG9lIn0."
    "SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c"
)
PEM = "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\n-----END OPENSSH PRIVATE KEY-----"
SECRETS = [  # (name, value, what the message says)
    ("DATABASE", "postgres://u:PASS@db/x", "password"),
    ("REPO", "https://ghp_abcdefghijklmnopqrstuvwxyz0123456789@github.com/o/r.git", "GitHub token"),
    ("REPO", "https://x-access-token@github.com/o/r.git", "user name"),
    ("CALLBACK", "https://app.example.com/cb#access_token=ya29.a0AfH6SMBx&token_type=bearer", "access_token"),
    ("HOOK", "https://api.example.com/v1?token=Zm9vYmFyYmF6cXV4", "token"),
    ("SIGNED", "https://bucket.s3.amazonaws.com/x?X-Amz-Signature=0a1b2c3d4e5f", "Signature"),
    ("FOO", JWT, "JWT"),
    ("FOO", PEM, "PEM"),
    ("FOO", "hf_" + "a1B2c3D4e5" * 3, "Hugging Face token"),
    ("FOO", "AKIAIOSFODNN7EXAMPLE", "AWS access key"),
    ("FOO", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "random"),  # AWS's documented example secret key
    ("FOO", "xoxb-123456789012-abcdefghijkl", "Slack"),
    # a secret-looking name with a word that is not a path, number or URL: a W&B key is hex
    ("WANDB_API_KEY", "a1b2c3d4e5f6a7b8c9d0e1f2a3b4c5d6e7f8a9b0", "named like a secret"),
    ("MY_SERVICE_PASSWORD", "hunter2", "named like a secret"),
]


@pytest.mark.parametrize("name,value", REAL_NOT_SECRETS)
def test_real_values_that_are_not_secrets_are_kept(name, value):
    assert secret_value_kind(value, name) is None
    req = build_request({"env": [f"{name}={value}"]}, ["python", "train.py"])
    assert [(e.name, e.value) for e in req.env] == [(name, value)]


@pytest.mark.parametrize("name,value,why", SECRETS)
def test_values_that_are_secrets_are_refused_without_quoting_them(name, value, why):
    assert why in (secret_value_kind(value, name) or "")
    with pytest.raises(UsageError) as e:
        build_request({"env": [f"{name}={value}"]}, ["python", "train.py"])
    text = f"{e.value} {e.value.hint}"
    assert f"--env-secret {name}" in text and f"--env-not-secret {name}" in text
    assert value not in text and "u:PASS" not in text and "abcdefghij" not in text


@pytest.mark.parametrize(
    "alphabet", [string.ascii_letters + string.digits, string.ascii_letters + string.digits + "-_"]
)
def test_random_keys_of_32_characters_are_refused(alphabet):
    """Generated keys (base62, base64url) of 32+ characters: the entropy check catches nearly all."""
    rng = secrets.SystemRandom()
    caught = sum(
        secret_value_kind("".join(rng.choice(alphabet) for _ in range(40))) is not None for _ in range(400)
    )
    assert caught >= 380


def test_the_override_keeps_a_false_positive_and_must_name_a_given_variable():
    value = "aB3dE5fG7hJ9kL1mN3pQ5rS7tU9vW1xY"
    with pytest.raises(UsageError):
        build_request({"env": [f"CODENAME={value}"]}, ["x"])
    req = build_request({"env": [f"CODENAME={value}"], "env_not_secret": ["CODENAME"]}, ["x"])
    assert req.env[0].value == value
    with pytest.raises(UsageError, match="OTHER"):
        build_request({"env": ["A=1"], "env_not_secret": ["OTHER"]}, ["x"])


def test_config_env_values_are_checked_too(tmp_path):
    from launchkit.config import load_config

    (tmp_path / "pyproject.toml").write_text('[tool.launchkit.env]\nDATABASE = "postgres://u:PASS@db/x"\n')
    cfg = load_config(cwd=str(tmp_path), environ={})
    with pytest.raises(UsageError) as e:
        build_request({}, ["x"], config=cfg, cwd=str(tmp_path))
    assert "DATABASE" in str(e.value) and "PASS" not in str(e.value) + str(e.value.hint)


@pytest.mark.parametrize("where", ["env", "setup"])
def test_profile_values_are_checked_by_value(where):
    def table(name: str, value: str) -> dict[str, object]:
        if where == "env":
            return {"mine": {"clusters": ["ai2/x"], "env": {name: value}}}
        return {"mine": {"clusters": ["ai2/x"], "setup": [{"export": {name: value}}]}}

    assert load_profiles(table("GOOGLE_APPLICATION_CREDENTIALS", "/etc/gcp/key.json"))["mine"]
    with pytest.raises(UsageError, match="--env-secret DB") as e:
        load_profiles(table("DB", "postgres://u:PASS@db/x"))
    assert "PASS" not in str(e.value)


@pytest.mark.parametrize(
    "url,clean",
    [
        ("https://github.com/o/r.git#access_token=abc123", "https://github.com/o/r.git"),
        ("https://github.com/o/r.git?access_token=abc123", "https://github.com/o/r.git"),
        ("https://u:pw@git.example.com/o/r.git", "https://git.example.com/o/r.git"),
        ("https://ghp_x@github.com/o/r.git#frag", "https://github.com/o/r.git#frag"),
    ],
)
def test_remote_urls_lose_their_credentials_before_the_spec(url, clean):
    assert strip_credentials(url) == clean
    assert job_remote(url).url == clean
    assert "abc123" not in redact_url(url) and "pw" not in redact_url(url)
