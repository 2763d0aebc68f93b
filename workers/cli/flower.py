"""``trawl flower``: real Flower (the Celery monitor) on the crawl's broker, behind basic auth.

Flower runs in this process as Celery's ``flower`` command of the crawl's Celery app
(``workers.app.celery_app.configure``), so it sees exactly the broker, queue and serializer the
workers use. Workers must send events (``trawl worker --events``; Flower also turns events on
at start with a broadcast) for task counts and arguments to show.

    python -m workers.cli.flower --redis redis://HOST:6379/0 --port 5555 --address 0.0.0.0
    FLOWER_BASIC_AUTH=admin:secret python -m workers.cli.flower --redis ... # password not in argv

Flower without authentication is only allowed on a loopback address.
"""

from __future__ import annotations

import argparse
import ipaddress
import os
import sys
from collections.abc import Sequence

from frontier.config import ConfigError
from workers.cli.crawl import ENV_BROKER, ENV_REDIS

ENV_AUTH = "FLOWER_BASIC_AUTH"  # Flower's own variable for --basic-auth (user:pass[,u2:p2])


def parse_basic_auth(value: str) -> list[tuple[str, str]]:
    """``user:password[,user2:password2]`` -> pairs; a ConfigError for anything else."""
    pairs = []
    for item in value.split(","):
        user, sep, password = item.partition(":")
        if not sep or not user or not password:
            raise ConfigError("Flower --basic-auth must be USER:PASSWORD (comma-separated for "
                              "several users), with a non-empty user and password")
        pairs.append((user, password))
    return pairs


def is_loopback(address: str) -> bool:
    if address in ("localhost", "ip6-localhost"):
        return True
    try:
        return ipaddress.ip_address(address).is_loopback
    except ValueError:
        return False  # a host name or "" (all interfaces): not loopback


def flower_argv(port: int, address: str = "127.0.0.1", basic_auth: str | None = None,
                extra_args: Sequence[str] = ()) -> list[str]:
    """The ``celery ... flower`` argv (after the program name) ``flower_command`` runs."""
    argv = ["flower", f"--port={int(port)}", f"--address={address}"]
    if basic_auth:
        argv.append(f"--basic-auth={basic_auth}")
    return argv + list(extra_args)


def flower_command(redis_url: str, port: int, address: str = "127.0.0.1",
                   basic_auth: str | None = None, namespace: str = "trawl",
                   extra_args: Sequence[str] = ()) -> int:
    """Run Flower against the crawl's broker until SIGTERM/SIGINT; returns an exit code.

    ``basic_auth`` is ``user:password[,user2:password2]``; None falls back to the environment
    variable FLOWER_BASIC_AUTH (which Flower reads itself, keeping the password out of argv).
    ``extra_args`` are further Flower options, e.g. ``["--purge_offline_workers=60"]``.
    """
    from workers.cli.crawl import connect

    auth = basic_auth or os.environ.get(ENV_AUTH) or None
    if auth:
        parse_basic_auth(auth)
    elif not is_loopback(address):
        raise ConfigError(f"Flower on {address or 'all interfaces'} needs basic auth: pass "
                          f"--basic-auth USER:PASSWORD or set {ENV_AUTH}")
    if not 0 < int(port) < 65536:
        raise ConfigError(f"--port {port}: not a TCP port")
    connect(redis_url).close()  # fail fast with Trawl's message if the broker is unreachable

    from workers.app.celery_app import configure

    app = configure(redis_url, namespace)
    # Flower reads FLOWER_BASIC_AUTH itself; pass it only when given as an argument.
    code = app.start(flower_argv(port, address, basic_auth, extra_args))
    return int(code or 0)


def add_flower_arguments(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """The options of ``trawl flower`` (for ``workers.cli.main.build_parser``)."""
    # the broker's URL: as `trawl worker`'s, from the environment keeps a password out of ps
    env = os.environ.get(ENV_BROKER) or os.environ.get(ENV_REDIS) or None
    parser.add_argument("--redis", default=env, required=not env,
                        help="the crawl's broker URL, redis:// or rediss:// (default: "
                        "$TRAWL_BROKER, else $TRAWL_REDIS)")
    parser.add_argument("--namespace", default="trawl")
    parser.add_argument("--port", type=int, default=5555)
    parser.add_argument("--address", default="127.0.0.1",
                        help="listen address (non-loopback needs basic auth)")
    parser.add_argument("--basic-auth", default=None, metavar="USER:PASSWORD",
                        help=f"default: ${ENV_AUTH} (keeps the password out of ps)")
    parser.add_argument("--flower-arg", action="append", default=[], metavar="--OPT=VALUE",
                        help="a further Flower option, e.g. --flower-arg=--purge_offline_"
                        "workers=60 (repeatable)")
    return parser


def cmd_flower(args: argparse.Namespace) -> int:
    return flower_command(args.redis, args.port, args.address, args.basic_auth,
                          args.namespace, args.flower_arg)


def main(argv: list[str] | None = None) -> int:
    parser = add_flower_arguments(argparse.ArgumentParser(prog="trawl flower",
                                                          description=__doc__.split("\n")[0]))
    args = parser.parse_args(argv)
    try:
        return cmd_flower(args)
    except ConfigError as exc:
        print(f"trawl: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
