package uci

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/packet-steering/packet-steering/internal/kfs"
	"github.com/packet-steering/packet-steering/internal/outline"
	"golang.org/x/sys/unix"
)

// newFileMode is the mode of a config file created here; libuci creates
// files with 0600 too (UCI_FILEMODE). An existing file keeps its mode.
const newFileMode = 0o600

// Load reads confDir/name (for example Load("/etc/config", "network")) while
// holding a shared flock on it, as libuci's readers do, so that it never sees
// a commit half done. It fails with an error wrapping fs.ErrNotExist when the
// file is absent, ErrInvalid for an invalid name, a *LimitError when the file
// is beyond MaxFileSize or MaxSections or is not a regular file (its size is
// checked before it is read), and a *ParseError (File is the path) when the
// file does not parse.
func Load(confDir, name string) (*Package, error) {
	if !ValidPackageName(name) {
		return nil, outline.Errorf("uci: load %q: config name: %w", name, ErrInvalid)
	}
	path := outline.JoinPath(confDir, name)
	f, err := openLocked(path, unix.LOCK_SH, false)
	if err != nil {
		return nil, outline.Errorf("uci: load %s: %w", name, err)
	}
	defer f.Close()
	p, err := Parse(path, f)
	if err != nil {
		return nil, err
	}
	p.Name = name
	return p, nil
}

// Commit writes p to confDir/p.Name the way libuci's uci_file_commit does:
// it opens (creating if absent) the config file and takes an exclusive flock
// on it, writes the new content (see Export) to a temp file ".NAME.uci-*" in
// the same directory, fsyncs it, gives it the old file's mode, renames it
// over the config file (over the target when the config file is a symlink)
// and fsyncs the directory. Readers therefore see the old or the new file,
// never a mix.
//
// Unlike libuci it re-reads the existing file under the lock first and
// refuses, with an error wrapping that file's *ParseError, to overwrite a
// file that does not parse: it may hold the user's work, and nothing here can
// tell what it meant. When the file already holds exactly the new content,
// nothing is written. Commit replaces the whole file with p: to change a file
// that others may change at the same time, use Update, which reads and writes
// under one lock. Errors (a read-only or full directory, an invalid p) leave
// the file as it was.
func Commit(confDir string, p *Package) error {
	if p == nil || !ValidPackageName(p.Name) {
		name := ""
		if p != nil {
			name = p.Name
		}
		return outline.Errorf("uci: commit %q: config name: %w", name, ErrInvalid)
	}
	var buf bytes.Buffer
	if err := p.Export(&buf); err != nil {
		return outline.Errorf("uci: commit %s: %w", p.Name, err)
	}
	path := outline.JoinPath(confDir, p.Name)
	f, err := openLocked(path, unix.LOCK_EX, true)
	if err != nil {
		return outline.Errorf("uci: commit %s: %w", p.Name, notOverwritten(err))
	}
	defer f.Close()
	old, err := readAll(f)
	if err != nil {
		return outline.Errorf("uci: commit %s: %w", p.Name, err)
	}
	if _, err := Parse(path, bytes.NewReader(old)); err != nil {
		return outline.Errorf("uci: commit %s: existing file is not overwritten: %w", p.Name, err)
	}
	if bytes.Equal(old, buf.Bytes()) {
		return nil
	}
	if err := replace(path, f, buf.Bytes()); err != nil {
		return outline.Errorf("uci: commit %s: %w", p.Name, err)
	}
	return nil
}

