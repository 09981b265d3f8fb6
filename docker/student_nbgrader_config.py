# nbgrader's config inside the students' image (docs/instructors.md, "Several users"): the
# course id and the shared exchange every single-user server mounts at the same path.
c = get_config()  # noqa: F821
c.CourseDirectory.course_id = "training-at-scale"
c.Exchange.root = "/srv/nbgrader/exchange"
c.Exchange.path_includes_course = True
