package cli

import (
	"strings"
	"testing"

	"github.com/formsync/formsync/internal/apisim"
)

// TestPinsOfUnknownFormsWarned: a pin for a form FORMSYNC_FORMS does not
// list (a misspelt id) is warned of by env -check and at the start of a
// sync; a pin for a field the form has never had is warned of at the
// start of a sync once the form's fields are known (its first read).
func TestPinsOfUnknownFormsAndFieldsWarned(t *testing.T) {
	sim := apisim.New(apisim.Options{Seed: 5, Variant: apisim.Newer, Forms: []string{"a"}, SubmissionsPerForm: 20})
	syncEnv(t, sim, "a")
	t.Setenv("FORMSYNC_FIELD_TYPES", `{"contcat":{"zip":"string"},"a":{"EMAIL":"string","emial":"string"}}`)
	const unknown = `FORMSYNC_FIELD_TYPES pins fields of forms FORMSYNC_FORMS does not list (`
	if code, out, errOut := run(t, "env", "-check", "sync"); code != exitOK || !strings.Contains(out, unknown+`"contcat")`) {
		t.Errorf("env -check sync: exit %d, want %d and %q:\n%s%s", code, exitOK, unknown, out, errOut)
	}
	code, _, errOut := run(t, "sync")
	if code != exitOK || !strings.Contains(errOut, unknown) || !strings.Contains(errOut, "contcat") {
		t.Errorf("first sync: exit %d, want %d and %q:\n%s", code, exitOK, unknown, errOut)
	}
	if strings.Contains(errOut, "never had") {
		t.Errorf("first sync warns of fields before any was read:\n%s", errOut)
	}
	code, _, errOut = run(t, "sync")
	if code != exitOK || !strings.Contains(errOut, "pins fields this form has never had") || !strings.Contains(errOut, `"fields":["emial"]`) {
		t.Errorf("second sync: exit %d, want %d and a warning naming emial alone (EMAIL is email, ignoring case):\n%s", code, exitOK, errOut)
	}
}

// TestPinsDifferingInCaseRefused: field names are matched ignoring case,
// so two pins of one form that differ only in case pin one field twice.
func TestPinsDifferingInCaseRefused(t *testing.T) {
	apiEnv(t)
	t.Setenv("FORMSYNC_FIELD_TYPES", `{"a":{"Zip":"string","zip":"integer"}}`)
	code, _, errOut := run(t, "env", "-check", "sync")
	if want := `form "a": fields "Zip" and "zip" are one field`; code != exitUsage || !strings.Contains(errOut, want) {
		t.Errorf("exit %d, want %d and %q:\n%s", code, exitUsage, want, errOut)
	}
}