// Update reads confDir/name, calls fn with it and writes the result, all
// under one exclusive flock on the file, so that concurrent Updates from any
// number of goroutines and processes (and libuci commits, which take the same
// lock) apply one after the other: none is lost, none is torn. An absent file
// is created and fn sees an empty package. When fn returns an error nothing
// is written and Update returns it wrapped; when fn changes nothing, nothing
// is written. A file that does not parse is never overwritten: Update returns
// an error wrapping its *ParseError without calling fn. Writing is as in
// Commit. fn must not keep p after it returns, and must not Load, Commit or
// Update the same config (it would wait for the lock Update holds).
func Update(confDir, name string, fn func(p *Package) error) error {
	if !ValidPackageName(name) {
		return outline.Errorf("uci: update %q: config name: %w", name, ErrInvalid)
	}
	path := outline.JoinPath(confDir, name)
	f, err := openLocked(path, unix.LOCK_EX, true)
	if err != nil {
		return outline.Errorf("uci: update %s: %w", name, notOverwritten(err))
	}
	defer f.Close()
	old, err := readAll(f)
	if err != nil {
		return outline.Errorf("uci: update %s: %w", name, err)
	}
	p, err := Parse(path, bytes.NewReader(old))
	if err != nil {
		return outline.Errorf("uci: update %s: existing file is not overwritten: %w", name, err)
	}
	p.Name = name
	if err := fn(p); err != nil {
		return outline.Errorf("uci: update %s: %w", name, err)
	}
	p.Name = name
	var buf bytes.Buffer
	if err := p.Export(&buf); err != nil {
		return outline.Errorf("uci: update %s: %w", name, err)
	}
	// A file created empty by openLocked and left without sections by fn
	// exports as "\n"; keep such a file empty rather than write a newline.
	if bytes.Equal(old, buf.Bytes()) || (len(old) == 0 && len(p.Sections) == 0) {
		return nil
	}
	if err := replace(path, f, buf.Bytes()); err != nil {
		return outline.Errorf("uci: update %s: %w", name, err)
	}
	return nil
}

// lockPatience bounds how long openLocked keeps reopening a file that other
// writers replace while it waits for the lock. Each reopen means another
// writer finished, so under any sane load this is never reached.
const lockPatience = time.Minute

// openLocked opens path and flocks it (how: LOCK_SH or LOCK_EX). A writer
// replaces the file by rename, so a lock granted on the old inode guards
// nothing; openLocked then reopens until the locked file is the one at path.
func openLocked(path string, how int, create bool) (*os.File, error) {
	flags := os.O_RDONLY
	if create {
		flags = os.O_RDWR | os.O_CREATE
	}
	start := time.Now()
	for tries := 1; ; tries++ {
		if tries > 1 && time.Since(start) > lockPatience {
			return nil, outline.Errorf("lock %s: file replaced %d times while waiting", path, tries-1)
		}
		// O_NONBLOCK: opening a FIFO put in place of the file must not wait
		// for a writer (checkHeld then refuses it); regular files ignore it.
		f, err := os.OpenFile(path, flags|unix.O_CLOEXEC|unix.O_NONBLOCK, newFileMode)
		if err != nil {
			return nil, err
		}
		if err := flock(f, how); err != nil {
			f.Close()
			return nil, outline.Errorf("flock %s: %w", path, err)
		}
		// A stock uci that has written its new file and released the lock
		// but not yet renamed it into place: wait for the rename and build
		// on the file it puts there. Checked before the file's identity: a
		// rename done after this check shows as a replaced file below.
		if how == unix.LOCK_EX && stockCommitPending(path) {
			f.Close()
			time.Sleep(time.Millisecond)
			continue
		}
		var held, now unix.Stat_t
		if err := unix.Fstat(int(f.Fd()), &held); err != nil {
			f.Close()
			return nil, outline.Errorf("stat %s: %w", path, err)
		}
		err = unix.Stat(path, &now)
		if err == nil && held.Dev == now.Dev && held.Ino == now.Ino {
			if err := checkHeld(path, &held); err != nil {
				f.Close()
				return nil, err
			}
			return f, nil
		}
		f.Close()
		if err != nil && !errors.Is(err, unix.ENOENT) {
			return nil, outline.Errorf("stat %s: %w", path, err)
		}
	}
}

// stockCommitAge is how long a libuci temp file (.NAME.uci-XXXXXX next to
// the config) counts as a commit in progress; an older one was left by a
// writer that died before its rename and is ignored.
const stockCommitAge = 2 * time.Second

// stockCommitPending reports whether a libuci commit of path is between
// releasing its lock and renaming its temp file over path. libuci's
// uci_file_commit (file.c) writes and fsyncs the temp file while holding
// the exclusive flock on the config file, then closes the config file
// (which releases the lock) and only then renames the temp file into
// place: a writer that takes the lock in that window and reads the config
// file reads the content the rename is about to replace. Seen while this
// package holds the exclusive lock, such a temp file can only be that
// (this package renames its own before it unlocks) or a dead writer's.
func stockCommitPending(path string) bool {
	dir, name := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	d, err := kfs.Open(dir)
	if err != nil {
		return false
	}
	defer d.Close()
	// The names are listed with kfs, not filepath.Glob: Glob and its
	// pattern matcher cost the router binary about 20 KB for one prefix.
	prefix := "." + name + ".uci-"
	var r kfs.Reader
	pending := false
	_ = r.Names(d, func(n []byte) {
		if pending || !bytes.HasPrefix(n, []byte(prefix)) {
			return
		}
		fi, err := os.Lstat(outline.JoinPath(dir, string(n)))
		if err == nil && fi.Mode().IsRegular() && time.Since(fi.ModTime()) < stockCommitAge {
			pending = true
		}
	}, ".")
	return pending
}

