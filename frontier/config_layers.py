"""Crawl settings from layers, highest first: command-line flags, ``TRAWL_*`` environment
variables, the job file (frontier/jobfile.py), a command's preset (``trawl demo``), and the
defaults of frontier/config.py.

pydantic-settings merges the layers (a table such as ``dedup_settings`` merges key by key;
any other value is replaced whole by a higher layer's) and checks each value's type against a
model made from ``dataclasses.fields(CrawlConfig)``, so a field added there is a setting of
every layer at once. :meth:`CrawlConfig.validate` then checks what the values mean. Every
error names the setting, where its value came from (``crawl.toml:12``, ``env
TRAWL_HOST_DELAY_S``, ``flag --set host_delay_s``) and the fix.
"""

from __future__ import annotations

import contextvars
import difflib
import enum
import json
import logging
import os
import typing
from collections.abc import Mapping
from dataclasses import MISSING, dataclass, field, fields
from functools import cache
from pathlib import Path
from typing import Any

from pydantic import Field, ValidationError, create_model
from pydantic.fields import FieldInfo
from pydantic_settings import (
    BaseSettings,
    EnvSettingsSource,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
)
from pydantic_settings.exceptions import SettingsError

from frontier.config import CrawlConfig
from frontier.config_checks import ConfigError
from frontier.config_meta import default_of, settings_info, value_text
from frontier.jobfile import read_job_file

log = logging.getLogger(__name__)

ENV_PREFIX = "TRAWL_"
#: TRAWL_* variables that are not crawl settings (the CLI's, the benchmarks', the tests'):
#: never read as settings and never warned about as a setting's misspelling.
NOT_SETTINGS = frozenset({
    "TRAWL_REDIS", "TRAWL_BROKER", "TRAWL_METRICS_PORT", "TRAWL_REDISBLOOM", "TRAWL_REV",
    "TRAWL_COMMIT", "TRAWL_BENCH_SET", "TRAWL_PY", "TRAWL_PYTHON", "TRAWL_VENV", "TRAWL_SRC",
    "TRAWL_VECTORS", "TRAWL_HOSTILE_TABLE", "TRAWL_PROBE_REDIS", "TRAWL_PYWB_VENV",
    "TRAWL_NETNS_PREFIX", "TRAWL_NETNS_SUBNET", "TRAWL_NETNS_WEB_IPS", "TRAWL_NETNS_WORKERS",
})
#: An unknown TRAWL_* name this close to a setting's (difflib ratio) is warned about.
TYPO_CUTOFF = 0.8
_TYPE_WORDS = {"float": "a number", "int": "a whole number", "bool": "true or false",
               "str": "a string"}


class Kind(enum.Enum):
    """Where a value came from, highest precedence first."""

    FLAG = "flag"
    ENV = "env"
    FILE = "file"
    PRESET = "preset"
    DEFAULT = "default"


@dataclass
class Layer:
    """The settings one source gives, with where each one is written (for errors, ``show``)."""

    kind: Kind
    values: dict[str, Any] = field(default_factory=dict)
    wheres: dict[str, str] = field(default_factory=dict)

    def where(self, name: str) -> str:
        return self.wheres.get(name, self.kind.value)

    def fix(self, name: str) -> str:
        """How to change the setting in this source."""
        env = settings_info()[name].env if name in settings_info() else name
        return {Kind.FLAG: f"change {self.where(name).removeprefix('flag ')} on the command line",
                Kind.ENV: f"change or unset {env}",
                Kind.FILE: f"edit it at {self.where(name)}",
                Kind.PRESET: f"override it with --set {name}=VALUE"}.get(
                    self.kind, f"set it in the job file, {env} or --set {name}=VALUE")


@dataclass
class Effective:
    """The crawl's settings after layering and checks, each with where its value came from."""

    config: CrawlConfig
    #: setting -> "default", "derived", "crawl.toml:12", "env TRAWL_X", "flag --set x", ...
    origins: dict[str, str]
    #: The job file's seeds (None: it names none, or there is no job file) and their line.
    seeds: list[str] | None = None
    seeds_origin: str = ""


