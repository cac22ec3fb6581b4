package worker

import (
	"errors"
	"fmt"
)

// FieldPolicy rewrites a submission's personal fields before anything of
// it is staged: dropped fields never touch disk, hashed ones are stored as
// keyed hashes. *fieldpolicy.Policy satisfies it.
type FieldPolicy interface {
	// Fields rewrites a canonical JSON object of fields, keeping it
	// canonical.
	Fields(obj string) (string, error)
	// Raw rewrites the fields in a submission object as the API sent it.
	Raw(raw []byte) ([]byte, error)
	// Names removes the names of dropped fields from a sorted list.
	Names(names []string) []string
	// RuleFor names the rule that decides what happens to the field called
	// name: its pattern and action ("keep", "hash"), or "" and "keep"
	// when no rule matches.
	RuleFor(name string) (pattern, action string)
	// Identity names the policy and its key ("" for none), so that a form
	// stored under another policy is noticed.
	Identity() string
}

// ErrPolicyChanged is matched (errors.Is) by a *PolicyChangedError.
var ErrPolicyChanged = errors.New("field policy changed")

// PolicyChangedError says that a form's rows were stored under another
// field policy than the one configured: a sync refuses to mix the two in
// one table. A reconcile, or a backfill of the whole form, rewrites every
// row it is served under the configured policy and records it.
type PolicyChangedError struct {
	FormID      string
	Stored, Now string // policy identities, "" for none
}

func (e *PolicyChangedError) Error() string {
	was := "under field policy " + e.Stored
	if e.Stored == "" {
		was = "without a field policy"
	}
	now := "field policy " + e.Now
	if e.Now == "" {
		now = "no field policy"
	}
	return fmt.Sprintf("form %s: its rows were stored %s, and %s is configured now: not mixing the two in one table; "+
		"run 'formsync reconcile --form %s' (or a backfill of the whole form) to rewrite its rows under the new policy, "+
		"or restore the previous FORMSYNC_FIELD_POLICY and key", e.FormID, was, now, e.FormID)
}

// Is makes errors.Is(err, ErrPolicyChanged) true.
func (e *PolicyChangedError) Is(target error) bool { return target == ErrPolicyChanged }

// policyID is the identity of the configured policy, "" for none.
func (rd reading) policyID() string {
	if rd.policy == nil {
		return ""
	}
	return rd.policy.Identity()
}

// checkPolicy refuses to read a form whose stored rows were written under
// another policy, unless the read rewrites them all (adopt) or nothing is
// stored yet.
func (r *formRun) checkPolicy(adopt bool) error {
	now := r.policyID()
	if r.old.FieldPolicy == now || adopt || r.old.Rows == 0 && r.old.Deleted == 0 {
		return nil
	}
	return &PolicyChangedError{FormID: r.old.FormID, Stored: r.old.FieldPolicy, Now: now}
}

// applyPolicy rewrites a row's fields and raw object under the configured
// policy. The content key was computed before, so that dedupe of the
// older response form does not depend on the policy.
func (r *formRun) applyPolicy(fields string, raw []byte) (string, []byte, error) {
	p := r.policy
	if p == nil {
		return fields, raw, nil
	}
	f, err := p.Fields(fields)
	if err != nil {
		return "", nil, fmt.Errorf("applying the field policy to fields: %w", err)
	}
	if len(raw) > 0 {
		if raw, err = p.Raw(raw); err != nil {
			return "", nil, fmt.Errorf("applying the field policy to the raw submission: %w", err)
		}
	}
	return f, raw, nil
}
