"""The students' Docker image (docker/student.Dockerfile), checked without a Docker daemon:
what it copies exists and holds no answer, what it pins matches the project, what it turns off
exists in the installed nbgrader."""
from __future__ import annotations

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOCKERFILE = ROOT / "docker" / "student.Dockerfile"
TEXT = DOCKERFILE.read_text()


def _instructions(name: str) -> list[str]:
    joined = re.sub(r"\\\n\s*", " ", TEXT)
    return [line.split(None, 1)[1] for line in joined.splitlines() if line.split(None, 1)[:1] == [name]]


def test_copies_only_the_kit_the_release_and_the_student_config():
    sources = [re.sub(r"--chown=\S+\s+", "", c).split()[0] for c in _instructions("COPY")]
    assert sources == ["dist/student/", "docker/student_nbgrader_config.py", "release/"], sources
    assert (ROOT / "release").is_dir() and (ROOT / "docker/student_nbgrader_config.py").is_file()
    ignore = (ROOT / "docker/student.Dockerfile.dockerignore").read_text().split()
    assert ignore[ignore.index("*"):] == ["*", "!dist/student/", "!release/", "!docker/student_nbgrader_config.py"]
    installs = " ".join(_instructions("RUN"))
    assert "+student-py3-none-any.whl" in installs     # the wheel `make student-kit` writes, nothing else
    assert "solutions_lib" not in installs and "-e " not in installs


def test_release_copied_into_the_image_has_no_solution_or_hidden_test():
    for nb in (ROOT / "release").rglob("*.ipynb"):
        text = nb.read_text()
        for marker in ("BEGIN SOLUTION", "BEGIN HIDDEN TESTS", "END HIDDEN TESTS"):
            assert marker not in text, f"{nb.relative_to(ROOT)} holds {marker!r}"


def test_pins_match_the_project():
    make = (ROOT / "Makefile").read_text()
    torch_pin = re.search(r"^TORCH\s*\?=\s*(\S+)", make, re.M).group(1)
    assert f"ARG TORCH={torch_pin}" in TEXT
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    for name in ("jupyterlab", "nbgrader", "numpy", "matplotlib"):
        pin = next(d for d in deps if re.match(rf"{name}\b", d))
        assert f'"{pin}"' in TEXT, (name, pin)
    assert "download.pytorch.org/whl/cpu" in TEXT   # a bare torch from PyPI pulls CUDA


def test_what_it_turns_off_exists_in_the_installed_nbgrader():
    import importlib

    import nbgrader
    runs = " ".join(_instructions("RUN"))
    servers = re.findall(r"server extension disable --sys-prefix (\S+)", runs)
    labs = re.findall(r"labextension disable --level=sys_prefix (\S+)", runs)
    assert servers == ["nbgrader.server_extensions.formgrader"]
    assert set(labs) == {"@jupyter/nbgrader:create-assignment", "@jupyter/nbgrader:formgrader"}
    for mod in servers:
        importlib.import_module(mod)
    static = Path(nbgrader.__file__).parents[4] / "share/jupyter/labextensions/@jupyter/nbgrader/static"
    js = " ".join(p.read_text(errors="replace") for p in static.glob("*.js")) if static.is_dir() else None
    if js is None:   # nbgrader installed elsewhere (a system site-packages): look beside sys.prefix
        import sys
        static = Path(sys.prefix) / "share/jupyter/labextensions/@jupyter/nbgrader/static"
        js = " ".join(p.read_text(errors="replace") for p in static.glob("*.js"))
    for plugin in labs:
        assert f'"{plugin}"' in js, plugin


def test_student_config_matches_the_instructor_guide():
    class _C:
        def __init__(self):
            self.values = {}

        def __getattr__(self, section):
            values = self.values

            class _S:
                def __setattr__(self, key, value):
                    values[f"{section}.{key}"] = value
            return _S()

    c = _C()
    exec((ROOT / "docker/student_nbgrader_config.py").read_text(), {"get_config": lambda: c})
    assert c.values == {"CourseDirectory.course_id": "training-at-scale",
                        "Exchange.root": "/srv/nbgrader/exchange", "Exchange.path_includes_course": True}
    guide = (ROOT / "docs/instructors.md").read_text()
    for key, value in c.values.items():
        assert f"c.{key} = {value!r}".replace("'", '"') in guide, key