def load_settings(flags: Layer | None = None, job_file: str | Path | None = None,
                  preset: Mapping[str, Any] | None = None) -> Effective:
    """The layered, type-checked and validated settings; ConfigError names what is wrong."""
    warn_env_typos(os.environ)
    job = read_job_file(job_file) if job_file else None
    layers = [flags or Layer(Kind.FLAG), env_layer()]
    if job:
        layers.append(Layer(Kind.FILE, job.settings, {n: job.where(n) for n in job.settings}))
    if preset:
        layers.append(Layer(Kind.PRESET, dict(preset), {n: "preset" for n in preset}))
    config = merge(layers)
    origins = {name: origin(name, layers) for name in settings_info()}
    try:
        config.validate()
    except ConfigError as exc:
        raise _with_origin(exc, layers, origins) from None
    for name, where in origins.items():  # e.g. fetch_lease_s, from total_timeout_s
        if where == "default" and getattr(config, name) != default_of(name):
            origins[name] = "derived"
    if not job or job.seeds is None:
        return Effective(config, origins)
    return Effective(config, origins, job.seeds,
                     ", ".join(job.where(key) for key in ("seeds", "seeds_file")
                               if key in job.lines))


def env_layer() -> Layer:
    """The TRAWL_<SETTING> variables, read by pydantic-settings' EnvSettingsSource (lists and
    tables as JSON; an empty variable counts as unset)."""
    try:
        values = _EnvSource(settings_model())()
    except SettingsError as exc:
        if isinstance(exc.__cause__, ConfigError):
            raise exc.__cause__ from None
        raise ConfigError(f"{exc}. Fix the TRAWL_* variable it names, or unset it.") from None
    return Layer(Kind.ENV, values, {n: f"env {settings_info()[n].env}" for n in values})


def warn_env_typos(environ: Mapping[str, str]) -> list[str]:
    """Log (and return) a warning for each TRAWL_* variable that is no setting but is spelled
    much like one: it is ignored, which the operator would not expect."""
    names = list(settings_info())
    found = []
    for var in environ:
        upper = var.upper()
        if not upper.startswith(ENV_PREFIX) or upper in NOT_SETTINGS:
            continue
        name = upper[len(ENV_PREFIX):].lower()
        near = difflib.get_close_matches(name, names, n=1, cutoff=TYPO_CUTOFF)
        if name not in names and near:
            found.append(f"env {var} is not a crawl setting and is ignored: did you mean "
                         f"{ENV_PREFIX}{near[0].upper()}? (docs/settings.md lists them)")
            log.warning("%s", found[-1])
    return found


def merge(layers: list[Layer]) -> CrawlConfig:
    """The layers merged and type-checked by pydantic-settings, as a CrawlConfig (not yet
    validated); a type error names each bad setting with its source."""
    model = settings_model()
    token = _LAYERS.set(layers)
    try:
        settings = model()
    except ValidationError as exc:
        raise ConfigError("\n".join(_type_error(err, layers) for err in exc.errors())) from None
    finally:
        _LAYERS.reset(token)
    return CrawlConfig(**{name: getattr(settings, name) for name in settings.model_fields_set})


def origin(name: str, layers: list[Layer]) -> str:
    """Where a setting's value came from: the highest layer giving it (every layer that gave
    part of a merged table, highest first), else "default"."""
    giving = [layer for layer in layers if name in layer.values]
    if not giving:
        return Kind.DEFAULT.value
    merged = [giving[0]]
    for layer in giving[1:]:
        if not (isinstance(merged[-1].values[name], dict)
                and isinstance(layer.values[name], dict)):
            break
        merged.append(layer)
    return " + ".join(layer.where(name) for layer in merged)


def _fix(name: str, layers: list[Layer]) -> str:
    giving = [layer for layer in layers if name in layer.values]
    info = settings_info()[name]
    kind = _TYPE_WORDS.get(info.type, f"a {info.type} (as JSON in env and --set)")
    how = giving[0].fix(name) if giving else Layer(Kind.DEFAULT).fix(name)
    return f"{name} takes {kind}, default {value_text(info.default)}; {how}"


