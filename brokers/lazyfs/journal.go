package main

import (
	"fmt"
	"log"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// change is the kind of a metadata change the journal holds until it is durable.
type change int

const (
	created    change = iota // a name made: file, directory, node, symlink or hard link
	removed                  // a name unlinked: what it named waits in the trash
	removedDir               // an empty directory removed: made again on undo
	renamed                  // path to path2; what path2 named before waits in the trash
	exchanged                // path and path2 swapped
)

// record is one metadata change, applied to the backing directory at once and undone by a
// cut unless committed first. Paths are relative to the backing root.
type record struct {
	kind        change
	at          time.Time
	dirs        [2]uint64 // backing inodes of the directories whose entries changed
	ino         uint64    // backing inode the change named
	path, path2 string
	trash       string // the name under the trash directory, when the change removed one
	mode        uint32 // a removed directory's mode and owner
	uid, gid    int
}

// journal is the ordered list of metadata changes not durable yet. A commit makes durable a
// prefix of it — everything up to the last change that concerns what is synced — as a
// journaling filesystem writes its log in order; a cut undoes the rest, newest first.
//
// mu is held across each change's backing operation and its record, so the list's order is
// the order the backing directory saw.
type journal struct {
	mu        sync.Mutex
	root      string
	trash     string
	records   []record
	serial    uint64
	committed atomic.Int64
	pending   atomic.Int64
}

func newJournal(root, trash string) (*journal, error) {
	if err := os.RemoveAll(trash); err != nil {
		return nil, err
	}
	if err := os.Mkdir(trash, 0o700); err != nil {
		return nil, err
	}
	var a, b unix.Stat_t
	if err := unix.Stat(root, &a); err != nil {
		return nil, err
	}
	if err := unix.Stat(trash, &b); err != nil {
		return nil, err
	}
	if a.Dev != b.Dev {
		return nil, fmt.Errorf("the trash directory %s is not on the backing directory's filesystem: give --trash a directory beside it", trash)
	}
	return &journal{root: root, trash: trash}, nil
}

func (j *journal) abs(rel string) string { return filepath.Join(j.root, rel) }

// add appends a change; the caller holds mu.
func (j *journal) add(r record) {
	r.at = time.Now()
	j.records = append(j.records, r)
	j.pending.Store(int64(len(j.records)))
}

// toTrash moves what rel names into the trash and returns its name there; the caller holds
// mu.
func (j *journal) toTrash(rel string) (string, error) {
	j.serial++
	name := fmt.Sprintf("%d", j.serial)
	return name, os.Rename(j.abs(rel), filepath.Join(j.trash, name))
}

// commitThrough makes durable every change up to the last one for which concerns is true.
func (j *journal) commitThrough(concerns func(*record) bool) {
	j.mu.Lock()
	defer j.mu.Unlock()
	last := -1
	for i := range j.records {
		if concerns(&j.records[i]) {
			last = i
		}
	}
	j.commit(last + 1)
}

// commitOlder makes durable every change at least age old (the kernel model's journal
// commit).
func (j *journal) commitOlder(age time.Duration) {
	j.mu.Lock()
	defer j.mu.Unlock()
	n := 0
	for n < len(j.records) && time.Since(j.records[n].at) >= age {
		n++
	}
	j.commit(n)
}

// commit makes the first n changes durable: what they removed leaves the trash. The caller
// holds mu.
func (j *journal) commit(n int) {
	if n == 0 {
		return
	}
	for _, r := range j.records[:n] {
		if r.trash != "" {
			if err := os.RemoveAll(filepath.Join(j.trash, r.trash)); err != nil {
				log.Printf("lazyfs: commit: %v", err)
			}
		}
	}
	j.records = append([]record(nil), j.records[n:]...)
	j.committed.Add(int64(n))
	j.pending.Store(int64(len(j.records)))
}

// undo reverts every change not committed, newest first, and returns how many it reverted.
// The caller holds mu (and keeps it: nothing changes after a cut).
func (j *journal) undo() int {
	for i := len(j.records) - 1; i >= 0; i-- {
		if err := j.revert(&j.records[i]); err != nil {
			log.Printf("lazyfs: cut: cannot undo a change of %s: %v", j.records[i].path, err)
		}
	}
	n := len(j.records)
	j.records = nil
	j.pending.Store(0)
	return n
}

func (j *journal) revert(r *record) error {
	switch r.kind {
	case created:
		return os.Remove(j.abs(r.path))
	case removed:
		return os.Rename(filepath.Join(j.trash, r.trash), j.abs(r.path))
	case removedDir:
		if err := os.Mkdir(j.abs(r.path), os.FileMode(r.mode&0o777)); err != nil {
			return err
		}
		if err := os.Chmod(j.abs(r.path), fileMode(r.mode)); err != nil {
			return err
		}
		return os.Lchown(j.abs(r.path), r.uid, r.gid)
	case renamed:
		if err := os.Rename(j.abs(r.path2), j.abs(r.path)); err != nil {
			return err
		}
		if r.trash != "" {
			return os.Rename(filepath.Join(j.trash, r.trash), j.abs(r.path2))
		}
	case exchanged:
		return unix.Renameat2(unix.AT_FDCWD, j.abs(r.path), unix.AT_FDCWD, j.abs(r.path2), unix.RENAME_EXCHANGE)
	}
	return nil
}

// fileMode turns a stat mode's permission, setuid, setgid and sticky bits into Go's.
func fileMode(mode uint32) os.FileMode {
	m := os.FileMode(mode & 0o777)
	if mode&unix.S_ISUID != 0 {
		m |= os.ModeSetuid
	}
	if mode&unix.S_ISGID != 0 {
		m |= os.ModeSetgid
	}
	if mode&unix.S_ISVTX != 0 {
		m |= os.ModeSticky
	}
	return m
}

// close ends the journal at an unmount: every change stands, the trash goes.
func (j *journal) close() {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.commit(len(j.records))
	if err := os.RemoveAll(j.trash); err != nil {
		log.Printf("lazyfs: %v", err)
	}
}
