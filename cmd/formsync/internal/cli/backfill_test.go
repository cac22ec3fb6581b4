package cli

import (
	"errors"
	iofs "io/fs"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/formsync/formsync/internal/apisim"
	"github.com/formsync/formsync/worker"
)

func TestUntilIncludesTheWholeUnitGiven(t *testing.T) {
	parse := func(until bool, s string) time.Time {
		f := timeFlag{until: until}
		if err := f.Set(s); err != nil {
			t.Fatal(err)
		}
		return f.t
	}
	at := func(s string) time.Time { x, _ := time.Parse(time.RFC3339Nano, s); return x }
	for _, tc := range []struct {
		flag      string
		in, after string
	}{
		{"2026-03-31T23:59:59Z", "2026-03-31T23:59:59.999999Z", "2026-04-01T00:00:00Z"},
		// RFC 3339 also allows a lower-case t and z, and a space.
		{"2026-03-31t23:59:59z", "2026-03-31T23:59:59.999999Z", "2026-04-01T00:00:00Z"},
		{"2026-03-31 23:59:59Z", "2026-03-31T23:59:59.999999Z", "2026-04-01T00:00:00Z"},
		{"2026-03-31", "2026-03-31T23:59:59.999999Z", "2026-04-01T00:00:00Z"},
		{"2026-03-31T23:59:59.5Z", "2026-03-31T23:59:59.5Z", "2026-03-31T23:59:59.500001Z"},
		{"2026-04-01T01:59:59+02:00", "2026-03-31T23:59:59.001Z", "2026-04-01T00:00:00Z"},
	} {
		u := parse(true, tc.flag)
		if at(tc.in).After(u) || !at(tc.after).After(u) {
			t.Errorf("--until %s = %s: want %s inside and %s outside", tc.flag, u.Format(time.RFC3339Nano), tc.in, tc.after)
		}
	}
	if s := parse(false, "2026-03-31"); !s.Equal(at("2026-03-31T00:00:00Z")) {
		t.Errorf("--since 2026-03-31 = %s, want midnight", s)
	}
}

func TestBackfillMessages(t *testing.T) {
	sim := apisim.New(apisim.Options{Seed: 4, Variant: apisim.Newer, Forms: []string{"a"}, SubmissionsPerForm: 60})
	syncEnv(t, sim, "a")
	t.Setenv("FORMSYNC_PAGE_SIZE", "25")

	code, _, errOut := run(t, "backfill", "--form", "nosuch")
	if code != exitUsage || !strings.Contains(errOut, "--form nosuch: not in FORMSYNC_FORMS") {
		t.Errorf("unknown form: exit %d:\n%s", code, errOut)
	}
	// A configured form the API no longer has: its 404, in --form's words.
	t.Setenv("FORMSYNC_FORMS", "a,nosuch")
	code, _, errOut = run(t, "backfill", "--form", "nosuch")
	if code != exitFailed || !strings.Contains(errOut, "check the id given to --form") {
		t.Errorf("configured form answering 404: exit %d:\n%s", code, errOut)
	}
	t.Setenv("FORMSYNC_FORMS", "a")
	code, _, errOut = run(t, "backfill", "--form", "..")
	if code != exitUsage || !strings.Contains(errOut, `--form ".." is not a form id`) {
		t.Errorf("--form ..: exit %d:\n%s", code, errOut)
	}

	// A window after every submission: nothing to read.
	code, out, errOut := run(t, "backfill", "--form", "a", "--since", "2100-01-01", "--dry-run")
	if code != 0 || !strings.Contains(out, "no submissions in the window") {
		t.Errorf("empty window: exit %d:\n%s%s", code, out, errOut)
	}
	// The whole form: 60 submissions, counted rather than pages x 25.
	code, out, errOut = run(t, "backfill", "--form", "a", "--dry-run")
	if code != 0 || !strings.Contains(out, "about 60 submissions in about 3 requests,") {
		t.Errorf("whole form: exit %d:\n%s%s", code, out, errOut)
	}
	// A window: the requests that find it are counted, since the backfill
	// makes them again.
	subs := sim.Submissions("a")
	since := subs[10].CreatedAt.UTC().Format(time.RFC3339Nano)
	code, out, errOut = run(t, "backfill", "--form", "a", "--since", since, "--dry-run")
	if code != 0 || !regexp.MustCompile(`in about \d+ requests \(\d+ of them to find the window\)`).MatchString(out) {
		t.Errorf("window: exit %d:\n%s%s", code, out, errOut)
	}
}