def _told(where: str) -> str:
    return f"the {where}" if where in (Kind.DEFAULT.value, "preset") else where


def _type_error(err: Any, layers: list[Layer]) -> str:
    name, *inside = err["loc"]
    value = next((layer.values[name] for layer in layers if name in layer.values), None)
    at = f" (at {'.'.join(map(str, inside))})" if inside else ""
    return (f"Setting {name}={value!r} from {_told(origin(name, layers))} is invalid{at}: "
            f"{err['msg']}. Fix: {_fix(name, layers)}.")


def _with_origin(exc: ConfigError, layers: list[Layer], origins: dict[str, str]) -> ConfigError:
    """A check's error, told with where the refused value came from."""
    name = exc.setting
    if name not in origins:
        return exc
    err = ConfigError(f"Setting {name}={exc.value!r} from {_told(origins[name])} is invalid: "
                      f"{exc.why}. Fix: {_fix(name, layers)}.")
    err.setting, err.value, err.why = name, exc.value, exc.why
    return err


#: The layers of the model being built in this context: pydantic-settings asks the model
#: class for its sources, so a call's own layers reach it through this.
_LAYERS: contextvars.ContextVar[list[Layer]] = contextvars.ContextVar("trawl_layers")


class _LayerSource(PydanticBaseSettingsSource):
    """One layer's values, already parsed, as a pydantic-settings source."""

    def __init__(self, settings_cls: type[BaseSettings], layer: Layer) -> None:
        super().__init__(settings_cls)
        self.layer = layer

    def get_field_value(self, field: FieldInfo, field_name: str) -> tuple[Any, str, bool]:
        return self.layer.values.get(field_name), field_name, False

    def __call__(self) -> dict[str, Any]:
        return dict(self.layer.values)


class _EnvSource(EnvSettingsSource):
    """pydantic-settings' environment source, with a JSON error that names the variable and
    the fix."""

    def decode_complex_value(self, field_name: str, field: FieldInfo, value: Any) -> Any:
        try:
            return super().decode_complex_value(field_name, field, value)
        except ValueError as exc:
            info = settings_info()[field_name]
            raise ConfigError(
                f"Setting {field_name}={value!r} from env {info.env} is not JSON ({exc}). Fix: "
                f"{field_name} takes a {info.type}, written as JSON in the environment, e.g. "
                f"{info.env}='{_json_example(info.default)}'; or unset {info.env}.") from None


def _json_example(default: Any) -> str:
    return json.dumps(default) if default else ('["..."]' if isinstance(default, list)
                                                else '{"key": "value"}')


class _Settings(BaseSettings):
    model_config = SettingsConfigDict(
        env_prefix=ENV_PREFIX, case_sensitive=False, env_ignore_empty=True, extra="forbid",
        coerce_numbers_to_str=True,  # --set warc_version=1.0 is a number as JSON
        validate_default=False)

    @classmethod
    def settings_customise_sources(cls, settings_cls: type[BaseSettings],
                                   init_settings: PydanticBaseSettingsSource,
                                   env_settings: PydanticBaseSettingsSource,
                                   dotenv_settings: PydanticBaseSettingsSource,
                                   file_secret_settings: PydanticBaseSettingsSource,
                                   ) -> tuple[PydanticBaseSettingsSource, ...]:
        return tuple(_LayerSource(settings_cls, layer) for layer in _LAYERS.get([]))


@cache
def settings_model() -> type[BaseSettings]:
    """A pydantic-settings model with one field per CrawlConfig field (its type and default)."""
    hints = typing.get_type_hints(CrawlConfig)
    spec: dict[str, Any] = {}
    for f in fields(CrawlConfig):
        default = (Field(default_factory=f.default_factory)
                   if f.default_factory is not MISSING else f.default)
        spec[f.name] = (hints[f.name], default)
    return create_model("CrawlSettings", __base__=_Settings, **spec)
