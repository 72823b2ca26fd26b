"""Rendering a broker's Jinja2 configuration templates (``brokers/<name>/templates``).

The local deployment and the AWS cloud recipe of a system render the same templates;
only addresses, paths and sizes differ.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Any

import jinja2


@cache
def _environment(folder: str, trim_blocks: bool) -> jinja2.Environment:
    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(folder),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        trim_blocks=trim_blocks,
        autoescape=False,
    )


def render(package_file: str, template: str, *, trim_blocks: bool = False, **values: Any) -> str:
    """Render ``templates/<template>`` next to the module ``package_file`` (pass ``__file__``);
    ``trim_blocks``: the newline after a block tag is dropped (Jinja2's option)."""
    folder = Path(package_file).resolve().parent / "templates"
    return _environment(str(folder), trim_blocks).get_template(template).render(**values)
