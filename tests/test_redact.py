"""Secrets on a command line: every spelling found leaking is hidden, counts stay readable."""

from __future__ import annotations

import pytest

from trainmeter.redact import REDACTED as R
from trainmeter.redact import redact_argv

SECRET = "S3cr3tV4lue"


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        # the eight spellings that leaked (issue 9), then the other common ones
        (["--openai_key", SECRET], ["--openai_key", R]),
        (["--wandb-key", SECRET], ["--wandb-key", R]),
        (["--pass", SECRET], ["--pass", R]),
        (["--passphrase", SECRET], ["--passphrase", R]),
        (["--key", SECRET], ["--key", R]),
        (["-p", SECRET], ["-p", R]),
        (["--db-url", f"postgres://u:{SECRET}@h/db"], ["--db-url", f"postgres://{R}@h/db"]),
        ([f"https://user:{SECRET}@host/x"], [f"https://{R}@host/x"]),
        (["--api-key", SECRET], ["--api-key", R]),
        (["--apikey", SECRET], ["--apikey", R]),
        ([f"--hf_token={SECRET}"], [f"--hf_token={R}"]),
        ([f"--password={SECRET}"], [f"--password={R}"]),
        (["--passwd", SECRET], ["--passwd", R]),
        (["--db_pwd", SECRET], ["--db_pwd", R]),
        (["--auth", SECRET], ["--auth", R]),
        (["--basic-auth", SECRET], ["--basic-auth", R]),
        (["--aws-secret-access-key", SECRET], ["--aws-secret-access-key", R]),
        (["--credentials", SECRET], ["--credentials", R]),
        (["--gcp_credential", SECRET], ["--gcp_credential", R]),
        (["--cookie", SECRET], ["--cookie", R]),
        (["--access-token", SECRET], ["--access-token", R]),
        (["--client_secret", SECRET], ["--client_secret", R]),
        ([f"WANDB_API_KEY={SECRET}", "python"], [f"WANDB_API_KEY={R}", "python"]),
        ([f"HF_TOKEN={SECRET}"], [f"HF_TOKEN={R}"]),
        ([f"-p{SECRET}"], [f"-p{R}"]),  # mysql's attached form
        ([f"--mlflow-uri=https://me:{SECRET}@mlflow.example"], [f"--mlflow-uri=https://{R}@mlflow.example"]),
        (
            ["bash", "-c", f"python train.py --api-key {SECRET} --passes 3 --lr 1e-3"],
            ["bash", "-c", f"python train.py --api-key {R} --passes 3 --lr 1e-3"],
        ),
        (
            ["sh", "-c", f"HF_TOKEN={SECRET} torchrun t.py --db postgres://a:{SECRET}@db -p 8080"],
            ["sh", "-c", f"HF_TOKEN={R} torchrun t.py --db postgres://{R}@db -p 8080"],
        ),
        (
            ["bash", "-c", f"python t.py --password='{SECRET} x' --key=\"{SECRET}\" -p {SECRET}"],
            ["bash", "-c", f"python t.py --password={R} --key={R} -p {R}"],
        ),
        # readable: whole parts only, and numbers after -p
        (["--passes", "3"], ["--passes", "3"]),
        (["-p", "8080"], ["-p", "8080"]),
        (["-p8080"], ["-p8080"]),
        (["--max-tokens", "512"], ["--max-tokens", "512"]),
        (["--max_new_tokens=64"], ["--max_new_tokens=64"]),
        (["--tokens-per-step", "4096"], ["--tokens-per-step", "4096"]),
        (["--tokenizer", "gpt2"], ["--tokenizer", "gpt2"]),
        (["--keyframes", "4"], ["--keyframes", "4"]),
        (["--monkey", "1"], ["--monkey", "1"]),
        (["--compass", "n"], ["--compass", "n"]),
        (["https://example.com/data.bin"], ["https://example.com/data.bin"]),
        (["--token", "--lr", "3"], ["--token", "--lr", "3"]),  # a flag is not a value
        (["train.py", "--steps", "10"], ["train.py", "--steps", "10"]),
    ],
)
def test_redaction(argv: list[str], expected: list[str]) -> None:
    assert redact_argv(argv) == expected
    if expected != argv:
        assert SECRET not in " ".join(redact_argv(argv))


def test_nothing_secret_in_any_file_of_the_run(tmp_path) -> None:
    from .conftest import run_dirs, run_tm

    command = f"exit 0 # --wandb-key {SECRET} https://u:{SECRET}@h"
    result = run_tm(
        ["-q", "--", "sh", "-c", command, "--openai_key", SECRET, "--pass", SECRET,
         f"--db-url=postgres://u:{SECRET}@h", "-p", SECRET],
        tmp_path,
    )
    assert result.returncode == 0, result.stderr
    [run] = run_dirs(tmp_path)
    for name in ("meta.json", "events.jsonl", "summary.json"):
        text = (run / name).read_text()
        assert SECRET not in text, name
    assert SECRET not in result.stderr
