"""Links from docs/*.md to files outside docs/ (`../README.md`, `../solutions_lib/memory.py`).

On GitHub they open the file; the site has no copy of the repository, so Sphinx would warn
(and `-W` fail). Before a page under pages/ is parsed, each such Markdown link is rewritten:
to the module's API page when it names a documented `solutions_lib` module, else to its text
followed by the path in the repository as code, e.g. "the README (`README.md`)".
"""
from __future__ import annotations

import posixpath
import re

#: [text](target) with a relative target that climbs out of docs/ (an optional #fragment)
LINK = re.compile(r"(?<!!)\[([^\]]+)\]\((\.\./[^)\s#]+)(#[^)\s]*)?\)")


def rewrite(text: str, api_modules: set[str]) -> str:
    def repl(m: re.Match) -> str:
        label, target = m.group(1), m.group(2)
        path = posixpath.normpath(posixpath.join("docs", target))
        mod = re.fullmatch(r"solutions_lib/(\w+)\.py", path)
        if mod and mod.group(1) in api_modules:
            return f"[{label}](../api/{mod.group(1)}.md)"
        return f"{label} (`{path}`)" if f"`{path}`" not in label else label
    return LINK.sub(repl, text)


def _on_source_read(app, docname, source):
    if docname.startswith("pages/"):
        api = {d.split("/", 1)[1] for d in app.env.found_docs if d.startswith("api/")} - {"index"}
        source[0] = rewrite(source[0], api)


def setup(app):
    app.connect("source-read", _on_source_read)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
