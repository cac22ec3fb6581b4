// Package deploy holds formsync's Kubernetes manifests (kustomize
// directories) and the tests that keep them, and the Dockerfile, in step
// with the binary. It has no code of its own.
//
//	base/                 the CronJob (formsync sync), ServiceAccount, ConfigMap
//	backfill/             a one-off Job: formsync backfill --form ID
//	status/               a one-off Job: formsync status
//	overlays/sharded/     the CronJob's runs as Indexed Jobs of 4 pods
//	overlays/scheduler/   a Deployment running formsync run, with probes
//	overlays/accounts/    the CronJob syncing several accounts: a token per account
//	image/                the one place the image is set
//
// The tests render every directory with `kubectl kustomize` (skipped
// without kubectl), decode each document strictly into its k8s.io/api
// type, and check what a reviewer would: a locked-down pod, the staging
// emptyDir, the token as a read-only file, grace periods, Forbid
// concurrency, and that every FORMSYNC_* name is one formsync reads.
// docs/gke.md walks through a deployment.
package deploy
