package main

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"
)

// The operations that change names. Each is applied to the backing directory at once and
// recorded in the journal, under the journal's lock, so that a cut can undo it until a sync
// commits it (journal.go says which sync commits what).

// named is what a change of names needs of a directory: its relative and absolute path.
func (n *node) named(name string) (rel, abs string, e syscall.Errno) {
	if e := n.live(); e != 0 {
		return "", "", e
	}
	dir, ok := n.rel()
	if !ok {
		return "", "", syscall.ENOENT
	}
	rel = filepath.Join(dir, name)
	return rel, filepath.Join(n.lz.backing, rel), 0
}

// own gives a new name the caller's owner, as a filesystem the caller writes to would.
func own(ctx context.Context, abs string) {
	if caller, ok := fuse.FromContext(ctx); ok && os.Getuid() == 0 {
		_ = unix.Lchown(abs, int(caller.Uid), int(caller.Gid))
	}
}

// made records a new name and returns its inode for the kernel.
func (n *node) made(ctx context.Context, rel, abs string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	own(ctx, abs)
	var st syscall.Stat_t
	if err := syscall.Lstat(abs, &st); err != nil {
		return nil, errno(err)
	}
	n.lz.jn.add(record{kind: created, dirs: [2]uint64{n.bino}, ino: st.Ino, path: rel})
	return n.child(ctx, &st, out), 0
}

func (n *node) Create(ctx context.Context, name string, flags, mode uint32, out *fuse.EntryOut) (*fs.Inode, fs.FileHandle, uint32, syscall.Errno) {
	rel, abs, e := n.named(name)
	if e != 0 {
		return nil, nil, 0, e
	}
	jn := n.lz.jn
	jn.mu.Lock()
	defer jn.mu.Unlock()
	fd, err := unix.Open(abs, backingFlags(flags)|unix.O_CREAT|unix.O_EXCL, mode)
	if err == unix.EEXIST && flags&unix.O_EXCL == 0 {
		// Already there (made behind the kernel's back): opened, not created.
		fd, err = unix.Open(abs, backingFlags(flags), 0)
		if err != nil {
			return nil, nil, 0, errno(err)
		}
		h, e := newHandle(fd)
		if e != 0 {
			return nil, nil, 0, e
		}
		var st syscall.Stat_t
		if err := syscall.Fstat(fd, &st); err != nil {
			return nil, nil, 0, errno(err)
		}
		if flags&unix.O_TRUNC != 0 {
			if e := n.truncate(h, abs, 0); e != 0 {
				return nil, nil, 0, e
			}
		}
		return n.child(ctx, &st, out), h, 0, 0
	}
	if err != nil {
		return nil, nil, 0, errno(err)
	}
	h, e := newHandle(fd)
	if e != 0 {
		return nil, nil, 0, e
	}
	child, e := n.made(ctx, rel, abs, out)
	if e != 0 {
		unix.Close(fd)
		return nil, nil, 0, e
	}
	return child, h, 0, 0
}

func (n *node) Mkdir(ctx context.Context, name string, mode uint32, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	rel, abs, e := n.named(name)
	if e != 0 {
		return nil, e
	}
	n.lz.jn.mu.Lock()
	defer n.lz.jn.mu.Unlock()
	if err := unix.Mkdir(abs, mode); err != nil {
		return nil, errno(err)
	}
	return n.made(ctx, rel, abs, out)
}

func (n *node) Mknod(ctx context.Context, name string, mode, dev uint32, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	rel, abs, e := n.named(name)
	if e != 0 {
		return nil, e
	}
	n.lz.jn.mu.Lock()
	defer n.lz.jn.mu.Unlock()
	if err := unix.Mknod(abs, mode, int(dev)); err != nil {
		return nil, errno(err)
	}
	return n.made(ctx, rel, abs, out)
}

func (n *node) Symlink(ctx context.Context, target, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	rel, abs, e := n.named(name)
	if e != 0 {
		return nil, e
	}
	n.lz.jn.mu.Lock()
	defer n.lz.jn.mu.Unlock()
	if err := unix.Symlink(target, abs); err != nil {
		return nil, errno(err)
	}
	return n.made(ctx, rel, abs, out)
}

func (n *node) Link(ctx context.Context, target fs.InodeEmbedder, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	rel, abs, e := n.named(name)
	if e != 0 {
		return nil, e
	}
	from, ok := target.(*node)
	if !ok {
		return nil, syscall.EXDEV
	}
	old, e := from.abs()
	if e != 0 {
		return nil, e
	}
	n.lz.jn.mu.Lock()
	defer n.lz.jn.mu.Unlock()
	if err := unix.Link(old, abs); err != nil {
		return nil, errno(err)
	}
	var st syscall.Stat_t
	if err := syscall.Lstat(abs, &st); err != nil {
		return nil, errno(err)
	}
	n.lz.jn.add(record{kind: created, dirs: [2]uint64{n.bino}, ino: st.Ino, path: rel})
	return n.child(ctx, &st, out), 0
}

