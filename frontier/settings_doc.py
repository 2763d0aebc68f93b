"""docs/settings.md, the reference of every crawl setting, made from the settings table
(frontier/config.py: each field's type, default, section and ``#:`` comment).

Regenerate with ``python -m frontier.settings_doc > docs/settings.md`` (or ``trawl config
doc``); tests/frontier/test_config_layers.py fails while the file differs from this output.
"""

from __future__ import annotations

import sys

from frontier.config_meta import SettingInfo, sections, settings_info, value_text

REGENERATE = "python -m frontier.settings_doc > docs/settings.md"

HEADER = f"""\
# Crawl settings

<!-- Generated from frontier/config.py by `{REGENERATE}`
     (or `trawl config doc`); edit the comments there, not this file. -->

Every setting of a crawl, by section. A crawl takes each one from the first of these that
gives it:

1. the command line: `--set NAME=VALUE` (VALUE as JSON: `3`, `true`, `'["a.org"]'`; a string
   setting may be given bare) and the dedicated flags (`--delay`, `--max-pages`, `--allow`, ...);
2. the environment: `TRAWL_<NAME>` (e.g. `TRAWL_HOST_DELAY_S=1.5`; lists and tables as JSON,
   `TRAWL_ALLOWED_DOMAINS='["example.org"]'`; an empty variable counts as unset);
3. the crawl-job file, `trawl crawl --config crawl.toml` (example: `examples/crawl.toml`);
4. the default below.

A table (`static_hosts`, `dedup_settings`) given in several places is merged key by key, the
higher place winning for a key given twice; any other value is replaced whole. `trawl inspect`
takes its settings the same way; `trawl demo` has no job file, and its sandbox preset sits
between the environment and the defaults.

`trawl config show [--config FILE] [--set NAME=VALUE]` prints the effective value of each
setting with where it came from (`--json` for scripts). The crawl's settings are stored in Redis
when it starts: workers that join later (`trawl worker`) run with them, whatever their own
environment says. `TRAWL_REDIS`, `TRAWL_BROKER` and `TRAWL_METRICS_PORT` are the defaults of
command-line options, not settings.

## The job file

TOML, parsed with the standard `tomllib`. `seeds` (a list of URLs) and `seeds_file` (one URL a
line, relative to the job file) say where the crawl starts; seeds given on the command line
replace them. A setting is written at the top of the file or in the table of its section
below (`[politeness]`, `[scope]`, ...); a setting in another section's table, or a key that is
no setting, is an error naming the line and the nearest known key. A JSON object of settings
(the older `--config FILE.json`) is read too.

```toml
seeds = ["https://example.org/"]

[politeness]
host_delay_s = 5.0

[scope]
max_pages = 10000
```
"""


def settings_markdown() -> str:
    """The whole of docs/settings.md."""
    info = settings_info()
    parts = [HEADER]
    for section, names in sections().items():
        parts.append(f"\n## [{section}]\n\n| setting | type | default | description |\n"
                     "|---|---|---|---|\n")
        parts.extend(_row(info[name]) for name in names)
    return "".join(parts)


def _row(info: SettingInfo) -> str:
    default = value_text(info.default).replace("|", "\\|")
    doc = info.doc.replace("|", "\\|")
    type_ = info.type.replace("|", "\\|")  # GitHub tables: an escaped pipe, even in code
    return f"| `{info.name}` | `{type_}` | `{default}` | {doc} |\n"


def main() -> int:
    sys.stdout.write(settings_markdown())
    return 0


if __name__ == "__main__":
    sys.exit(main())
