package cli

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// checkFormKnown refuses a --form of backfill or reconcile that names no
// form formsync knows: one not in FORMSYNC_FORMS (configured) that no run
// ever read into the store. Read anyway, a typo would answer 404 and leave
// a failing form in the state for good, and a form that exists but is not
// configured would be loaded once and never kept up to date. The store is
// read only when the form is not configured, read-only, and never created.
// When it refuses, it says why and returns the exit code.
func checkFormKnown(ctx context.Context, e *env, configured []string, form string) (code int, ok bool) {
	if slices.Contains(configured, form) {
		return 0, true
	}
	unknown := &ConfigError{Problems: []string{fmt.Sprintf("--form %s: not in FORMSYNC_FORMS, and never read into this store: check the id, or add the form to FORMSYNC_FORMS first", form)}}
	if strings.Contains(form, ",") {
		unknown.Problems[0] = fmt.Sprintf("--form %s: name one form (run the command once for each)", form)
		return configError(e, unknown), false
	}
	dst, err := openReadOnly(ctx, e.cfg)
	if nse := (noStoreError{}); errors.As(err, &nse) {
		return configError(e, unknown), false
	}
	if err != nil {
		e.log.Error("cannot open the sink", "error", err.Error())
		return exitFailed, false
	}
	defer dst.Close()
	states, err := dst.ReadState(ctx, []string{form})
	if err != nil {
		e.log.Error("cannot read the sync state", "form", form, "error", err.Error())
		return exitFailed, false
	}
	if st, found := states[form]; found && everRead(st) {
		return 0, true
	}
	return configError(e, unknown), false
}
