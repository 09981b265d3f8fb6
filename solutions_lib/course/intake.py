"""Intake: what stock nbgrader may open in a submission (and in an autograded folder).

nbgrader opens whatever `submitted/<student>/<assignment>/` holds: it reads `*.ipynb` and
`timestamp.txt` with a plain `open()` and copies every other file with `shutil.copy`. A FIFO
named like a notebook blocks `nbgrader autograde` forever; a symbolic link is followed (a link
named `data.csv` to another student's notebook or to `source/` lands, as a plain file, in the
kernel's folder); a device is read without end; a huge file fills the disk.

`SafeAutograde` and `SafeGenerateFeedback` (nbgrader's converters with `IntakeMixin`) check
the folder with `lstat` before any nbgrader step opens it:

- the submission folder itself (and the student's folder) must be a real folder, and
  `timestamp.txt`, when present, a regular file: otherwise the whole submission is refused;
- every other entry must be a regular file of at most `intake_max_file_bytes` (config.py:
  MAX_SUBMISSION_FILE_BYTES): a refused notebook is dropped from the run (its stale autograded
  copy removed), a refused other file is not copied; the rest of the submission and of the
  class is graded;
- each refusal is logged (`refused at intake: <path>: <why>`), and the run then ends with
  nbgrader's error status, as for a kernel that died. `grader.read_results` (and with it the
  grade report) shows such a notebook as failed, with the reason, never as a 0.

Before nbgrader's permission step (`os.chmod`, which follows links) every link or special file
in the output folder is removed. `install()` (called by `config.apply_course_config`) makes
stock `nbgrader autograde` / `generate_feedback` and the NbGraderAPI (formgrader, tests) use
these classes: nbgrader builds its converters from module names that the config cannot set,
so those names are pointed at the subclasses.
"""
from __future__ import annotations

import glob
import os
import stat

from .limits import MAX_SUBMISSION_FILE_BYTES

TIMESTAMP = "timestamp.txt"


def intake_problem(path, max_bytes: int | None = None) -> str | None:
    """Why nbgrader must not open `path` (lstat only: nothing is opened), or None.

    A path that does not exist is no problem here (nbgrader reports it as missing).
    `max_bytes`: None for MAX_SUBMISSION_FILE_BYTES, 0 for no size limit."""
    if max_bytes is None:
        max_bytes = MAX_SUBMISSION_FILE_BYTES
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None
    except OSError as e:
        return f"cannot be inspected ({e.strerror})"
    m = st.st_mode
    if stat.S_ISLNK(m):
        return "is a symbolic link"
    if stat.S_ISFIFO(m):
        return "is a FIFO (named pipe)"
    if stat.S_ISSOCK(m):
        return "is a socket"
    if stat.S_ISCHR(m) or stat.S_ISBLK(m):
        return "is a device"
    if stat.S_ISDIR(m):
        return "is a folder, not a file"
    if not stat.S_ISREG(m):
        return "is not a regular file"
    if max_bytes and st.st_size > max_bytes:
        return f"is {st.st_size / 2**20:.1f} MB, over the {max_bytes / 2**20:g} MB limit"
    return None


def folder_problem(folder) -> str | None:
    """Why the submission folder `.../<student>/<assignment>` (or its student folder) must not
    be read, or None. A missing folder is no problem here."""
    folder = os.path.normpath(str(folder))
    for p in (os.path.dirname(folder), folder):
        try:
            st = os.lstat(p)
        except FileNotFoundError:
            return None
        except OSError as e:
            return f"{p} cannot be inspected ({e.strerror})"
        if stat.S_ISLNK(st.st_mode):
            return f"{p} is a symbolic link"
        if not stat.S_ISDIR(st.st_mode):
            return f"{p} is not a folder"
    why = intake_problem(os.path.join(folder, TIMESTAMP), max_bytes=2**16)
    return f"{TIMESTAMP} {why}" if why else None


def scan_folder(folder: str, max_bytes: int | None = None) -> dict[str, str]:
    """{path: why} for every entry under `folder` (not following links) that nbgrader must not
    open. Paths are `os.path.join(folder, ...)`, as `os.walk(folder)` spells them."""
    out: dict[str, str] = {}

    def walk(d):
        try:
            entries = list(os.scandir(d))
        except OSError as e:
            out[d] = f"cannot be listed ({e.strerror})"
            return
        for e in entries:
            if e.is_dir(follow_symlinks=False):
                walk(e.path)
                continue
            why = intake_problem(e.path, max_bytes)
            if why:
                out[e.path] = why

    walk(folder)
    return out


class IntakeRefused(Exception):
    pass


