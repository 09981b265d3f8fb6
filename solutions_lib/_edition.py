"""Which edition of the kit this is: "full" (the repository: every reference answer) or
"student" (course/student_kit.py writes this file into the student wheel)."""
EDITION = "full"
