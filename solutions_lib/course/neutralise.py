"""Student HTML and scripts made inert before any browser renders them.

The Formgrader renders the *autograded* notebook to HTML in the instructor's browser (same
origin as the Formgrader's API, so a script there could change anyone's grade), and
`nbgrader generate_feedback` renders it for the student. nbconvert passes raw HTML in markdown
cells and `text/html`/`text/markdown` outputs through as it is, inlines
`application/javascript` in a `<script>`, and MathJax honours `\\href{javascript:...}`.

`NeutraliseStudentContent` runs in the grader process, after the kernel is done: in
`Autograde.autograde_preprocessors` (after `SaveAutoGrades`, so grades are taken from what the
kernel produced, and before the final `CheckCellMetadata`) and in
`GenerateFeedback.preprocessors` (wired in `config.apply_course_config`). It never changes a
cell that is locked in the gradebook (same grade id, same source: nbgrader's checksums and the
instructor's text stay as they are) nor any `nbgrader` metadata; it rewrites:

- every other **markdown cell** (written answers, cells a student added): left byte for byte
  as it is when its rendering holds only allowlisted HTML (`is_safe_html`); otherwise the whole
  text is shown verbatim in a fenced code block under a one-line notice (readable, not run);
  attachments other than PNG/JPEG/GIF are dropped;
- every other **raw cell** (nbconvert writes raw cells into the HTML as they are): shown
  escaped inside `<pre>`;
- **every output of every code cell** (a student's hook can write into test cells too):
  `text/html` kept when safe, else cleaned with bleach's allowlist (the rejected tags shown as
  text), else replaced by text; `text/markdown` and `text/latex` kept when safe, else text;
  `application/javascript`, `image/svg+xml`, widget views and any other type a browser could
  render become `text/plain` (JavaScript source shown as text); image data that is not plain
  base64 is dropped; an odd stream name, output type or execution count is reset;
- the notebook's embedded widget state (`metadata.widgets`) and every cell's
  `metadata.transient` (its `remove_source` would hide a student's code from the Formgrader).

The check is deliberately strict and parser-independent: in HTML that contains only
allowlisted tags written in the form the renderers emit (double-quoted attribute values,
allowlisted attributes, URL schemes http/https/mailto or relative, raster `data:` images),
every `<` a browser could read as a tag is matched; anything else fails the check.
Applying the preprocessor twice changes nothing the second time.
"""
from __future__ import annotations

import html as htmllib
import re

from nbformat import from_dict
from nbgrader.preprocessors import NbGraderPreprocessor

from ..grading import RECORD_MIME

NOTICE = ("*[Shown as text by the grader: this answer contains HTML, links or math commands "
          "that could run code in a browser.]*")
RAW_CLASS = "tas-neutralised"

# ------------------------------------------------------------------ the HTML allowlist

TAGS = {
    "a", "abbr", "b", "blockquote", "br", "caption", "cite", "code", "dd", "del", "div", "dl",
    "dt", "em", "h1", "h2", "h3", "h4", "h5", "h6", "hr", "i", "img", "input", "ins", "kbd",
    "li", "mark", "ol", "p", "pre", "q", "s", "samp", "small", "span", "strong", "sub", "sup",
    "table", "tbody", "td", "tfoot", "th", "thead", "tr", "u", "ul", "var",
}
_URL_ATTRS = {("a", "href"), ("img", "src")}
_ATTRS = {
    "*": {"class", "title"},
    "a": {"href"},
    "img": {"src", "alt", "width", "height"},
    "input": {"type", "disabled", "checked"},
    "td": {"colspan", "rowspan", "align"}, "th": {"colspan", "rowspan", "align"},
    "tr": {"align"}, "p": {"align"}, "div": {"align"},
    "table": {"border"}, "ol": {"start"},
}
#: class names the renderers emit (pygments' short token classes, mistune's task lists, pandas'
#: `dataframe`, `language-*`), and none of the Formgrader's own (`score`, `comment`, ...).
_CLASS = re.compile(r"^(?:[a-z]{1,3}[0-9]?|highlight|task-list-item(?:-checkbox)?|dataframe|"
                    r"anchor-link|language-[A-Za-z0-9_+#.-]{1,40}|" + RAW_CLASS + r")$")
