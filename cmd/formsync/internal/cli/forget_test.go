package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"

	"github.com/formsync/formsync/internal/apisim"
)

// logTime is the time of a text log line, which differs from run to run.
var logTime = regexp.MustCompile(`(?m)^time=\S+ `)

// TestForgetSaysExactlyWhatItDid runs forget through each of its answers,
// in order against one store (each step sees what the ones before it
// did), and compares all it writes and its exit code with what a person or
// a script reads: every word of it is behaviour.
func TestForgetSaysExactlyWhatItDid(t *testing.T) {
	sim := apisim.New(apisim.Options{Seed: 7, Variant: apisim.Newer, Forms: []string{"contact"}, SubmissionsPerForm: 5})
	syncEnv(t, sim, "contact")
	t.Setenv("FORMSYNC_LOG_FORMAT", "text")
	if code, _, errOut := run(t, "sync"); code != exitOK {
		t.Fatalf("sync: exit %d:\n%s", code, errOut)
	}
	first := sim.Submissions("contact")[0]
	var fields struct{ Email string }
	if err := json.Unmarshal(first.Fields, &fields); err != nil || fields.Email == "" {
		t.Fatalf("submission %d has no e-mail: %s (%v)", first.ID, first.Fields, err)
	}
	gone := sim.Delete("contact", 1)[0]
	if code, _, errOut := run(t, "reconcile"); code != exitOK {
		t.Fatalf("reconcile: exit %d:\n%s", code, errOut)
	}
	keyFile := filepath.Join(t.TempDir(), "hash-key")
	if err := os.WriteFile(keyFile, []byte("0123456789abcdef0123"), 0o600); err != nil {
		t.Fatal(err)
	}
	created := func(s apisim.Submission) string { return s.CreatedAt.UTC().Format("2006-01-02T15:04:05.000Z") }
	goneID, firstID := strconv.FormatInt(gone.ID, 10), strconv.FormatInt(first.ID, 10)
	const (
		problems = "formsync: the configuration has problems:\n"
		help     = "Run 'formsync help' for every variable and its default.\n"
		aKey     = "(A key is a submission's id in form contact, or, for a submission of the older response form, which has no id, its content key: 32 hex digits of a hash of its content. If these were meant to match stored rows, check --form and the keys.)\n"
		never    = "No later sync, lookback, backfill or reconcile will store these submissions again.\n"
	)
	for _, step := range []struct {
		name   string
		policy string // FORMSYNC_FIELD_POLICY
		key    bool   // FORMSYNC_FIELD_HASH_KEY_FILE set
		args   []string
		code   int
		stdout string
		stderr string
	}{
		{name: "nothing asked", args: []string{}, code: exitUsage,
			stderr: problems + "  - --form is required: the id of the form holding the submissions\n  - give --key KEY or --field NAME=VALUE: what to forget\n" + help},
		{name: "no key nor field", args: []string{"--form", "contact"}, code: exitUsage,
			stderr: problems + "  - give --key KEY or --field NAME=VALUE: what to forget\n" + help},
		{name: "field without a value", args: []string{"--form", "contact", "--field", "email"}, code: exitUsage,
			stderr: problems + "  - --field \"email\": use NAME=VALUE, e.g. --field email=person@example.com\n" + help},
		{name: "field without a name", args: []string{"--form", "contact", "--field", "=x"}, code: exitUsage,
			stderr: problems + "  - --field \"=x\": use NAME=VALUE, e.g. --field email=person@example.com\n" + help},
		{name: "an argument", args: []string{"--form", "contact", "--key", "1", "extra"}, code: exitUsage,
			stderr: "formsync forget: unexpected arguments [\"extra\"]\n"},
		{name: "a form never synced", args: []string{"--form", "contcat", "--key", "1"}, code: exitUsage,
			stderr: problems + "  - --form contcat: no such form here (never synced, and not in FORMSYNC_FORMS): check the id\n" + help},
		{name: "dry run matching nothing", args: []string{"--form", "contact", "--field", "email=nobody@example.com", "--dry-run"},
			stdout: "Dry run: no stored row of form contact matches: nothing would change.\n"},
		{name: "matching nothing", args: []string{"--form", "contact", "--field", "email=nobody@example.com"},
			stdout: "No stored row of form contact matches: nothing changed.\n"},
		{name: "dry run of a row deleted upstream and a key not stored", args: []string{"--form", "contact", "--key", goneID + ",424242", "--dry-run"},
			stdout: "Dry run: would forget 1 stored row(s) of form contact:\n  " + goneID + "  created " + created(gone) + " (deleted upstream)\n" +
				"Keys not stored (would be tombstoned anyway): 424242\n" + aKey},
		{name: "a row deleted upstream and a key not stored", args: []string{"--form", "contact", "--key", goneID + ",424242"},
			stdout: "Forgot 1 stored row(s) of form contact:\n  " + goneID + "  created " + created(gone) + " (deleted upstream)\n" +
				"Keys not stored (tombstoned anyway, so that no later sync loads them): 424242\n" + aKey + never,
			stderr: "level=INFO msg=\"forgot submissions\" form=contact rows_removed=1 tombstones_for_unstored_keys=1\n"},
		{name: "the same again", args: []string{"--form", "contact", "--key", goneID + ",424242"},
			stdout: "Nothing new to forget in form contact: no stored row has these keys, and they were tombstoned before: " + goneID + ", 424242\n"},
		{name: "dry run of a key forgotten before and a new one", args: []string{"--form", "contact", "--key", goneID + ",777777", "--dry-run"},
			stdout: "Dry run: would forget 0 stored row(s) of form contact:\nKeys not stored (would be tombstoned anyway): 777777\n" + aKey +
				"Keys tombstoned before, nothing to do: " + goneID + "\n"},
		{name: "a key forgotten before and a new one", args: []string{"--form", "contact", "--key", goneID + ",777777"},
			stdout: "Forgot 0 stored row(s) of form contact:\nKeys not stored (tombstoned anyway, so that no later sync loads them): 777777\n" + aKey +
				"Keys tombstoned before, nothing to do: " + goneID + "\n" + never,
			stderr: "level=INFO msg=\"forgot submissions\" form=contact rows_removed=0 tombstones_for_unstored_keys=1\n"},
		{name: "by field", args: []string{"--form", "contact", "--field", "email=" + fields.Email},
			stdout: "Forgot 1 stored row(s) of form contact:\n  " + firstID + "  created " + created(first) + "\n" + never,
			stderr: "level=INFO msg=\"forgot submissions\" form=contact rows_removed=1 tombstones_for_unstored_keys=0\n"},
		{name: "by a dropped field", policy: "email=drop", args: []string{"--form", "contact", "--field", "email=x"}, code: exitUsage,
			stderr: problems + "  - --field email: field \"email\" is dropped by the field policy: it is never stored, so no row can be found by it\n" + help},
		{name: "by a hashed field without the key", policy: "email=hash", args: []string{"--form", "contact", "--field", "email=x"}, code: exitUsage,
			stderr: problems + "  - FORMSYNC_FIELD_POLICY=\"email=hash\" hashes fields: set FORMSYNC_FIELD_HASH_KEY_FILE to a file holding a secret key of at least 16 bytes (e.g. a mounted Secret; 'openssl rand -hex 32 > hash-key' makes one)\n" + help},
		{name: "under a policy the rows were not stored under", policy: "email=hash", key: true, args: []string{"--form", "contact", "--field", "email=x", "--dry-run"}, code: exitFailed,
			stderr: "level=ERROR msg=\"forget failed: nothing was removed\" form=contact error=\"forget in form contact: not the field policy of the stored rows: its rows were stored under field policy none and 0b1f8cee26d32ceadc38521b3ed62332 is configured; set FORMSYNC_FIELD_POLICY (and its key) as the syncs of the form have them, or forget by --key\"\n"},
	} {
		t.Setenv("FORMSYNC_FIELD_POLICY", step.policy)
		t.Setenv("FORMSYNC_FIELD_HASH_KEY_FILE", "")
		if step.key {
			t.Setenv("FORMSYNC_FIELD_HASH_KEY_FILE", keyFile)
		}
		code, out, errOut := run(t, append([]string{"forget"}, step.args...)...)
		if errOut = logTime.ReplaceAllString(errOut, ""); code != step.code || out != step.stdout || errOut != step.stderr {
			t.Errorf("%s: forget %q: exit %d, want %d\nstdout:\n%s\nwant:\n%s\nstderr:\n%s\nwant:\n%s",
				step.name, step.args, code, step.code, out, step.stdout, errOut, step.stderr)
		}
	}
}
