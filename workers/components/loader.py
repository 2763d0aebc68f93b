"""From class paths to components: checked when the crawl starts (:func:`check_components`),
built once per worker process (:func:`build_components`).

Why importlib by hand and not entry points: a config names the classes it wants, in order,
as Scrapy's settings do; entry points would enable whatever is installed.
"""

from __future__ import annotations

import importlib
import logging
from dataclasses import dataclass
from typing import Any

from frontier.config import ConfigError, CrawlConfig
from workers.components.api import (
    Component,
    ComponentSetup,
    LinkExtractor,
    NotConfigured,
    PagePipeline,
    UrlFilter,
)

log = logging.getLogger(__name__)

#: setting -> the base class its entries must subclass
KINDS: dict[str, type[Component]] = {
    "url_filters": UrlFilter, "extractors": LinkExtractor, "pipelines": PagePipeline}

E_COMPONENT = ("Setting {setting}: {path!r} {why}. Fix the class path "
               "(\"package.module.ClassName\" of an installed module) or leave it out.")


def _error(setting: str, path: Any, why: str) -> ConfigError:
    return ConfigError(E_COMPONENT.format(setting=setting, path=path, why=why))


def load_class(setting: str, path: Any) -> type[Component]:
    """The class ``path`` names, checked to be of ``setting``'s kind; ConfigError if not."""
    if not isinstance(path, str) or path.count(".") < 1 or not all(path.split(".")):
        raise _error(setting, path, "is not a class path")
    module_name, _, name = path.rpartition(".")
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:  # ImportError, or the module's own code failing on import
        raise _error(setting, path, f"does not import: {type(exc).__name__}: {exc}") from None
    cls = getattr(module, name, None)
    if cls is None:
        raise _error(setting, path, f"is not defined in {module_name}")
    kind = KINDS[setting]
    if not isinstance(cls, type) or not issubclass(cls, kind):
        raise _error(setting, path, f"is not a {kind.__module__}.{kind.__name__} subclass")
    return cls


def check_components(cfg: CrawlConfig) -> dict[str, list[type[Component]]]:
    """Every entry of the three settings imported and checked, and ``component_settings``
    keyed by configured entries only. Raises ConfigError naming the setting and the path."""
    found: dict[str, list[type[Component]]] = {}
    for setting in KINDS:
        paths = getattr(cfg, setting)
        if not isinstance(paths, list):
            raise _error(setting, paths, "is not a list of class paths")
        seen: set[str] = set()
        found[setting] = []
        for path in paths:
            if path in seen:
                raise _error(setting, path, "is listed twice")
            found[setting].append(load_class(setting, path))
            seen.add(path)
    extra = cfg.component_settings
    if not isinstance(extra, dict):
        raise ConfigError(f"Setting component_settings={extra!r} is invalid: a JSON object of "
                          "class path -> settings object.")
    listed = {p for setting in KINDS for p in getattr(cfg, setting)}
    for path, value in extra.items():
        if path not in listed:
            raise ConfigError(f"Setting component_settings: {path!r} is not in url_filters, "
                              "extractors or pipelines. Fix the key or add the component.")
        if not isinstance(value, dict):
            raise ConfigError(f"Setting component_settings[{path!r}]={value!r} is invalid: "
                              "a JSON object of that component's settings.")
    for setting in KINDS:
        for path, cls in zip(getattr(cfg, setting), found[setting], strict=True):
            try:
                cls.check_settings(extra.get(path, {}))
            except (TypeError, ValueError) as exc:
                raise ConfigError(f"Setting component_settings[{path!r}] is invalid: {exc}. "
                                  "Fix it in the config.") from None
    return found


@dataclass(frozen=True)
class Built:
    """The components a worker runs, by setting, in config order, those that opted out gone."""

    url_filters: tuple[UrlFilter, ...]
    extractors: tuple[LinkExtractor, ...]
    pipelines: tuple[PagePipeline, ...]
    #: path -> reason of each component that raised NotConfigured
    disabled: dict[str, str]


def build_components(cfg: CrawlConfig, setup: ComponentSetup) -> Built:
    """One instance of each configured component (``setup.settings`` set to its own entry);
    a component raising NotConfigured is logged and left out."""
    classes = check_components(cfg)
    built: dict[str, list[Any]] = {s: [] for s in KINDS}
    disabled: dict[str, str] = {}
    for setting in KINDS:
        for path, cls in zip(getattr(cfg, setting), classes[setting], strict=True):
            own = ComponentSetup(setup.config, cfg.component_settings.get(path, {}),
                                 setup.worker_id, setup.output_dir, setup.warc)
            try:
                instance = cls.from_setup(own)
            except NotConfigured as exc:
                log.warning("component %s disabled: %s", path, exc or "NotConfigured")
                disabled[path] = str(exc)
                continue
            if not isinstance(instance, KINDS[setting]):
                raise _error(setting, path, f"from_setup returned {type(instance).__name__}")
            built[setting].append(instance)
    return Built(tuple(built["url_filters"]), tuple(built["extractors"]),
                 tuple(built["pipelines"]), disabled)
