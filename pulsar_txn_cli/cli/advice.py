"""Suggested commands that are safe to paste: each carries the target it was made for.

A `fix:` line printed under `--admin-url URL` must act on URL when pasted, not on the default
engine; so every `pulsar-txn ...` command the tool suggests gets the flags that chose the target
(never a secret: a token, auth parameters or a URL's password are left for the operator to supply).
"""

from __future__ import annotations

import re
import shlex

from pulsar_txn_cli.transport.redact import without_credentials
from pulsar_txn_cli.protocol import TC_ASSIGN

_QUOTED = re.compile(r"`(pulsar-txn [^`]+)`")


def target_args(env) -> str:
    """The flags that select this command's target, as a shell-safe string ('' for the default engine)."""
    flags = env.target
    args: list[str] = []
    if flags.context:
        args += ["--context", flags.context]
    elif flags.admin_url:
        args += ["--admin-url", without_credentials(flags.admin_url)]
    elif flags.engine_dir:
        args += ["--engine-dir", flags.engine_dir]
    elif env.chosen_target is not None:  # chosen by the environment or a config file: name what was chosen
        target = env.chosen_target
        if target.kind == "cluster":
            args += ["--admin-url", target.url]
        elif target.source != "default":
            args += ["--engine-dir", target.engine_dir]
    for name in ("token_file", "tls_trust_cert_path"):
        value = getattr(flags, name)
        if value and (flags.admin_url or flags.context):
            args += ["--" + name.replace("_", "-"), value]
    return " ".join(shlex.quote(a) for a in args)


# pulsar-admin commands the engine has its own equivalent of (pulsar-admin cannot reach an engine
# directory): reopening a store is `engine reload`, a broker setting is `engine config set`.
_ENGINE_EQUIVALENTS = [
    (
        re.compile(rf"pulsar-admin topics unload {re.escape(TC_ASSIGN)}-partition-(\d+)"),
        lambda m: f"pulsar-txn engine reload --coordinator {m[1]}",
    ),
    (re.compile(r"pulsar-admin topics unload (\S+)"), lambda m: f"pulsar-txn engine reload --topic {m[1]}"),
    # The engine models no consumers: what it has of a topic's readers is its transaction buffer.
    (re.compile(r"pulsar-admin topics stats (\S+)"), lambda m: f"pulsar-txn transaction-buffer-stats -t {m[1]}"),
    (
        re.compile(r"pulsar-admin brokers update-dynamic-config --config (\S+) --value (\S+)"),
        lambda m: f"pulsar-txn engine config set {m[1]} {m[2]}",
    ),
]


def _on_engine(env) -> bool:
    """The command's target is an engine directory (not a cluster, nor an engine served over HTTP)."""
    flags = env.target
    if flags.admin_url or flags.context:
        return False
    target = env.chosen_target
    return bool(flags.engine_dir) or (target is not None and target.kind == "engine")


def _engine_equivalent(text: str) -> str:
    for pattern, make in _ENGINE_EQUIVALENTS:
        text = pattern.sub(make, text)
    return text


def command(text: str, env) -> str:
    """A whole suggested command with the target (text that is not a command is kept).

    pulsar-txn takes the target after the command; pulsar-admin takes --admin-url before it, and
    only a cluster can be its target: on an engine, its equivalent is suggested instead."""
    if text.startswith("pulsar-admin ") and _on_engine(env):
        text = _engine_equivalent(text)
    if _has_target(text):
        return text
    if (
        text.startswith("pulsar-txn engine ")
        and not text.startswith("pulsar-txn engine simulate")
        and not _on_engine(env)
    ):
        return text  # engine commands act on an engine directory; a cluster's flags do not apply to them
    if text.startswith("pulsar-txn "):
        extra = target_args(env)
        return f"{text} {extra}" if extra else text
    if text.startswith("pulsar-admin "):
        url = _cluster_url(env)
        return f"pulsar-admin --admin-url {shlex.quote(url)} {text.removeprefix('pulsar-admin ')}" if url else text
    return carry_target(text, env)  # words for the operator, with the commands they quote


def _cluster_url(env) -> str | None:
    if env.target.admin_url:
        return without_credentials(env.target.admin_url)
    target = env.chosen_target
    return target.url if target is not None and target.kind == "cluster" else None


_ENGINE_QUOTED = re.compile(r"`(pulsar-admin [^`]+)`")
_ENGINE_BARE = re.compile(
    r"(?<!`)pulsar-admin (?:topics unload \S+|brokers update-dynamic-config --config \S+ --value \S+)(?<![.,;:)])"
)
_PULSAR_ADMIN = re.compile(r"(?<![\w-])pulsar-admin (?!--admin-url)")


def carry_target(text: str, env) -> str:
    """Prose with its commands made safe to paste: every `pulsar-txn ...` in backticks gets the
    target appended, every pulsar-admin (quoted or not) gets --admin-url for a cluster, or becomes
    the engine's own equivalent on an engine."""
    if "pulsar-admin " in text and _on_engine(env):
        text = _ENGINE_QUOTED.sub(lambda m: f"`{_engine_equivalent(m.group(1))}`", text)
        text = _ENGINE_BARE.sub(lambda m: f"`{_engine_equivalent(m.group(0))}`", text)
    if "`pulsar-txn " in text:
        text = _QUOTED.sub(lambda m: f"`{command(m.group(1), env)}`", text)
    url = _cluster_url(env) if "pulsar-admin " in text else None
    if url:
        text = _PULSAR_ADMIN.sub(f"pulsar-admin --admin-url {shlex.quote(url)} ", text)
    return text


_ON_CHECKPOINT = r"pulsar-txn downgrade (?:check|reset)\b"  # the commands that take --checkpoint
_ON_CHECKPOINT_QUOTED = re.compile(rf"`({_ON_CHECKPOINT}[^`]*)`")


def with_checkpoint(text: str, path: str | None, *, quoted: bool = True) -> str:
    """`pulsar-txn downgrade check|reset` with --checkpoint PATH when the check ran on a named file
    (path None: the target's default checkpoint, nothing to add). quoted=False: text is one command."""
    if path is None or "pulsar-txn downgrade " not in text:
        return text

    def add(cmd: str) -> str:
        if "--checkpoint" in cmd.split() or not re.match(_ON_CHECKPOINT, cmd):
            return cmd
        return f"{cmd} --checkpoint {shlex.quote(path)}"

    return add(text) if not quoted else _ON_CHECKPOINT_QUOTED.sub(lambda m: f"`{add(m.group(1))}`", text)


def _has_target(text: str) -> bool:
    return any(flag in text.split() for flag in ("--admin-url", "--engine-dir", "--context"))