// notOverwritten says, for a writer, that a file refused by a limit is left
// as it is.
func notOverwritten(err error) error {
	var le *LimitError
	if errors.As(err, &le) || errors.Is(err, unix.EISDIR) {
		return outline.Errorf("existing file is not overwritten: %w", err)
	}
	return err
}

// checkHeld refuses, before anything is read, a config file that is not a
// regular file or is larger than MaxFileSize.
func checkHeld(path string, st *unix.Stat_t) error {
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return &LimitError{File: path, Msg: "not a regular file"}
	}
	if st.Size > MaxFileSize {
		return sizeLimitError(path, st.Size)
	}
	return nil
}

func flock(f *os.File, how int) error {
	for {
		err := unix.Flock(int(f.Fd()), how)
		if !errors.Is(err, unix.EINTR) {
			return err
		}
	}
}

func readAll(f *os.File) ([]byte, error) {
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return nil, outline.Errorf("seek %s: %w", f.Name(), err)
	}
	data, err := io.ReadAll(io.LimitReader(f, MaxFileSize+1))
	if err != nil {
		return nil, outline.Errorf("read %s: %w", f.Name(), err)
	}
	return data, nil
}

// inPlaceMax bounds rewriteReplaced: content of at most one page is
// copied into the page cache by one write that a signal cannot split, so
// a process killed during it leaves the old or the new content, never a mix.
const inPlaceMax = 4096

// rewriteReplaced writes data into the file the config was before the
// rename (locked, still open and locked; no longer reachable by its path).
// A stock uci that opened the config before the rename and waits for the
// lock reads the file it opened once it gets the lock (libuci does not
// check that it is still the file at the path), so without this it would
// build its commit on the old content and undo this one. Larger content
// is left as libuci leaves it (README, "Reliability": what remains).
//
// Content shorter than the old file is padded with newlines (blank lines
// mean nothing to UCI) to the old length, so that the one write replaces
// every old byte; the padding is truncated afterwards.
func rewriteReplaced(locked *os.File, data []byte, oldSize int64) {
	n := max(int64(len(data)), oldSize)
	if n > inPlaceMax {
		return
	}
	buf := make([]byte, n)
	copy(buf, data)
	for i := len(data); i < len(buf); i++ {
		buf[i] = '\n'
	}
	if w, err := locked.WriteAt(buf, 0); err == nil && w == len(buf) {
		_ = locked.Truncate(int64(len(data)))
	}
}

// replace writes data to a temp file next to path's target, fsyncs it, gives
// it the mode of locked (the open config file) and renames it over the
// target, then fsyncs the directory. On error the temp file is removed and
// the config file is left as it was.
func replace(path string, locked *os.File, data []byte) (err error) {
	target, err := filepath.EvalSymlinks(path)
	if err != nil {
		return outline.Errorf("resolve %s: %w", path, err)
	}
	st, err := locked.Stat()
	if err != nil {
		return outline.Errorf("stat %s: %w", path, err)
	}
	dir := filepath.Dir(target)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(target)+".uci-")
	if err != nil {
		return outline.Errorf("create temp file: %w", err)
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	if _, err = tmp.Write(data); err != nil {
		return outline.Errorf("write %s: %w", tmp.Name(), err)
	}
	if err = tmp.Sync(); err != nil {
		return outline.Errorf("fsync %s: %w", tmp.Name(), err)
	}
	if err = tmp.Chmod(st.Mode().Perm()); err != nil {
		return outline.Errorf("chmod %s: %w", tmp.Name(), err)
	}
	if err = tmp.Close(); err != nil {
		return outline.Errorf("close %s: %w", tmp.Name(), err)
	}
	if err = os.Rename(tmp.Name(), target); err != nil {
		return outline.Errorf("rename %s: %w", tmp.Name(), err)
	}
	rewriteReplaced(locked, data, st.Size())
	// The new file is in place. Syncing the directory makes the rename
	// durable; it is best effort (some file systems refuse it) and must not
	// turn a done commit into a reported failure.
	if d, derr := os.Open(dir); derr == nil {
		_ = d.Sync()
		d.Close()
	}
	return nil
}