// Unlink moves the name into the trash: a cut brings it back, a commit deletes it.
func (n *node) Unlink(ctx context.Context, name string) syscall.Errno {
	rel, abs, e := n.named(name)
	if e != 0 {
		return e
	}
	jn := n.lz.jn
	jn.mu.Lock()
	defer jn.mu.Unlock()
	var st syscall.Stat_t
	if err := syscall.Lstat(abs, &st); err != nil {
		return errno(err)
	}
	if st.Mode&syscall.S_IFMT == syscall.S_IFDIR {
		return syscall.EISDIR
	}
	trash, err := jn.toTrash(rel)
	if err != nil {
		return errno(err)
	}
	jn.add(record{kind: removed, dirs: [2]uint64{n.bino}, ino: st.Ino, path: rel, trash: trash})
	return 0
}

// Rmdir removes an empty directory; a cut makes it again with its mode and owner.
func (n *node) Rmdir(ctx context.Context, name string) syscall.Errno {
	rel, abs, e := n.named(name)
	if e != 0 {
		return e
	}
	jn := n.lz.jn
	jn.mu.Lock()
	defer jn.mu.Unlock()
	var st syscall.Stat_t
	if err := syscall.Lstat(abs, &st); err != nil {
		return errno(err)
	}
	if err := unix.Rmdir(abs); err != nil {
		return errno(err)
	}
	jn.add(record{kind: removedDir, dirs: [2]uint64{n.bino}, ino: st.Ino, path: rel,
		mode: st.Mode, uid: int(st.Uid), gid: int(st.Gid)})
	return 0
}

func (n *node) Rename(ctx context.Context, name string, newParent fs.InodeEmbedder, newName string, flags uint32) syscall.Errno {
	to, ok := newParent.(*node)
	if !ok {
		return syscall.EXDEV
	}
	from, src, e := n.named(name)
	if e != 0 {
		return e
	}
	dest, dst, e := to.named(newName)
	if e != 0 {
		return e
	}
	jn := n.lz.jn
	jn.mu.Lock()
	defer jn.mu.Unlock()
	var st syscall.Stat_t
	if err := syscall.Lstat(src, &st); err != nil {
		return errno(err)
	}
	r := record{dirs: [2]uint64{n.bino, to.bino}, ino: st.Ino, path: from, path2: dest}
	switch {
	case flags&unix.RENAME_EXCHANGE != 0:
		if err := unix.Renameat2(unix.AT_FDCWD, src, unix.AT_FDCWD, dst, unix.RENAME_EXCHANGE); err != nil {
			return errno(err)
		}
		r.kind = exchanged
	case flags&^unix.RENAME_NOREPLACE != 0:
		return syscall.EINVAL
	default:
		r.kind = renamed
		trash, e := n.replace(src, dst, from, &st, flags)
		if e != 0 || trash == "-" {
			return e
		}
		r.trash = trash
	}
	jn.add(r)
	return 0
}

// replace renames src to dst. What dst named before goes to the trash (its name there is
// returned): dst is swapped with src at once, so dst is never missing, then what src names
// now is moved out. "-" is returned for a rename that changes nothing (two names of one
// file). The caller holds the journal's lock.
func (n *node) replace(src, dst, from string, st *syscall.Stat_t, flags uint32) (string, syscall.Errno) {
	var old syscall.Stat_t
	err := syscall.Lstat(dst, &old)
	if err == syscall.ENOENT || flags&unix.RENAME_NOREPLACE != 0 {
		return "", errno(unix.Renameat2(unix.AT_FDCWD, src, unix.AT_FDCWD, dst, uint(flags)))
	}
	if err != nil {
		return "", errno(err)
	}
	if old.Ino == st.Ino && old.Dev == st.Dev {
		return "-", 0
	}
	srcDir := st.Mode&syscall.S_IFMT == syscall.S_IFDIR
	dstDir := old.Mode&syscall.S_IFMT == syscall.S_IFDIR
	switch {
	case srcDir && !dstDir:
		return "", syscall.ENOTDIR
	case !srcDir && dstDir:
		return "", syscall.EISDIR
	case dstDir:
		if empty, err := emptyDir(dst); err != nil {
			return "", errno(err)
		} else if !empty {
			return "", syscall.ENOTEMPTY
		}
	}
	if err := unix.Renameat2(unix.AT_FDCWD, src, unix.AT_FDCWD, dst, unix.RENAME_EXCHANGE); err != nil {
		return "", errno(err)
	}
	trash, err := n.lz.jn.toTrash(from)
	if err != nil {
		return "", errno(err)
	}
	return trash, 0
}

func emptyDir(p string) (bool, error) {
	f, err := os.Open(p)
	if err != nil {
		return false, err
	}
	defer f.Close()
	names, err := f.Readdirnames(1)
	if len(names) > 0 {
		return false, nil
	}
	if err != nil && err != io.EOF {
		return false, err
	}
	return true, nil
}

func itoa(i int) string { return strconv.Itoa(i) }
