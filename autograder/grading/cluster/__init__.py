"""Grading a class on Dask distributed: each student a task, one writer to the gradebook.

`residual-pack grade ... --cluster local` starts an embedded `LocalCluster` (one worker
process per job, one thread each); `--cluster tcp://HOST:8786` (or `tls://`, with the
certificates of Dask's own config) uses a running scheduler. Both go through
`client.grade_on_cluster`; without `--cluster` the class is graded by the local process
pool of `classrun.grade_all`, and Dask need not be installed.

What travels, and what does not:

- The coordinator packs what a worker needs to grade the assignment into a *bundle*
  (`bundle.make_bundle`: the course config, `source/`, the reference run's records that
  the coordinator judges with, the limits and the isolation level, as a deterministic
  tar) and leaves it on the scheduler under its SHA-256 (`client.set_metadata`), where
  every worker, including one that joins or is restarted mid-class, can fetch it once. A
  worker checks the bytes against the hash.
- A task (`worker.grade_task`) carries the student's id, the bytes of what they handed
  in, the bundle's hash and the pack's fingerprint (`bundle.pack_fingerprint`: version and
  code); a worker running another pack refuses it. No path on the coordinator's disk is
  sent, nor the gradebook's URL.
- On the worker, the student is graded exactly as by the local pool: intake, then
  nbgrader's autograde in a private scratch course (a `grading_session`, as for the local
  pool) whose Execute step runs the notebook in our sandbox, in a child process of the
  worker (`student.Grader`), then feedback. The worker returns the result, the autograded
  and repaired notebooks, the feedback pages and the gradebook rows of the submission.
- Only the coordinator writes the course's gradebook (`client.apply_outcome`, through
  nbgrader's `Gradebook` on the course's `db_url`: SQLite by default, PostgreSQL for a
  course shared by several graders), then the journal.

Task keys are deterministic (assignment, student, submission hash, bundle hash), so a task
that Dask reruns after a worker died is the same task, and the coordinator writes each
student once, when the first result arrives. Resuming a killed run is the journal's job,
as with the local pool.

One module per side, in the order they depend on each other:

- `bundle`: what both sides share and check: the pack's fingerprint, the bundle (made by
  the coordinator, unpacked by a worker), the file names that may travel;
- `worker`: runs in a Dask worker process: its scratch course per bundle and
  `grade_task`, the function the coordinator sends (Dask imports it by this module's path);
- `client`: runs in the coordinator (`residual-pack grade`): the Dask client, the tasks,
  and writing what comes back into the course.

This file imports nothing, so that a worker loads only `bundle` and `worker`.
"""
