"""docker-compose.yml against the Compose Specification schema (vendored in deploy/schema), and
every command it runs against the real argument parsers."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
COMPOSE = ROOT / "docker-compose.yml"
SCHEMA = ROOT / "deploy" / "schema" / "compose-spec.json"
ENV = {"REDIS_PASSWORD": "pw-redis", "FLOWER_PASSWORD": "pw-flower"}
VAR = re.compile(r"\$\$|\$\{(?P<name>[A-Za-z_][A-Za-z0-9_]*)(?:(?P<op>:?[-?])(?P<arg>[^}]*))?\}"
                 r"|\$(?P<bare>[A-Za-z_][A-Za-z0-9_]*)")


def interpolate(value: Any, env: dict[str, str]) -> Any:
    """Compose's variable interpolation (${V}, ${V:-d}, ${V-d}, ${V:?e}, ${V?e}, $V, $$)."""
    if isinstance(value, dict):
        return {k: interpolate(v, env) for k, v in value.items()}
    if isinstance(value, list):
        return [interpolate(v, env) for v in value]
    if not isinstance(value, str):
        return value

    def sub(m: re.Match[str]) -> str:
        if m.group(0) == "$$":
            return "$"
        name = m.group("name") or m.group("bare")
        op, arg = m.group("op"), m.group("arg") or ""
        val = env.get(name)
        unset = val is None or (op is not None and op.startswith(":") and val == "")
        if op and op.endswith("?") and unset:
            raise KeyError(f"{name}: {arg}")
        if op and op.endswith("-") and unset:
            return arg
        return val or ""

    return VAR.sub(sub, value)


@pytest.fixture(scope="module")
def raw() -> dict[str, Any]:
    return yaml.safe_load(COMPOSE.read_text())


@pytest.fixture(scope="module")
def compose(raw: dict[str, Any]) -> dict[str, Any]:
    return interpolate(raw, ENV)


@pytest.fixture(scope="module")
def validator() -> jsonschema.Draft7Validator:
    schema = json.loads(SCHEMA.read_text())
    jsonschema.Draft7Validator.check_schema(schema)
    return jsonschema.Draft7Validator(schema)


def test_schema_is_vendored_with_its_licence() -> None:
    sources = (ROOT / "deploy" / "SOURCES.md").read_text()
    assert "compose-spec/compose-spec" in sources and "Apache" in sources
    assert (ROOT / "deploy" / "schema" / "LICENSE").read_text().count("Apache License") >= 1


def test_compose_file_is_valid_against_the_compose_spec(raw: dict[str, Any],
                                                        compose: dict[str, Any],
                                                        validator: jsonschema.Draft7Validator
                                                        ) -> None:
    for doc in (raw, compose):
        errors = sorted(validator.iter_errors(doc), key=lambda e: list(e.path))
        assert not errors, [f"{list(e.path)}: {e.message}" for e in errors]


@pytest.mark.parametrize("breakage", [
    lambda c: c["services"]["worker"].update(ports=5555),
    lambda c: c["services"]["redis"].update(restart_policy="always"),
    lambda c: c["services"]["worker"].update(command={"not": "a command"}),
    lambda c: c.update(servics={}),
])
def test_validator_rejects_broken_files(compose: dict[str, Any],
                                        validator: jsonschema.Draft7Validator,
                                        breakage: Any) -> None:
    broken = json.loads(json.dumps(compose))
    breakage(broken)
    assert list(validator.iter_errors(broken))


def test_required_secrets_are_required(raw: dict[str, Any]) -> None:
    for missing in ENV:
        with pytest.raises(KeyError, match=missing):
            interpolate(raw, {k: v for k, v in ENV.items() if k != missing})


