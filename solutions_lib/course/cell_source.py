"""Whether two versions of a test cell are the same code (a leaf module of the pipeline)."""


def code_lines(source: str) -> list[str]:
    """The lines that matter for comparing two versions of a test cell: leading comments and
    blank lines dropped (nbgrader puts a comment on a test cell it adds back), trailing spaces
    ignored."""
    lines = [ln.rstrip() for ln in source.strip().split("\n")]
    while lines and (not lines[0] or lines[0].lstrip().startswith("#")):
        lines.pop(0)
    return lines


def same_source(a: str, b: str) -> bool:
    return code_lines(a) == code_lines(b)