// TestBackfillDryRunCreatesNoDatabase: a dry run writes nothing, not even
// the database at a FORMSYNC_SQLITE_PATH no sync has created, which would
// then pass for a healthy empty one (status, forget).
func TestBackfillDryRunCreatesNoDatabase(t *testing.T) {
	sim := apisim.New(apisim.Options{Seed: 4, Variant: apisim.Newer, Forms: []string{"a"}, SubmissionsPerForm: 60})
	db := syncEnv(t, sim, "a")
	code, out, errOut := run(t, "backfill", "--form", "a", "--dry-run")
	if code != 0 || !strings.Contains(out, "about 60 submissions") {
		t.Errorf("dry run: exit %d:\n%s%s", code, out, errOut)
	}
	if _, err := os.Stat(db); !errors.Is(err, iofs.ErrNotExist) {
		t.Errorf("a dry run created the database %s (stat: %v)", db, err)
	}
	if code, _, errOut := run(t, "status"); code != exitFailed {
		t.Errorf("status after a dry run on a missing database: exit %d, want %d:\n%s", code, exitFailed, errOut)
	}
}

// TestProgressLogEveryTenSeconds: without a terminal a backfill logs its
// progress every 10 s, the first time 10 s after it starts reading (a
// rate over the first page says nothing), and no ETA while none is known.
func TestProgressLogEveryTenSeconds(t *testing.T) {
	var logs strings.Builder
	e := &env{stdout: &logs, stderr: &logs, log: newLogger(&logs, Config{})}
	p := newProgressPrinter(e)
	var clock time.Time
	p.now = func() time.Time { return clock }
	start := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	for i, at := range []time.Duration{0, 100 * time.Millisecond, 9 * time.Second, 10 * time.Second, 15 * time.Second, 21 * time.Second} {
		clock = start.Add(at)
		eta := time.Duration(0)
		if i > 2 {
			eta = time.Minute
		}
		p.update(worker.Progress{FormID: "f", Pages: i + 1, PagesTotal: 100, Rows: 100 * (i + 1), Elapsed: at, ETA: eta})
	}
	lines := strings.Split(strings.TrimSpace(logs.String()), "\n")
	if len(lines) != 2 || !strings.Contains(lines[0], `"pages":4`) || !strings.Contains(lines[1], `"pages":6`) {
		t.Fatalf("progress lines %q, want two: at 10 s (page 4) and at 21 s (page 6)", lines)
	}
	if !strings.Contains(lines[0], `"pages_per_second":0.4`) || !strings.Contains(lines[0], `"eta":"1m0s"`) {
		t.Errorf("first line %q: want the rate over 10 s and the ETA", lines[0])
	}
}

// TestLogLinesClearTheProgressBar: on a terminal, a log line (a
// checkpoint's) clears the bar's line before it is written, rather than
// running on after the bar, and the next update draws the bar below it.
func TestLogLinesClearTheProgressBar(t *testing.T) {
	var term strings.Builder
	p := newProgressPrinter(&env{})
	p.tty = &term
	log := newLogger(lineClearer{p}, Config{LogFormat: "text"})
	p.update(worker.Progress{FormID: "f", Pages: 1, PagesTotal: 10, Elapsed: time.Second})
	log.Info("backfill checkpoint", "form", "f")
	p.update(worker.Progress{FormID: "f", Pages: 10, PagesTotal: 10, Elapsed: 2 * time.Second})
	p.done()
	out := term.String()
	bar1 := strings.Index(out, "\rf [")
	clear := strings.Index(out, "\r\033[K")
	line := strings.Index(out, "msg=\"backfill checkpoint\"")
	bar2 := strings.LastIndex(out, "\rf [")
	if bar1 != 0 || clear < bar1 || line < clear || !strings.Contains(out[clear:line], "\r\033[K") || bar2 < line || !strings.HasSuffix(out, "\n") {
		t.Errorf("terminal output %q: want bar, clear, log line, bar, newline", out)
	}
	if strings.Count(out, "\r\033[K") != 1 {
		t.Errorf("terminal output %q: want the line cleared once", out)
	}
}
