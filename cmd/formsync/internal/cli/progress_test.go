package cli

import (
	"bytes"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/formsync/formsync/internal/apisim"
	"github.com/formsync/formsync/worker"
)

// TestSyncLogsProgressWithoutATerminal: a first sync whose stderr is not a
// terminal (a CronJob's log) says how far it got at a steady interval,
// with the pages it will read in all, rather than nothing until its end.
func TestSyncLogsProgressWithoutATerminal(t *testing.T) {
	sim := apisim.New(apisim.Options{Seed: 3, Variant: apisim.Newer, Forms: []string{"a"}, SubmissionsPerForm: 600})
	syncEnv(t, sim, "a")
	t.Setenv("FORMSYNC_PAGE_SIZE", "20")  // 30 pages
	t.Setenv("FORMSYNC_RATE_LIMIT", "60") // half a second
	cfg, err := LoadConfig()
	if err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	e := &env{stdout: &out, stderr: &errb, cfg: cfg, progressEvery: 100 * time.Millisecond}
	e.log = e.logTo(&errb)
	if code := runSync(t.Context(), e, nil); code != exitOK {
		t.Fatalf("exit %d:\n%s", code, errb.String())
	}
	var lines []string
	for l := range strings.Lines(errb.String()) {
		if strings.Contains(l, `"message":"sync progress"`) {
			lines = append(lines, l)
		}
	}
	if len(lines) < 2 {
		t.Fatalf("%d progress lines, want one every 100 ms of a half-second sync:\n%s", len(lines), errb.String())
	}
	for _, want := range []string{`"form":"a"`, `"pages_total":30`, `"rows":`, `"pages_per_second":`, `"eta":`} {
		if !strings.Contains(lines[0], want) {
			t.Errorf("progress line %s lacks %s", lines[0], want)
		}
	}
}

// TestProgressBarOfSeveralForms: forms read at once share one bar: pages
// and rows added up, the longest time left; a form read since its
// watermark, whose pages are not known in advance, leaves the bar out.
func TestProgressBarOfSeveralForms(t *testing.T) {
	var term strings.Builder
	p := newProgressPrinter(&env{})
	p.what, p.tty, p.width = "sync", &term, func() int { return 160 }
	clock := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	p.now = func() time.Time { clock = clock.Add(time.Second); return clock }
	p.update(worker.Progress{FormID: "a", Pages: 10, PagesTotal: 40, Rows: 1000, Elapsed: 10 * time.Second, ETA: 30 * time.Second})
	p.update(worker.Progress{FormID: "b", Pages: 10, PagesTotal: 20, Rows: 1000, Elapsed: 10 * time.Second, ETA: 10 * time.Second})
	if want := "\r2 forms [==========                    ] 20/60 pages  2000 rows  2.0 pages/s  200 rows/s  ETA 30s"; !strings.HasPrefix(term.String()[strings.LastIndex(term.String(), "\r"):], want) {
		t.Errorf("bar %q, want it to start %q", term.String(), want)
	}
	p.update(worker.Progress{FormID: "c", Pages: 1, Rows: 100, Elapsed: time.Second})
	if want := "\r3 forms 21 pages  2100 rows"; !strings.HasPrefix(term.String()[strings.LastIndex(term.String(), "\r"):], want) {
		t.Errorf("line %q, want it to start %q", term.String(), want)
	}
	p.done()
	p.update(worker.Progress{FormID: "a", Pages: 1, PagesTotal: 40, Rows: 100, Elapsed: 10 * time.Millisecond, ETA: 400 * time.Millisecond})
	if want := "\ra [                              ] 1/40 pages  100 rows  -- pages/s  ETA --"; !strings.HasPrefix(term.String()[strings.LastIndex(term.String(), "\r"):], want) {
		t.Errorf("first page's bar %q, want it to start %q", term.String(), want)
	}
	p.done()
	if !strings.HasSuffix(term.String(), "\n") || p.forms != nil {
		t.Errorf("done: %q, forms %v: want the line ended and the forms forgotten", term.String(), p.forms)
	}
}

func TestHumanDuration(t *testing.T) {
	for d, want := range map[time.Duration]string{
		7899*time.Hour + 11*time.Minute + 2*time.Second: "329d 3h",
		2*time.Hour + 5*time.Minute + 59*time.Second:    "2h 5m",
		8*time.Minute + 20*time.Second:                  "8m 20s",
		1500 * time.Millisecond:                         "2s",
		0:                                               "0s",
	} {
		if got := humanDuration(d); got != want {
			t.Errorf("humanDuration(%s) = %q, want %q", d, got, want)
		}
	}
}

// TestProgressLineFitsTheTerminal: the bar's line never takes the last
// column of the terminal (which would wrap and leave a tail behind at
// each redraw): at 160 columns it is whole, at 80 the form id is cut
// first, then the bar narrows, then the rows a second go; a resize draws
// it again at the new width, clearing what was there.
func TestProgressLineFitsTheTerminal(t *testing.T) {
	long := "customer-satisfaction-survey-2026-q3-north-america-enterprise-accounts-followup"
	pr := worker.Progress{FormID: long, Pages: 312, PagesTotal: 800, Rows: 7800, Elapsed: 62 * time.Second, ETA: 97 * time.Second}
	for _, tc := range []struct {
		width      int
		want, lack []string
	}{
		{200, []string{long + " [===========                   ] 312/800 pages  7800 rows  5.0 pages/s  126 rows/s  ETA 1m 37s"}, nil},
		{160, []string{"[===========                   ]", "126 rows/s"}, []string{long}},
		{80, []string{"customer-satisf… [", "312/800 pages  7800 rows  5.0 pages/s  ETA 1m 37s"}, []string{"rows/s"}},
		{40, []string{"312/800 pages  7800 rows  ETA 1m"}, []string{"["}},
		{10, nil, nil},
	} {
		line := barLine(pr, pr.FormID).fit(tc.width)
		if n := utf8.RuneCountInString(line); n >= tc.width {
			t.Errorf("at %d columns: %d: %q", tc.width, n, line)
		}
		for _, w := range tc.want {
			if !strings.Contains(line, w) {
				t.Errorf("at %d columns: %q lacks %q", tc.width, line, w)
			}
		}
		for _, w := range tc.lack {
			if strings.Contains(line, w) {
				t.Errorf("at %d columns: %q has %q", tc.width, line, w)
			}
		}
	}

	var term strings.Builder
	width := 160
	p := newProgressPrinter(&env{})
	p.what, p.tty, p.width = "sync", &term, func() int { return width }
	p.update(pr)
	width = 80
	p.resized()
	last := term.String()[strings.LastIndex(term.String(), "\r"):]
	if want := "\r" + barLine(pr, long).fit(80) + "\033[K"; last != want {
		t.Errorf("after a resize to 80 columns: %q, want %q", last, want)
	}
	p.done()
	term.Reset()
	p.resized() // no bar on the line: nothing to draw
	if term.Len() != 0 {
		t.Errorf("a resize with no bar drew %q", term.String())
	}
}