def _mixin():
    from nbgrader.converters.base import BaseConverter, NbGraderException
    from traitlets import Integer

    class IntakeMixin(BaseConverter):
        """Checks the converter's input folder before nbgrader opens anything in it."""

        intake_max_file_bytes = Integer(MAX_SUBMISSION_FILE_BYTES, config=True,
                                        help="Largest file accepted in an input folder (0: no limit).")

        def convert_notebooks(self):
            self._intake_refusals: list[str] = []
            try:
                super().convert_notebooks()
            except NbGraderException:
                self._report_refusals()
                raise
            if self._report_refusals():
                raise NbGraderException("refused at intake (see above); everything else was processed")

        def _report_refusals(self) -> bool:
            for line in getattr(self, "_intake_refusals", []):
                self.log.error("refused at intake: %s", line)
            return bool(getattr(self, "_intake_refusals", []))

        def _refuse(self, path: str, why: str) -> None:
            line = f"{path}: {why}"
            self.log.error("refused at intake: %s", line)
            self._intake_refusals = getattr(self, "_intake_refusals", []) + [line]

        def init_destination(self, assignment_id: str, student_id: str) -> bool:
            self._intake_ignore = []
            src = self._format_source(assignment_id, student_id)
            whole = folder_problem(src)
            if whole:
                self._refuse(os.path.normpath(src), whole)
                raise IntakeRefused(f"refused at intake: {src}: {whole}")
            refused = scan_folder(src, self.intake_max_file_bytes)
            keep = []
            dropped = []
            for nb in self.notebooks:
                why = refused.get(nb) or refused.get(os.path.join(src, os.path.basename(nb)))
                (dropped if why else keep).append(nb)
            for path, why in sorted(refused.items()):
                self._refuse(path, why)
            self.notebooks = keep
            # not copied by nbgrader's init_assignment (patterns joined to an absolute path match it alone)
            self._intake_ignore = [glob.escape(p) for p in refused]
            ok = super().init_destination(assignment_id, student_id)
            if ok:
                dest = self._format_dest(assignment_id, student_id)
                for nb in dropped:  # a stale copy from an earlier run must not be read as this one
                    stale = os.path.join(dest, os.path.splitext(os.path.basename(nb))[0] + self.exporter.file_extension)
                    if os.path.lexists(stale):
                        os.remove(stale)
                if not keep:
                    raise IntakeRefused(f"refused at intake: no notebook of {src} can be opened safely")
            return ok

        def init_assignment(self, assignment_id: str, student_id: str) -> None:
            extra = getattr(self, "_intake_ignore", [])
            if not extra:
                return super().init_assignment(assignment_id, student_id)
            base = list(self.coursedir.ignore)
            self.coursedir.ignore = base + extra
            try:
                super().init_assignment(assignment_id, student_id)
            finally:
                self.coursedir.ignore = base

        def set_permissions(self, assignment_id: str, student_id: str) -> None:
            # nbgrader chmods every file of the output folder, following links: remove any
            # link or special file first (nothing nbgrader wrote is one)
            dest = os.path.normpath(self._format_dest(assignment_id, student_id))
            for path, why in scan_folder(dest, 0).items():
                self.log.error("removed from %s before setting permissions: %s %s", dest, path, why)
                try:
                    os.remove(path)
                except OSError:
                    pass
            super().set_permissions(assignment_id, student_id)

    return IntakeMixin


_CLASSES: dict[str, type] = {}


def safe_converters() -> tuple[type, type]:
    """(SafeAutograde, SafeGenerateFeedback)."""
    if not _CLASSES:
        from nbgrader.converters import Autograde, GenerateFeedback
        from traitlets import Integer

        mixin = _mixin()

        class SafeAutograde(mixin, Autograde):
            """nbgrader's Autograde with the intake check (solutions_lib.course.intake)."""

        class SafeGenerateFeedback(mixin, GenerateFeedback):
            """nbgrader's GenerateFeedback with the intake check on the autograded folder
            (files there were written by nbgrader: no size limit)."""

            intake_max_file_bytes = Integer(0, config=True, help="Largest file accepted (0: no limit).")

        _CLASSES.update(autograde=SafeAutograde, feedback=SafeGenerateFeedback)
    return _CLASSES["autograde"], _CLASSES["feedback"]


def install() -> None:
    """Point the names stock nbgrader builds its converters from at the safe subclasses."""
    import nbgrader.apps.api as api
    import nbgrader.apps.autogradeapp as autogradeapp
    import nbgrader.apps.generatefeedbackapp as feedbackapp

    auto, feedback = safe_converters()
    autogradeapp.Autograde = api.Autograde = auto
    feedbackapp.GenerateFeedback = api.GenerateFeedback = feedback
