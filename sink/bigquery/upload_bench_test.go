package bigquery

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/formsync/formsync/sink"
)

// fakeProcess builds cmd/bqfake and serves the fake from it, in a process
// of its own, so that the benchmark's CPU is the sink's alone; it returns
// the fake's URL. The process ends with the benchmark.
func fakeProcess(b *testing.B) string {
	b.Helper()
	bin := filepath.Join(b.TempDir(), "bqfake")
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/formsync/formsync/cmd/bqfake").CombinedOutput(); err != nil {
		b.Fatalf("building cmd/bqfake: %v\n%s", err, out)
	}
	cmd := exec.Command(bin, "-addr", "127.0.0.1:0")
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		cmd.Wait()
	})
	line, err := bufio.NewReader(stdout).ReadString('\n')
	url, _, _ := strings.Cut(strings.TrimPrefix(line, "BigQuery fake listening on "), " ")
	if err != nil || !strings.HasPrefix(url, "http://127.0.0.1:") {
		b.Fatalf("cmd/bqfake printed %q (%v), want its loopback URL", line, err)
	}
	go io.Copy(io.Discard, stdout)
	return url
}

// processCPU is the CPU time this process has used, user and system.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// uploadRow is a submission shaped like the simulator's newer response
// form: seven short fields, an attachment on every fourth, its raw JSON
// kept.
func uploadRow(b *testing.B, form string, id int64, at time.Time) sink.Row {
	fields := fmt.Sprintf(`{"company":"Stark & Sons","email":"user.%d@corp.example","name":"Zoë Hopper","phone":"+1 555 398 %04d","plan":"enterprise","signup_ref":"FS-%d","utm_source":"newsletter"}`, id, id%10000, id)
	files := `[]`
	if id%4 == 0 {
		files = fmt.Sprintf(`[{"name":"attachment-%d-1.jpg","size":4870028,"type":"image/jpeg","url":"https://files.example.com/%s/%d/attachment-%d-1.jpg"}]`, id, form, id, id)
	}
	r, err := sink.NewRow(form, &id, at, false, json.RawMessage(fields), json.RawMessage(files))
	if err != nil {
		b.Fatal(err)
	}
	r.Raw = fmt.Sprintf(`{"id":%d,"form_id":%q,"created_at":%q,"is_spam":false,"fields":%s,"files":%s}`, id, form, at.Format(time.RFC3339Nano), fields, files)
	return r
}

// BenchmarkCommitUploadSide measures the BigQuery sink's own CPU per row
// of a commit of new rows: reading the spool, numbering its lines, the
// resumable upload, and the jobs' requests and polls. The fake serving
// them runs in a child process, so its time (the load, the MERGE on
// SQLite) is not in the figure; staging the spool is done before the
// measurement. Each op commits n rows the table does not hold yet.
//
//	go test ./sink/bigquery -run '^$' -bench CommitUploadSide -benchtime 3x
func BenchmarkCommitUploadSide(b *testing.B) {
	for _, n := range []int{10_000, 100_000} {
		b.Run(fmt.Sprintf("rows=%d", n), func(b *testing.B) {
			ctx := context.Background()
			s, err := Open(ctx, Config{
				Project: "bench-project", Dataset: "formsync_bench", Endpoint: fakeProcess(b),
				PollInterval: 5 * time.Millisecond, RetryInitial: time.Millisecond, MaxRetries: 3,
			})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
			var cpu, wall time.Duration
			var bytes int64
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				sp, err := sink.NewSpool(b.TempDir())
				if err != nil {
					b.Fatal(err)
				}
				rows := make([]sink.Row, 0, n)
				for k := range n {
					id := int64(i*n + k + 1)
					r := uploadRow(b, "f", id, t0.Add(time.Duration(id)*time.Second))
					rows = append(rows, r)
					if err := sp.Append(r); err != nil {
						b.Fatal(err)
					}
				}
				if err := sp.Finish(); err != nil {
					b.Fatal(err)
				}
				bytes += sp.Size()
				prev, err := s.ReadState(ctx, []string{"f"})
				if err != nil {
					b.Fatal(err)
				}
				st := formState("f", rows)
				st.Revision = prev["f"].Revision
				rows = nil
				runtime.GC()
				b.StartTimer()
				start, before := time.Now(), processCPU(b)
				res, err := s.Commit(ctx, &sink.Commit{SyncedAt: t0.Add(time.Duration(i) * time.Hour), Forms: []sink.FormCommit{{State: st, Rows: sp}}})
				cpu += processCPU(b) - before
				wall += time.Since(start)
				b.StopTimer()
				sp.Remove()
				if err != nil {
					b.Fatal(err)
				}
				if got := res["f"].Inserted; got != int64(n) {
					b.Fatalf("inserted %d rows, want %d", got, n)
				}
			}
			rowsTotal := float64(n * b.N)
			b.ReportMetric(float64(cpu.Nanoseconds())/rowsTotal, "sink-cpu-ns/row")
			b.ReportMetric(float64(wall.Nanoseconds())/rowsTotal, "wall-ns/row")
			b.ReportMetric(float64(bytes)/rowsTotal, "spool-bytes/row")
			b.ReportMetric(0, "ns/op")
		})
	}
}
