// Package trigger turns the form service's webhooks into prompt syncs
// without trusting them: a webhook is only a signal that a form has
// something new, and the sync that follows reads the Forms API, the one
// source of truth, through the same exactly-once path as the schedule.
//
// The service's webhooks carry no signature and no form id, and anyone
// can replay or forge one, so the [Handler] takes nothing from them but
// the fact that they came: the form is named by the URL configured at the
// service, behind a secret path segment
// (POST /hooks/<secret>/<form id>), the body is read to its end, never
// parsed or kept, and the answer (202) comes at once. A forged request
// with the secret can at most cause one extra read of a configured form,
// which finds nothing new. Without the secret, every form id gets the
// same 404, so the endpoint tells nobody which forms exist.
//
//	q := trigger.NewQueue(trigger.QueueConfig{Gather: 200 * time.Millisecond})
//	h, _ := trigger.NewHandler(trigger.Config{Secret: secret, Forms: forms, Queue: q})
//	mux.Handle("/hooks/", h)
//	go q.Run(ctx, func(ctx context.Context, forms []string) { eng.SyncForms(ctx, forms...) })
//
// The [Queue] coalesces: a form is pending at most once however many
// webhooks name it, a webhook that comes while its form is being synced
// queues one more sync (the read may have started before the submission
// was made), and the forms pending together are synced, and committed,
// together. The schedule keeps running beside it as the safety net for
// webhooks that never came.
package trigger
