package dbt

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	iofs "io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// Result is what Write did, each list of slash-separated paths relative
// to the project's directory, sorted.
type Result struct {
	// Written are the files created or replaced.
	Written []string
	// Unchanged are the generated files already as they should be.
	Unchanged []string
	// Kept are files in the way that do not carry the marker: the user's,
	// left as they are.
	Kept []string
	// Removed are generated files the project no longer holds: staging
	// models of forms no longer in it, files of another adapter.
	Removed []string
}

// Write puts files (from Project.Files) under dir, creating it. A file
// already there is replaced only when its first line carries the marker;
// a generated file that files no longer hold (a staging model, ModelDir
// and ModelPrefix, or another adapter's file) is removed, again only when
// it carries the marker. With dryRun it
// changes nothing and says what it would do.
func Write(dir string, files map[string][]byte, dryRun bool) (Result, error) {
	var res Result
	paths := make([]string, 0, len(files))
	for p := range files {
		paths = append(paths, p)
	}
	slices.Sort(paths)
	for _, p := range paths {
		target := filepath.Join(dir, filepath.FromSlash(p))
		old, err := os.ReadFile(target)
		switch {
		case errors.Is(err, iofs.ErrNotExist):
		case err != nil:
			return res, fmt.Errorf("reading %s: %w", target, err)
		case bytes.Equal(old, files[p]):
			res.Unchanged = append(res.Unchanged, p)
			continue
		case !generated(old):
			res.Kept = append(res.Kept, p)
			continue
		}
		res.Written = append(res.Written, p)
		if dryRun {
			continue
		}
		if err := writeAtomic(target, files[p]); err != nil {
			return res, err
		}
	}
	stale, err := staleFiles(dir, files)
	if err != nil {
		return res, err
	}
	for _, p := range stale {
		res.Removed = append(res.Removed, p)
		if dryRun {
			continue
		}
		if err := os.Remove(filepath.Join(dir, filepath.FromSlash(p))); err != nil && !errors.Is(err, iofs.ErrNotExist) {
			return res, fmt.Errorf("removing %s: %w", p, err)
		}
	}
	return res, nil
}

// removable are the places of generated files that a project may stop
// holding: a form's staging model, and the files of one adapter when the
// sink changed to the other.
var removable = []struct {
	dir   string
	match func(name string) bool
}{
	{ModelDir, func(n string) bool { return strings.HasPrefix(n, ModelPrefix) && strings.HasSuffix(n, ".sql") }},
	{SchemaDir, func(n string) bool { return n == ".gitignore" }},
	{TestDir, func(string) bool { return true }},
}

// staleFiles are the generated files in dir, in the places of removable,
// that files does not hold: those of forms no longer in the project, or of
// another adapter.
func staleFiles(dir string, files map[string][]byte) ([]string, error) {
	var out []string
	for _, r := range removable {
		entries, err := os.ReadDir(filepath.Join(dir, filepath.FromSlash(r.dir)))
		if errors.Is(err, iofs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("listing %s: %w", r.dir, err)
		}
		for _, e := range entries {
			p := r.dir + "/" + e.Name()
			if !e.Type().IsRegular() || !r.match(e.Name()) {
				continue
			}
			if _, ok := files[p]; ok {
				continue
			}
			b, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(p)))
			if err != nil {
				return nil, fmt.Errorf("reading %s: %w", p, err)
			}
			if generated(b) {
				out = append(out, p)
			}
		}
	}
	slices.Sort(out)
	return out, nil
}

// generated reports whether content's first line is the marker, as an SQL
// or a YAML comment.
func generated(content []byte) bool {
	line, _, _ := bytes.Cut(content, []byte("\n"))
	line = bytes.TrimSpace(bytes.TrimSuffix(line, []byte("\r")))
	for _, prefix := range []string{"--", "#"} {
		if rest, ok := bytes.CutPrefix(line, []byte(prefix)); ok && string(bytes.TrimSpace(rest)) == Marker {
			return true
		}
	}
	return false
}

// writeAtomic replaces path with content through a temporary file in the
// same directory, so that a reader (or dbt) sees the old file or the new,
// never half of one.
func writeAtomic(path string, content []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("creating %s: %w", filepath.Dir(path), err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-")
	if err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	defer os.Remove(tmp.Name()) // after the rename, a no-op
	w := bufio.NewWriter(tmp)
	_, err = w.Write(content)
	if err == nil {
		err = w.Flush()
	}
	if err == nil {
		err = tmp.Chmod(0o644)
	}
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}
