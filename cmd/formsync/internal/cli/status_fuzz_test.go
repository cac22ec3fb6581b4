package cli

import (
	"bytes"
	"database/sql"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/formsync/formsync/sink"
	"github.com/formsync/formsync/sink/sqlite"
	"github.com/formsync/formsync/state"
)

// The times a sync_state column can hold: RFC 3339 text, years 1 to 9999.
var (
	firstStorable = time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC).Unix()
	lastStorable  = time.Date(9999, 12, 31, 23, 59, 59, 0, time.UTC).Unix()
)

// storable maps any int64 onto a second of years 1 to 9999 (a second
// already there onto itself), so that the fuzzer's values are times the
// store can hold.
func storable(v int64) time.Time {
	if v < firstStorable || v > lastStorable {
		span := lastStorable - firstStorable + 1
		v = firstStorable + ((v%span)+span)%span
	}
	return time.Unix(v, 0).UTC()
}

// FuzzStatusSurvivesAnySyncState writes random values into the SQLite
// sync_state table (watermarks of year 1 to 9999, in the past or the
// future, NULL; negative counts; any text) and runs status, as text and
// as JSON: it never crashes, and a lag beyond what a time.Duration holds
// (292 years) is shown as it is: the true figure in JSON, years in text,
// a future watermark as ahead. forget and remove --dry-run, which only
// read the store too, survive it as well. Its seeds run as a unit test.
func FuzzStatusSurvivesAnySyncState(f *testing.F) {
	now := time.Now().Unix()
	year := int64(365 * 24 * 3600)
	for _, seed := range []struct {
		wm, success, rows, id int64
		nulls                 uint8
		lastError, order      string
	}{
		{wm: firstStorable, success: now, rows: 3, id: 1, lastError: "", order: "newest_first"},                // year 0001: 2000 years behind
		{wm: time.Date(1700, 6, 1, 0, 0, 0, 0, time.UTC).Unix(), success: now, rows: 1, order: "oldest_first"}, // 1700
		{wm: lastStorable, success: firstStorable, rows: -5, id: -1, lastError: "boom"},                        // year 9999: ahead
		{wm: now + 3*24*3600, success: now, rows: 1, lastError: "clock ahead"},                                 // a few days ahead
		{wm: now - 300*year, success: now, rows: math.MaxInt64, id: math.MinInt64},                             // just beyond a Duration
		{wm: now - 292*year, success: now, rows: math.MinInt64, id: math.MaxInt64},                             // just within one
		{wm: now - 10, success: now, nulls: 0xff, lastError: strings.Repeat("é", 300), order: "sideways"},      // NULL everywhere
		{wm: 0, success: -1, rows: 0, nulls: 0b10, lastError: "\x00\n\t"},                                      // 1970
	} {
		f.Add(seed.wm, seed.success, seed.rows, seed.id, seed.nulls, seed.lastError, seed.order)
	}
	for _, n := range append(envNames(), "JOB_COMPLETION_INDEX") {
		f.Setenv(n, "")
		os.Unsetenv(n)
	}
	dbPath := filepath.Join(f.TempDir(), "state.db")
	s, err := sqlite.Open(f.Context(), dbPath)
	if err != nil {
		f.Fatal(err)
	}
	s.Close()
	f.Setenv("FORMSYNC_SQLITE_PATH", dbPath)
	db, err := sql.Open("sqlite", dbPath)
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { db.Close() })

	f.Fuzz(func(t *testing.T, wm, success, rows, id int64, nulls uint8, lastError, order string) {
		at := func(v int64, bit uint8) any {
			if nulls&bit != 0 {
				return nil
			}
			return storable(v).Format(sink.TimeLayout)
		}
		wmAt := at(wm, 1)
		backfill, _ := json.Marshal(map[string]any{"Since": storable(success), "Until": storable(wm), "Cursor": storable(wm + success), "StartedAt": storable(id)})
		if nulls&16 != 0 {
			backfill = nil
		}
		if _, err := db.Exec(`DELETE FROM sync_state`); err != nil {
			t.Fatal(err)
		}
		_, err := db.Exec(`INSERT INTO sync_state (form_id, wm_created_at, wm_id, sort_order, row_count, deleted_count,
			last_total, last_success_at, last_error_at, last_error, last_reconcile_at, backfill, updated_at)
			VALUES ('f', ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			wmAt, id, order, rows, -rows, id, at(success, 2), at(wm-success, 4), lastError, at(success+id, 8),
			nullIfEmpty(backfill), storable(rows).Format(sink.TimeLayout))
		if err != nil {
			t.Fatal(err)
		}

		code, out, errOut := run(t, "status")
		if code != exitOK && code != exitFailed {
			t.Fatalf("status: exit %d\n%s%s", code, out, errOut)
		}
		// The other commands that only read the store survive it too.
		for _, args := range [][]string{{"forget", "--form", "f", "--key", "1", "--dry-run"}, {"remove", "--form", "f", "--rows", "--dry-run"}} {
			// Exit 2 refuses a form that holds nothing (rows 0 and not
			// configured): a refusal, not a crash.
			if code, out, errOut := run(t, args...); code != exitOK && code != exitFailed && (code != exitUsage || !strings.Contains(errOut, "no such form")) {
				t.Fatalf("%v: exit %d\n%s%s", args, code, out, errOut)
			}
		}
		code, js, errOut := run(t, "status", "--json")
		if code != exitOK {
			// A value status cannot read is an error that says so.
			if code != exitFailed || !strings.Contains(errOut, "formsync status:") {
				t.Fatalf("status --json: exit %d\n%s", code, errOut)
			}
			return
		}
		var got []formStatus
		if err := json.Unmarshal([]byte(js), &got); err != nil || len(got) != 1 {
			t.Fatalf("status --json: %v\n%s", err, js)
		}
		st := got[0]
		// 0001-01-01T00:00:00Z is the zero time, which the state reads as
		// no watermark.
		if wmAt == nil || storable(wm).IsZero() {
			if st.LagSeconds != nil || st.AheadSeconds != nil || !strings.Contains(out, "\nf ") {
				t.Errorf("no watermark, yet a lag: %+v\n%s", st, out)
			}
			return
		}
		// Status reads the clock after this test did: the figure is the
		// true one within the time between the two readings.
		want := secondsBetween(storable(wm), time.Now())
		switch {
		case st.LagSeconds != nil && st.AheadSeconds == nil:
			if *st.LagSeconds < 0 || math.Abs(*st.LagSeconds-want) > 60 {
				t.Errorf("lag_seconds %v, want about %v", *st.LagSeconds, want)
			}
		case st.AheadSeconds != nil && st.LagSeconds == nil:
			if *st.AheadSeconds <= 0 || math.Abs(-*st.AheadSeconds-want) > 60 || !strings.Contains(out, " ahead") {
				t.Errorf("ahead_seconds %v, want about %v; text:\n%s", *st.AheadSeconds, -want, out)
			}
		default:
			t.Errorf("a watermark needs a lag or an ahead, not %v and %v", st.LagSeconds, st.AheadSeconds)
		}
		if !strings.Contains(out, "LAG is the age of the newest submission loaded") {
			t.Errorf("no word on what LAG is:\n%s", out)
		}
		if lag := fmtLagOf(st); !bytes.Contains([]byte(out), []byte(lag)) || strings.HasPrefix(lag, "-") {
			t.Errorf("LAG %q, text:\n%s", lag, out)
		}
	})
}

func nullIfEmpty(b []byte) any {
	if b == nil {
		return nil
	}
	return string(b)
}

// TestLagBeyondADuration: a watermark of year 1 is 2025 years
// behind, said in years, and one in the future is ahead, not negative.
func TestLagBeyondADuration(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 29, 0, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		wm        time.Time
		text      string
		lag, ahed float64
	}{
		{wm: time.Date(1, 1, 2, 0, 0, 0, 0, time.UTC), text: "2025y ", lag: 63931420800},
		{wm: time.Date(1700, 1, 1, 0, 0, 0, 0, time.UTC), text: "326y 329d", lag: 10316246400},
		{wm: now.Add(-36 * time.Hour), text: "1d 12h", lag: 36 * 3600},
		{wm: now.Add(50 * time.Hour), text: "2d 2h ahead", ahed: 50 * 3600},
		{wm: time.Date(9999, 12, 31, 0, 0, 0, 0, time.UTC), text: "7972y 337d ahead", ahed: 251606304000},
	} {
		st := statusOf(stateWithWatermark(tc.wm), now)
		if got := fmtLagOf(st); !strings.HasPrefix(got, tc.text) {
			t.Errorf("%s: LAG %q, want it to start %q", tc.wm, got, tc.text)
		}
		if tc.lag > 0 && (st.LagSeconds == nil || *st.LagSeconds != tc.lag || st.AheadSeconds != nil) {
			t.Errorf("%s: lag %v ahead %v, want lag %v", tc.wm, st.LagSeconds, st.AheadSeconds, tc.lag)
		}
		if tc.ahed > 0 && (st.AheadSeconds == nil || *st.AheadSeconds != tc.ahed || st.LagSeconds != nil) {
			t.Errorf("%s: lag %v ahead %v, want ahead %v", tc.wm, st.LagSeconds, st.AheadSeconds, tc.ahed)
		}
	}
	for _, d := range []time.Duration{math.MinInt64, math.MaxInt64, -time.Hour} {
		if got := humanDuration(d); got == "" {
			t.Errorf("humanDuration(%d) is empty", d)
		}
	}
}

func stateWithWatermark(at time.Time) state.Form {
	return state.Form{FormID: "f", Watermark: state.Watermark{CreatedAt: at, ID: 1}}
}
