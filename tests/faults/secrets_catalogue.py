"""Secret spellings on a command line: every one seen leaking (issue 9 and issue 22), each with
its own secret, so a test can say which one leaked and where."""

from __future__ import annotations


def _s(i: int) -> str:
    return f"Sx{i:02d}qQ7vW9zR"  # a distinct secret per spelling


def catalogue() -> list[tuple[list[str], str]]:
    """(argv fragment, the secret it holds), about 80 of them."""
    out: list[tuple[list[str], str]] = []

    def add(argv: list[str], secret: str) -> None:
        out.append((argv, secret))

    n = iter(range(100))
    # flag spellings, both `--flag value` and `--flag=value`
    flags = [
        "--openai_key", "--wandb-key", "--pass", "--passphrase", "--key", "--api-key", "--apikey",
        "--hf_token", "--password", "--passwd", "--db_pwd", "--auth", "--basic-auth",
        "--aws-secret-access-key", "--credentials", "--gcp_credential", "--cookie",
        "--access-token", "--client_secret",
        # camelCase (issue 22)
        "--hfToken", "--openaiApiKey", "--githubToken", "--awsSecretAccessKey", "--dbPassword",
        # argparse abbreviations
        "--tok", "--api_k", "--passw", "--secr",
        # the words that had no rule
        "--jwt", "--session", "--hmac", "--signature", "--pat", "--hftoken",
    ]
    for flag in flags:
        i = next(n)
        add([flag, _s(i)], _s(i))
        i = next(n)
        add([f"{flag}={_s(i)}"], _s(i))
    i = next(n)
    add([f"--key:{_s(i)}"], _s(i))
    i = next(n)
    add(["--password", f"--{_s(i)}"], _s(i))  # a password that starts with dashes
    i = next(n)
    add(["-p", _s(i)], _s(i))
    i = next(n)
    add([f"-p{_s(i)}"], _s(i))
    # environment assignments
    for name in ("WANDB_API_KEY", "HF_TOKEN", "PGPASSWORD", "GITHUB_PAT", "MYSQL_PWD"):
        i = next(n)
        add([f"{name}={_s(i)}"], _s(i))
    # authorization headers
    i = next(n)
    add(["--header", f"Authorization: Bearer {_s(i)}"], _s(i))
    i = next(n)
    add(["-H", f"Authorization: Bearer {_s(i)}"], _s(i))
    i = next(n)
    add(["-H", f"X-Api-Key: {_s(i)}"], _s(i))
    i = next(n)
    add(["bash", "-c", f"curl -H 'Authorization: Bearer {_s(i)}' https://h/x"], _s(i))
    # user:password pairs
    i = next(n)
    add(["-u", f"user:{_s(i)}"], _s(i))
    i = next(n)
    add([f"--user=admin:{_s(i)}"], _s(i))
    # URLs: user info and query secrets
    i = next(n)
    add(["--db-url", f"postgres://u:{_s(i)}@h/db"], _s(i))
    i = next(n)
    add([f"https://user:{_s(i)}@host/x"], _s(i))
    for param in ("token", "api_key", "access_token"):
        i = next(n)
        add([f"https://h/x?a=1&{param}={_s(i)}"], _s(i))
    # bare provider tokens, after a flag that says nothing
    for shape in ("hf_", "sk-", "ghp_", "github_pat_", "xoxb-", "glpat-"):
        i = next(n)
        add(["--model", f"{shape}{_s(i)}"], _s(i))
    # inside a shell string
    i = next(n)
    add(["sh", "-c", f"HF_TOKEN={_s(i)} torchrun t.py -p 8080"], _s(i))
    i = next(n)
    add(["bash", "-c", f"python t.py --hfToken {_s(i)} --lr 1e-3"], _s(i))
    return out


#: Arguments that must stay readable, next to the secrets.
READABLE = [
    "--passes", "3", "-p", "8080", "--max-tokens", "512", "--tokenizer", "gpt2", "--keyframes",
    "4", "--monkey", "1", "--compass", "n", "--lr", "3e-4", "--steps", "10",
]