_NUMBER = re.compile(r"^[0-9]{1,5}%?$")
_SCHEMES = {"http", "https", "mailto"}
_RASTER = re.compile(r"^data:image/(?:png|jpeg|gif|webp);base64,[A-Za-z0-9+/=]*$")
_TAG_START = re.compile(r"<[!?/A-Za-z]")
_TAG = re.compile(r'<(/?)([A-Za-z][A-Za-z0-9]*)((?:\s+[A-Za-z][-A-Za-z0-9_]*(?:\s*=\s*"[^"<>]*")?)*)\s*/?>')
_ATTR = re.compile(r'([A-Za-z][-A-Za-z0-9_]*)(?:\s*=\s*"([^"<>]*)")?')
#: MathJax commands that make links, load extensions or set classes/styles/ids.
MATH_COMMANDS = re.compile(r"\\(?:href|url|class|cssId|style|data|html|unicode|require|toggle|mmlToken)"
                           r"(?![A-Za-z])")


def _url_ok(tag: str, value: str) -> bool:
    v = re.sub(r"[\x00-\x20\x7f-\x9f]", "", htmllib.unescape(value))
    m = re.match(r"^([A-Za-z][A-Za-z0-9+.-]*):", v)
    if not m:
        return ":" not in v.split("/")[0].split("?")[0].split("#")[0]
    if tag == "img" and _RASTER.match(v):
        return True
    return m.group(1).lower() in _SCHEMES


def attribute_ok(tag: str, name: str, value: str | None) -> bool:
    """`name="value"` is allowed on `tag` (value None: a bare attribute)."""
    tag, name = tag.lower(), name.lower()
    if name not in _ATTRS["*"] and name not in _ATTRS.get(tag, ()):
        return False
    value = "" if value is None else value
    if (tag, name) in _URL_ATTRS:
        return _url_ok(tag, value)
    if name == "class":
        return all(_CLASS.match(t) for t in htmllib.unescape(value).split())
    if name in ("width", "height", "colspan", "rowspan", "border", "start"):
        return bool(_NUMBER.match(value.strip()))
    if name == "align":
        return value.strip().lower() in ("left", "right", "center", "justify")
    if name == "type":
        return value.strip().lower() == "checkbox"
    if name in ("disabled", "checked"):
        return value.strip().lower() in ("", name)
    return True  # title, alt: text


def html_problems(text: str) -> list[str]:
    """Why `text` (HTML) could run code or confuse the page: empty when safe."""
    problems = []
    for start in _TAG_START.finditer(text):
        m = _TAG.match(text, start.start())
        if not m:
            problems.append(f"unparsed markup at {start.start()}: {text[start.start():start.start() + 30]!r}")
            continue
        closing, tag, attrs = m.group(1), m.group(2).lower(), m.group(3)
        if tag not in TAGS:
            problems.append(f"tag <{tag}>")
            continue
        if closing and attrs.strip():
            problems.append(f"attributes on </{tag}>")
        for a in _ATTR.finditer(attrs):
            if not attribute_ok(tag, a.group(1), a.group(2)):
                problems.append(f"attribute {a.group(1)}={a.group(2)!r} on <{tag}>")
    return problems


def is_safe_html(text: str) -> bool:
    return not html_problems(text)


def clean_html(text: str) -> str:
    """bleach with the same allowlist; rejected tags are escaped (shown as text), `<style>`
    blocks (pandas' table CSS) removed."""
    import bleach

    text = re.sub(r"<style\b[^>]*>.*?</style\s*>", "", text, flags=re.I | re.S)
    cleaner = bleach.Cleaner(tags=TAGS, attributes=lambda tag, name, value: attribute_ok(tag, name, value),
                             protocols=_SCHEMES | {"data"}, strip=False, strip_comments=True)
    return cleaner.clean(text)


# ------------------------------------------------------------------ markdown

def render_markdown(source: str, attachments: dict | None = None) -> str:
    """What nbconvert's HTML exporters make of a markdown cell (MathJax aside)."""
    from nbconvert.filters.markdown_mistune import IPythonRenderer, MarkdownWithMath

    renderer = IPythonRenderer(escape=False, attachments=attachments or {}, exclude_anchor_links=True)
    return MarkdownWithMath(renderer=renderer).render(source)


