// Package deploy holds formsync's Kubernetes manifests and the tests that keep
// them, and the container image, in step with the binary. It has no code of
// its own: the manifests are kustomize directories and the package exists for
// its tests.
//
// The layout follows the ways formsync runs:
//
//   - base: a CronJob that runs `formsync sync` every 15 minutes (one pass over
//     every form, then exit), its ServiceAccount (Workload Identity to
//     BigQuery) and the ConfigMap formsync-config that every mode reads with
//     envFrom. The API token Secret is created with kubectl, never applied
//     from here; base/secret.example.yaml shows its shape.
//   - backfill: a one-off Job running `formsync backfill --form ID`, reusing
//     the ConfigMap, ServiceAccount and Secret that base created.
//   - status: the backfill Job renamed formsync-status, running `formsync
//     status` once, so that the state is read with the CronJob's own
//     settings and pod.
//   - overlays/sharded: base with the CronJob's Job made Indexed, so that N pods
//     each sync the forms of one shard (JOB_COMPLETION_INDEX of
//     FORMSYNC_SHARD_COUNT).
//   - overlays/scheduler: base with the CronJob replaced by one Deployment
//     running `formsync run`, which schedules passes itself and serves
//     /healthz, /readyz and /metrics behind a Service.
//   - image: a kustomize Component naming the image; base, backfill and the
//     scheduler's Deployment include it, so the image is changed in one place
//     and no directory can run another.
//
// The tests render every directory with `kubectl kustomize` (skipped when
// kubectl is missing), decode each document strictly into its k8s.io/api type
// so that a misspelt field fails, and check the properties a reviewer would:
// a non-root, read-only, capability-free pod with limits; a writable emptyDir
// at FORMSYNC_TMP_DIR; the token as a read-only file; a grace period longer
// than FORMSYNC_SHUTDOWN_TIMEOUT (and, for a one-shot command, its metrics
// push after it); Forbid concurrency; shard counts that agree.
// Every FORMSYNC_* name in the manifests and the Dockerfile must be one that
// `formsync env` lists, so renaming a variable breaks the build here rather
// than a deployment. The Dockerfile test runs the image's own `go build` line
// and checks the binary is static and reports the stamped version; it
// compiles every dependency again with the image's flags, so it runs only
// with FORMSYNC_SLOW_TESTS=1 (as .ci/run does).
package deploy
