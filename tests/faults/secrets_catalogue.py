"""Secret spellings on a command line: every one seen leaking (issues 9, 22 and 29), each with
its own secret, so a test can say which one leaked and where."""

from __future__ import annotations


def _s(i: int) -> str:
    return f"Sx{i:02d}qQ7vW9zR"  # a distinct secret per spelling


def catalogue() -> list[tuple[list[str], str]]:
    """(argv fragment, the secret it holds), about 80 of them."""
    out: list[tuple[list[str], str]] = []

    def add(argv: list[str], secret: str) -> None:
        out.append((argv, secret))

    n = iter(range(200))
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
    # issue 29: Hydra/OmegaConf overrides (dotted keys, +/++), a YAML-ish pair, JSON, URL
    # signatures, webhook URLs, connection strings, one-time passwords
    for key in ("logger.wandb.api_key", "+db.password", "++logger.api_key", "openai.api_key"):
        i = next(n)
        add([f"{key}={_s(i)}"], _s(i))
    i = next(n)
    add([f"api_key:{_s(i)}"], _s(i))
    i = next(n)
    add(["--config", f'{{"api_key": "{_s(i)}", "lr": 3e-4}}'], _s(i))
    i = next(n)
    add([f"https://acct.blob.core.windows.net/c/b.bin?sv=2022-11-02&sig={_s(i)}"], _s(i))
    i = next(n)
    add([f"https://b.s3.amazonaws.com/k?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Signature={_s(i)}"],
        _s(i))
    i = next(n)
    add(["--hook", f"https://hooks.slack.com/services/T0123/B0456/{_s(i)}"], _s(i))
    i = next(n)
    add(["--hook", f"https://discord.com/api/webhooks/1234567/{_s(i)}"], _s(i))
    i = next(n)
    add(["--db", f"Server=db.example;Database=x;User Id=sa;Password={_s(i)};"], _s(i))
    i = next(n)
    add(["--otp", _s(i)], _s(i))
    # the second adversarial pass (issue 29): other spellings of the same classes
    i = next(n)
    add([f"--otp={_s(i)}"], _s(i))
    i = next(n)
    add(["--passcode", _s(i)], _s(i))
    i = next(n)
    add(["--mfa-code", _s(i)], _s(i))
    i = next(n)
    add([f"--trainer.logger.init_args.api_key={_s(i)}"], _s(i))  # LightningCLI
    i = next(n)
    add(["--model.hf_token", _s(i)], _s(i))
    i = next(n)
    add(["~db.password", f"db.password={_s(i)}"], _s(i))
    i = next(n)
    add([f"db.password:{_s(i)}"], _s(i))
    i = next(n)
    add([f"{{'password': '{_s(i)}'}}"], _s(i))  # a Python dict
    i = next(n)
    add(["--extra", f"password: {_s(i)}"], _s(i))  # YAML
    i = next(n)
    add(["--db", f"DefaultEndpointsProtocol=https;AccountName=a;AccountKey={_s(i)};"], _s(i))
    i = next(n)
    add(["--sb", f"Endpoint=sb://x/;SharedAccessKeyName=k;SharedAccessKey={_s(i)}"], _s(i))
    i = next(n)
    add(["--db", f"Driver=x;Server=db;Uid=sa;Pwd={_s(i)};"], _s(i))
    i = next(n)
    add(["-H", f"Authorization: Basic {_s(i)}"], _s(i))
    i = next(n)
    add([f"--header=Cookie: session={_s(i)}"], _s(i))
    i = next(n)
    add([f"https://storage.googleapis.com/b/o?X-Goog-Algorithm=A&X-Goog-Signature={_s(i)}"], _s(i))
    i = next(n)
    add([f"https://fn.azurewebsites.net/api/hook?code={_s(i)}"], _s(i))
    i = next(n)
    add([f"https://org.webhook.office.com/webhookb2/{_s(i)}"], _s(i))
    i = next(n)
    add([f"https://chat.example.org/hooks/{_s(i)}"], _s(i))  # Mattermost and the like
    i = next(n)
    add(["--model", f"sk_live_{_s(i)}"], _s(i))
    i = next(n)
    add(["--model", f"eyJhbGciOiJIUzI1NiJ9.eyJ{_s(i)}.c2lnbmF0dXJlcw"], _s(i))  # a JWT
    i = next(n)
    add(["--model", f"AIza{_s(i)}{_s(i)}xxxxxxxxx"], _s(i))  # a Google API key: 35 after AIza
    i = next(n)
    add(["--model", f"npm_{_s(i)}{_s(i)}"], _s(i))
    i = next(n)
    add(["--model", f"pypi-AgEIcHlwaS5vcmc{_s(i)}"], _s(i))
    i = next(n)
    add(["--model", f"xapp-1-A0-{_s(i)}"], _s(i))
    i = next(n)
    add([f"DATABASE_URL=mysql://u:{_s(i)}@db/x"], _s(i))
    i = next(n)
    add(["docker", "run", "-e", f"API_KEY={_s(i)}", "img"], _s(i))
    i = next(n)
    add(["bash", "-c", f"curl -H 'X-Auth-Token: {_s(i)}' https://h && echo ok"], _s(i))
    i = next(n)
    add(["bash", "-c", f"python t.py logger.wandb.api_key={_s(i)} trainer.max_epochs=3"], _s(i))
    i = next(n)
    add(["--url", f"https://h/x?access_token={_s(i)}#frag"], _s(i))
    i = next(n)
    add(["--query", f"X-Amz-Signature={_s(i)}"], _s(i))  # a signature apart from its URL
    return out


#: Arguments that must stay readable, next to the secrets.
READABLE = [
    "--passes", "3", "-p", "8080", "--max-tokens", "512", "--tokenizer", "gpt2", "--keyframes",
    "4", "--monkey", "1", "--compass", "n", "--lr", "3e-4", "--steps", "10",
    # Hydra overrides and URLs that hold no secret stay readable too
    "model.tokenizer=gpt2", "trainer.max_epochs=3", "+data.max_tokens=512", "lr:3e-4",
    "https://example.com/data.bin?version=2&split=train", "Server=db;Database=x;",
    "https://github.com/org/repo/hooks", "--sigma", "0.5",
]