def _math_problems(rendered: str) -> list[str]:
    """MathJax commands in rendered HTML where MathJax looks (not inside <pre> or <code>)."""
    outside = re.sub(r"<(pre|code)\b[^>]*>.*?</\1>", "", rendered, flags=re.I | re.S)
    m = MATH_COMMANDS.search(htmllib.unescape(re.sub(r"<[^>]*>", "", outside)))
    return [f"MathJax command {m.group(0)}"] if m else []


def rendered_problems(rendered: str) -> list[str]:
    return html_problems(rendered) + _math_problems(rendered)


def markdown_problems(source: str, attachments: dict | None = None) -> list[str]:
    """Why the rendering of markdown `source` could run code: empty when safe."""
    try:
        rendered = render_markdown(source, attachments)
    except Exception as exc:  # a missing attachment, a renderer bug: show as text
        return [f"does not render: {exc}"]
    return rendered_problems(rendered)


def as_text_block(source: str) -> str:
    """`source` verbatim in a fenced code block (longer than any backtick run inside)."""
    longest = max((len(r) for r in re.findall(r"`+", source)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{NOTICE}\n\n{fence}text\n{source}\n{fence}"


def neutralise_markdown(source: str, attachments: dict | None = None) -> str:
    if not markdown_problems(source, attachments):
        return source
    for candidate in (as_text_block(source),
                      f'{NOTICE}\n\n<pre class="{RAW_CLASS}">{htmllib.escape(source)}</pre>'):
        if not markdown_problems(candidate):
            return candidate
    return NOTICE + "\n\n(the answer could not be shown safely; it is in the submitted notebook)"


# ------------------------------------------------------------------ outputs

_KEEP = {"text/plain", "image/png", "image/jpeg", "image/gif", "application/json", RECORD_MIME}
_B64 = re.compile(r"^[A-Za-z0-9+/=\s]*$")


def _text(value) -> str:
    return "".join(value) if isinstance(value, list) else str(value)


def neutralise_output(output) -> object | None:
    """A safe copy of `output` (a NotebookNode), or None to drop it."""
    otype = output.get("output_type")
    if otype not in ("stream", "display_data", "execute_result", "error"):
        return None
    out = dict(output)
    if "execution_count" in out and not (out["execution_count"] is None or type(out["execution_count"]) is int):
        out["execution_count"] = None
    if otype == "stream":
        if out.get("name") not in ("stdout", "stderr"):
            out["name"] = "stdout"
        out["text"] = _text(out.get("text", ""))
        return from_dict(out)
    if otype == "error":
        out["ename"] = _text(out.get("ename", "Error"))
        out["evalue"] = _text(out.get("evalue", ""))
        out["traceback"] = [_text(t) for t in out.get("traceback", []) if isinstance(t, (str, list))]
        return from_dict(out)
    data, removed = {}, []
    for mime, value in (out.get("data") or {}).items():
        if mime in ("image/png", "image/jpeg", "image/gif"):
            if isinstance(value, str) and _B64.match(value):
                data[mime] = value
            else:
                removed.append((mime, ""))
        elif mime in _KEEP:
            data[mime] = value
        elif mime == "text/html":
            value = _text(value)
            if is_safe_html(value):
                data[mime] = value
            elif is_safe_html(cleaned := clean_html(value)):
                data[mime] = cleaned
            else:
                removed.append((mime, value))
        elif mime == "text/markdown":
            value = _text(value)
            if markdown_problems(value):
                removed.append((mime, value))
            else:
                data[mime] = value
        elif mime == "text/latex":
            value = _text(value)
            if MATH_COMMANDS.search(value):
                removed.append((mime, value))
            else:
                data[mime] = value
        else:  # application/javascript, image/svg+xml, widget views, PDFs, anything else
            removed.append((mime, _text(value) if isinstance(value, (str, list)) else ""))
    if removed:
        shown = "\n".join(f"[{mime} output shown as text by the grader]\n{text}".rstrip() for mime, text in removed)
        data["text/plain"] = (_text(data["text/plain"]) + "\n" + shown) if "text/plain" in data else shown
    out["data"] = data
    return from_dict(out)


# ------------------------------------------------------------------ cells

def locked_sources(resources) -> dict[str, tuple[str, str]] | None:
    """{grade id: (cell type, source)} of the cells locked in the gradebook for this
    notebook, or None when there is no gradebook to ask."""
    nbg = (resources or {}).get("nbgrader") or {}
    if not all(nbg.get(k) for k in ("db_url", "notebook", "assignment")):
        return None
    from nbgrader.api import Gradebook

    try:
        with Gradebook(nbg["db_url"]) as gb:
            nb = gb.find_notebook(nbg["notebook"], nbg["assignment"])
            return {c.name: (c.cell_type, c.source) for c in nb.source_cells if c.locked}
    except Exception:
        return None


def is_trusted(cell, locked: dict | None) -> bool:
    """The instructor's own cell: locked in the gradebook, same type and source."""
    if not locked:
        return False
    grade_id = (cell.get("metadata", {}).get("nbgrader") or {}).get("grade_id")
    return grade_id in locked and locked[grade_id] == (cell.get("cell_type"), cell.get("source"))


def neutralise_cell(cell, trusted: bool):
    """`cell` (changed in place) with its student content made inert; returns it."""
    # `transient.remove_source` would hide a cell's code from the Formgrader's view
    # (nbconvert honours it); nbformat says transient data is never stored anyway.
    cell.get("metadata", {}).pop("transient", None)
    if cell.get("cell_type") == "code":
        outputs = [neutralise_output(o) for o in cell.get("outputs", [])]
        cell.outputs = [o for o in outputs if o is not None]
        if not (cell.get("execution_count") is None or type(cell.get("execution_count")) is int):
            cell.execution_count = None
        return cell
    if trusted:
        return cell
    if cell.get("cell_type") == "markdown":
        if "attachments" in cell:
            cell.attachments = {name: {m: v for m, v in bundle.items()
                                       if m in ("image/png", "image/jpeg", "image/gif")
                                       and isinstance(v, str) and _B64.match(v)}
                                for name, bundle in (cell.attachments or {}).items()}
        cell.source = neutralise_markdown(cell.source, cell.get("attachments"))
    elif cell.get("cell_type") == "raw":
        if rendered_problems(cell.source):
            cell.source = f'<pre class="{RAW_CLASS}">{htmllib.escape(cell.source)}</pre>'
    return cell


class NeutraliseStudentContent(NbGraderPreprocessor):
    """nbconvert preprocessor (autograde and feedback): student HTML and scripts made inert."""

    def preprocess(self, nb, resources):
        self._locked = locked_sources(resources)
        nb.get("metadata", {}).pop("widgets", None)
        return super().preprocess(nb, resources)

    def preprocess_cell(self, cell, resources, index):
        trusted = is_trusted(cell, getattr(self, "_locked", None))
        try:
            return neutralise_cell(cell, trusted), resources
        except Exception as exc:  # never let an odd cell stop grading; never show it raw either
            self.log.warning("neutralise: cell %s shown as a notice (%s)", index, exc)
            if cell.get("cell_type") == "code":
                cell.outputs = [from_dict({"output_type": "stream", "name": "stdout",
                                           "text": "[outputs withheld by the grader: they could not be checked]\n"})]
            elif not trusted:
                cell.source = NOTICE + "\n\n(the cell could not be checked; it is in the submitted notebook)"
            return cell, resources


def insert_neutraliser(preprocessors: list) -> list:
    """Autograde's list with the neutraliser after SaveAutoGrades (grades come from what the
    kernel produced) and AssignLatePenalties, before the final CheckCellMetadata (which then
    checks the rewritten notebook); at the end when those are absent."""
    out = [p for p in preprocessors if p is not NeutraliseStudentContent]
    from nbgrader.preprocessors import CheckCellMetadata, SaveAutoGrades

    i = len(out)
    if SaveAutoGrades in out:
        after = out.index(SaveAutoGrades) + 1
        later = [j for j in range(after, len(out)) if out[j] is CheckCellMetadata]
        i = later[0] if later else len(out)
    return out[:i] + [NeutraliseStudentContent] + out[i:]
