//go:build unix

package cli

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/formsync/formsync/sink"
)

// Spool files (sink.NewSpool: formsync-spool-*.ndjson in FORMSYNC_TMP_DIR)
// are removed by the run that made them, but not when that run was
// SIGKILLed or ran out of memory; in a pod whose container restarts, the
// emptyDir keeps them and fills up. The spool names say nothing of their
// creator, so a run that starts removes only the spools that provably
// belong to processes that are gone:
//
//  1. Every formsync process that stages rows first registers in the tmp
//     dir: a file formsync-live-*.lock that it holds an exclusive flock on
//     for as long as it runs (created under another name, locked, then
//     renamed, so that no one ever sees it unlocked).
//  2. A registration whose lock can be taken belongs to a process that is
//     gone (the kernel drops a process's locks when it dies): it is removed.
//  3. The registration files that remain locked belong to live processes;
//     the oldest of their modification times is before any spool a live
//     process has made (each registered before staging, and file times
//     come from one clock). A spool modified before that, less a minute of
//     slack for clock steps, was made by a process that is gone: removed.
//
// Two processes sharing a tmp dir therefore never remove each other's live
// spools, whatever their order. Where flock is not supported, nothing is
// removed.

const (
	livePattern = "formsync-live-*.lock"
	// clockSlack allows for the wall clock stepping back between a
	// registration and a spool.
	clockSlack = time.Minute
)

// registration is this process's presence in a tmp dir.
type registration struct {
	f    *os.File
	path string
}

// register marks this process as live in dir ("" for the system temp dir).
func register(dir string) (*registration, error) {
	if dir == "" {
		dir = os.TempDir()
	}
	f, err := os.CreateTemp(dir, "formsync-live-*.new")
	if err != nil {
		return nil, fmt.Errorf("registering in %s: %w", dir, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		os.Remove(f.Name())
		return nil, fmt.Errorf("locking %s: %w", f.Name(), err)
	}
	path := strings.TrimSuffix(f.Name(), ".new") + ".lock"
	if err := os.Rename(f.Name(), path); err != nil {
		f.Close()
		os.Remove(f.Name())
		return nil, fmt.Errorf("registering in %s: %w", dir, err)
	}
	return &registration{f: f, path: path}, nil
}

// release ends the registration.
func (r *registration) release() {
	if r == nil {
		return
	}
	os.Remove(r.path) // before the lock goes: no one removes it twice
	r.f.Close()
}

// removeLeftovers removes the spools of processes that are gone from dir,
// as described above; r is this process's registration. It returns what
// it removed.
func removeLeftovers(dir string, r *registration) (files int, bytes int64, err error) {
	if dir == "" {
		dir = os.TempDir()
	}
	lives, err := filepath.Glob(filepath.Join(dir, livePattern))
	if err != nil {
		return 0, 0, err
	}
	// A registration that never got its final name (its process died
	// between creating and renaming it, microseconds apart) is removed once
	// it is old and unlocked.
	if news, err := filepath.Glob(filepath.Join(dir, "formsync-live-*.new")); err == nil {
		for _, p := range news {
			if fi, err := os.Lstat(p); err == nil && time.Since(fi.ModTime()) > clockSlack {
				held(p, r) // removes it if it is unlocked
			}
		}
	}
	var oldest time.Time
	for _, p := range lives {
		alive, mtime, err := held(p, r)
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				continue // released meanwhile
			}
			return 0, 0, err // cannot tell: remove nothing
		}
		if alive && (oldest.IsZero() || mtime.Before(oldest)) {
			oldest = mtime
		}
	}
	if oldest.IsZero() {
		return 0, 0, errors.New("this process's registration is missing")
	}
	cutoff := oldest.Add(-clockSlack)
	spools, err := filepath.Glob(filepath.Join(dir, sink.SpoolPattern))
	if err != nil {
		return 0, 0, err
	}
	var errs []error
	for _, p := range spools {
		fi, err := os.Lstat(p)
		if err != nil || !fi.Mode().IsRegular() || !fi.ModTime().Before(cutoff) {
			continue
		}
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
			continue
		}
		files++
		bytes += fi.Size()
	}
	return files, bytes, errors.Join(errs...)
}

// held reports whether the registration at p belongs to a live process,
// and its modification time; one whose process is gone is removed.
func held(p string, own *registration) (alive bool, mtime time.Time, err error) {
	if own != nil && p == own.path {
		fi, err := own.f.Stat()
		if err != nil {
			return false, time.Time{}, err
		}
		return true, fi.ModTime(), nil
	}
	f, err := os.Open(p)
	if err != nil {
		return false, time.Time{}, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return false, time.Time{}, err
	}
	switch err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); {
	case errors.Is(err, syscall.EWOULDBLOCK):
		return true, fi.ModTime(), nil
	case err != nil:
		return false, time.Time{}, fmt.Errorf("locking %s: %w", p, err)
	}
	// Ours now: its process is gone. Removed while locked, so that no one
	// else reads it as live in between.
	os.Remove(p)
	return false, fi.ModTime(), nil
}