def _trawl_services(compose: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {name: svc for name, svc in compose["services"].items()
            if svc.get("image", "").startswith("trawl") or "build" in svc}


def _parse_trawl(argv: list[str], capsys: pytest.CaptureFixture[str],
                 env: dict[str, str] | None = None) -> Any:
    """``trawl ARGV`` parsed in the service's environment (--redis defaults to $TRAWL_REDIS)."""
    from workers.cli.main import build_parser

    try:
        with pytest.MonkeyPatch.context() as mp:
            for name in ("TRAWL_REDIS", "TRAWL_BROKER"):
                mp.delenv(name, raising=False)
            for name, value in (env or {}).items():
                mp.setenv(name, str(value))
            parser = build_parser()
        return parser.parse_args(argv)
    except SystemExit as exc:
        raise AssertionError(f"`trawl {' '.join(argv)}`: {capsys.readouterr().err}") from exc


def _check_flower_options(argv: list[str]) -> dict[str, str]:
    import flower.options  # noqa: F401 - defines Flower's tornado options
    from tornado.options import options

    known = {name.replace("-", "_") for name in options._options}
    seen = {}
    for arg in argv:
        assert arg.startswith("--") and "=" in arg, f"flower option {arg!r}: use --name=value"
        name, _, value = arg[2:].partition("=")
        assert name.replace("-", "_") in known, f"unknown Flower option --{name}"
        seen[name.replace("-", "_")] = value
    return seen


def check_command(name: str, svc: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> Any:
    cmd = svc["command"]
    assert isinstance(cmd, list), f"{name}: use the exec (list) form of command"
    if cmd[0] == "trawl" and cmd[1] == "flower":
        from workers.cli.main import build_parser

        choices = build_parser()._subparsers._group_actions[0].choices  # type: ignore[union-attr]
        assert "flower" in choices, f"{name}: `trawl flower` is not a trawl subcommand yet"
        return _parse_trawl(cmd[1:], capsys, svc.get("environment"))
    if cmd[0] == "trawl":
        return _parse_trawl(cmd[1:], capsys, svc.get("environment"))
    if cmd[0] == "celery":
        i = cmd.index("flower")
        globals_ = cmd[1:i]
        assert all(g.startswith("--broker=redis") for g in globals_), globals_
        return {"broker": globals_[0].partition("=")[2], **_check_flower_options(cmd[i + 1:])}
    if cmd[:3] == ["python", "-m", "sandbox"]:
        from sandbox.__main__ import parse_args

        return parse_args(cmd[3:])
    raise AssertionError(f"{name}: {cmd[0]} is neither trawl, celery flower nor the sandbox")


def test_every_command_is_a_real_subcommand_with_valid_options(
        compose: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> None:
    services = _trawl_services(compose)
    assert {"scheduler", "worker", "flower", "sandbox"} <= set(services)
    parsed = {name: check_command(name, svc, capsys) for name, svc in services.items()}
    assert parsed["scheduler"].command == "scheduler" and parsed["scheduler"].forever
    assert parsed["worker"].command == "worker" and parsed["worker"].events
    redis_url = "redis://:pw-redis@redis:6379/0"
    assert parsed["scheduler"].redis == parsed["worker"].redis == redis_url
    flower = parsed["flower"]
    assert (flower["broker"] if isinstance(flower, dict) else flower.redis) == redis_url


def test_no_password_on_a_command_line(compose: dict[str, Any]) -> None:
    """``ps`` on the Docker host shows the containers' command lines: the passwords reach the
    trawl services by environment only (control: they are in the environment). Redis's own
    --requirepass is not seen there: redis-server overwrites its argv with its title."""
    for name, svc in _trawl_services(compose).items():
        for secret in ENV.values():
            assert secret not in " ".join(map(str, svc.get("command", []))), name
    assert ENV["REDIS_PASSWORD"] in compose["services"]["worker"]["environment"]["TRAWL_REDIS"]


def test_worker_service_is_scalable(compose: dict[str, Any]) -> None:
    worker = compose["services"]["worker"]
    for key in ("container_name", "hostname", "ports", "mac_address"):
        assert key not in worker, f"worker has {key}: `--scale worker=N` would clash"
    assert compose["services"]["sandbox"]["profiles"] == ["sandbox"]  # not started by default
    for vol in worker.get("volumes", []):
        source = vol.split(":")[0] if isinstance(vol, str) else vol.get("source", "")
        assert not source.startswith(("/", ".")), f"bind mount {vol}: shared by every replica"


def test_redis_has_aof_persistence_a_volume_and_a_password(compose: dict[str, Any]) -> None:
    redis = compose["services"]["redis"]
    cmd = redis["command"]
    assert cmd[0] == "redis-server"
    opts = dict(zip(cmd[1::2], cmd[2::2], strict=True))
    assert opts["--appendonly"] == "yes" and opts["--appendfsync"] == "everysec"
    assert opts["--requirepass"] == ENV["REDIS_PASSWORD"]
    volumes = [v.split(":") for v in redis["volumes"]]
    assert ["redis-data", "/data"] in volumes
    assert "redis-data" in compose["volumes"]
    assert "ports" not in redis  # reachable on the compose network only
    assert "healthcheck" in redis


def test_flower_has_basic_auth_and_is_not_published_publicly(compose: dict[str, Any],
                                                               capsys: pytest.CaptureFixture[str]
                                                               ) -> None:
    flower = compose["services"]["flower"]
    parsed = check_command("flower", flower, capsys)
    from_args = (parsed.get("basic_auth") if isinstance(parsed, dict)
                 else getattr(parsed, "basic_auth", None))
    auth = from_args or flower.get("environment", {}).get("FLOWER_BASIC_AUTH")
    assert auth, "flower has no basic auth"
    from workers.cli.flower import parse_basic_auth

    assert parse_basic_auth(auth) == [("admin", ENV["FLOWER_PASSWORD"])]
    for port in flower["ports"]:
        assert str(port).startswith("127.0.0.1:"), f"flower port {port} open to the network"


def test_dockerfile_is_slim_non_root_and_copies_what_exists() -> None:
    text = (ROOT / "deploy" / "Dockerfile").read_text()
    lines = [ln.split() for ln in text.splitlines() if ln.strip() and not ln.startswith("#")]
    assert lines[0][0] == "FROM" and lines[0][1].endswith("-slim")
    users = [ln[1] for ln in lines if ln[0] == "USER"]
    assert users and users[-1] not in ("root", "0")
    for ln in lines:
        if ln[0] == "COPY":
            for src in ln[1:-1]:
                assert (ROOT / src).exists(), f"COPY {src}: missing"
