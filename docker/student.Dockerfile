# The students' JupyterLab image: the student edition of the kit (no reference answer), torch's
# CPU wheel, JupyterLab with nbgrader's student extensions (Validate, Assignments), and the
# released notebooks. Nothing from source/, the trusted cache or the gradebook goes in.
#
# Build from the repository root, after making the wheel and release/:
#     make student-kit release
#     docker build -f docker/student.Dockerfile -t training-at-scale-student .
# JupyterHub: c.DockerSpawner.image (or c.KubeSpawner.image) = "training-at-scale-student";
# mount the shared exchange at /srv/nbgrader/exchange (docs/instructors.md, "Several users").
# Not built by the suite (no Docker daemon where it runs): tests/test_student_image.py checks
# what it copies and installs against the repository instead.
FROM python:3.11-slim

ARG TORCH=torch==2.13.0
ARG NB_USER=jovyan
ARG NB_UID=1000

RUN useradd --create-home --uid "${NB_UID}" "${NB_USER}"

# torch's CPU wheel first: a bare `torch` from PyPI pulls several GB of CUDA packages
RUN pip install --no-cache-dir --index-url https://download.pytorch.org/whl/cpu "${TORCH}" \
 && pip install --no-cache-dir "jupyterlab>=4.0,<5" "nbgrader>=0.9.6,<0.10" "numpy>=1.24" "matplotlib>=3.7" \
        "jupyterhub>=4"

# the student edition: `make student-kit` writes exactly one wheel here
COPY dist/student/ /tmp/kit/
RUN pip install --no-cache-dir /tmp/kit/*+student-py3-none-any.whl && rm -rf /tmp/kit

# students validate, fetch and submit; they never create, release or grade assignments
RUN jupyter server extension disable --sys-prefix nbgrader.server_extensions.formgrader \
 && jupyter labextension disable --level=sys_prefix @jupyter/nbgrader:create-assignment \
 && jupyter labextension disable --level=sys_prefix @jupyter/nbgrader:formgrader

COPY docker/student_nbgrader_config.py /etc/jupyter/nbgrader_config.py
COPY --chown=${NB_UID} release/ /home/${NB_USER}/course/

USER ${NB_USER}
WORKDIR /home/${NB_USER}/course
CMD ["jupyterhub-singleuser", "--ip=0.0.0.0"]
