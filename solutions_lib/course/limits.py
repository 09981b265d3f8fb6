"""Grading limits on what a submission can make the grader hold or write (issue 14).

A leaf module (it imports nothing of the course), so the pipeline's modules read the limits
without importing `config`, which imports them to apply the settings.
"""

#: Output kept per notebook (execute.py; past it a cell gets an OutputTooLarge error).
OUTPUT_CAP_BYTES = 10 * 2**20
#: Largest file a submission may hold (intake.py refuses bigger ones, and links, FIFOs, sockets, devices).
MAX_SUBMISSION_FILE_BYTES = 50 * 2**20
#: Largest file one process of the sandboxed kernel may write (prlimit).
KERNEL_FILE_BYTES = 256 * 2**20
