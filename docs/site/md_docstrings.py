"""Read the calculator's docstrings as Markdown (MyST), not as reStructuredText.

`solutions_lib`'s docstrings are written for `help()`: plain text with Markdown habits
(`- ` lists, `backticks`, `|x|` for a norm, indented formulas). Read as reST (autodoc's
default) they give dozens of warnings ("Unexpected indentation", "Undefined substitution
referenced: 'x'") and mangled text. This extension wraps each docstring that autodoc collects in
a `markdown-docstring` directive, which parses it with MyST, the parser of the rest of the site:
lists stay lists, `code` stays code, an indented formula becomes a code block.
"""
from __future__ import annotations

from docutils import nodes
from sphinx.util.docutils import SphinxDirective, new_document

DIRECTIVE = "markdown-docstring"


class MarkdownDocstring(SphinxDirective):
    has_content = True

    def run(self) -> list[nodes.Node]:
        from myst_parser.parsers.sphinx_ import MystParser

        source, line = self.get_source_info()
        doc = new_document(source, self.state.document.settings)
        doc.reporter = self.state.document.reporter      # warnings point at the page, not a stray doc
        MystParser().parse("\n".join(self.content), doc)
        for n in doc.findall(nodes.Element):
            if n.line is None:
                n.line = line
        return list(doc.children)


def _headings_to_bold(lines: list[str]) -> list[str]:
    """reST/Setext section titles ("Conventions" over "-----------") as bold lines: a docstring
    is part of a page, not a page of its own, so it opens no section."""
    out = list(lines)
    for i in range(len(out) - 1):
        under, title = out[i + 1].strip(), out[i].strip()
        if title and len(under) >= 3 and set(under) <= set("-=") and len(set(under)) == 1:
            out[i], out[i + 1] = out[i].replace(title, f"**{title}**"), ""
    return out


def _wrap(app, what, name, obj, options, lines):
    if not lines:
        return
    lines[:] = _headings_to_bold(lines)
    body = [("   " + s) if s.strip() else "" for s in lines]
    lines[:] = [f".. {DIRECTIVE}::", ""] + body + [""]


def setup(app):
    app.add_directive(DIRECTIVE, MarkdownDocstring)
    # after napoleon (priority 500): its Google/NumPy sections are reST, which MyST's
    # {eval-rst} would be needed for; the calculator uses neither, so napoleon finds nothing
    app.connect("autodoc-process-docstring", _wrap, priority=900)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
