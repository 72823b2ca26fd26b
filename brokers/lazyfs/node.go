package main

import (
	"context"
	"os"
	"path/filepath"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"
)

// lazyFS is the filesystem: the backing directory, the data overlay and the metadata
// journal.
type lazyFS struct {
	backing string
	dev     uint64
	ov      *overlay
	jn      *journal
	ordered bool // a file's sync also commits the metadata changes that concern it
}

// node is a file, directory or other name of the mount; the backing path is found from its
// place in the tree.
type node struct {
	fs.Inode
	lz   *lazyFS
	bino uint64 // the backing inode
}

// handle is an open file: a descriptor of the backing file, read-write when the file was
// opened for writing (the overlay reads the rest of a page it writes). O_SYNC and O_DSYNC
// need nothing here: the kernel follows each write of such a file with an fsync (an
// fdatasync for O_DSYNC).
type handle struct {
	fd  int
	ino uint64
}

var (
	_ fs.NodeLookuper   = (*node)(nil)
	_ fs.NodeGetattrer  = (*node)(nil)
	_ fs.NodeSetattrer  = (*node)(nil)
	_ fs.NodeOpener     = (*node)(nil)
	_ fs.NodeCreater    = (*node)(nil)
	_ fs.NodeReader     = (*node)(nil)
	_ fs.NodeWriter     = (*node)(nil)
	_ fs.NodeFsyncer    = (*node)(nil)
	_ fs.NodeReleaser   = (*node)(nil)
	_ fs.NodeAllocater  = (*node)(nil)
	_ fs.NodeReaddirer  = (*node)(nil)
	_ fs.NodeMkdirer    = (*node)(nil)
	_ fs.NodeMknoder    = (*node)(nil)
	_ fs.NodeSymlinker  = (*node)(nil)
	_ fs.NodeLinker     = (*node)(nil)
	_ fs.NodeReadlinker = (*node)(nil)
	_ fs.NodeUnlinker   = (*node)(nil)
	_ fs.NodeRmdirer    = (*node)(nil)
	_ fs.NodeRenamer    = (*node)(nil)
	_ fs.NodeStatfser   = (*node)(nil)
)

// rel is the node's path relative to the backing root; false for a node no name reaches
// any more (unlinked while open).
func (n *node) rel() (string, bool) {
	var names []string
	root := n.Root()
	for p := &n.Inode; p != root; {
		name, parent := p.Parent()
		if parent == nil {
			return "", false
		}
		names = append(names, name)
		p = parent
	}
	for i, k := 0, len(names)-1; i < k; i, k = i+1, k-1 {
		names[i], names[k] = names[k], names[i]
	}
	return filepath.Join(names...), true
}

func (n *node) abs() (string, syscall.Errno) {
	rel, ok := n.rel()
	if !ok {
		return "", syscall.ENOENT
	}
	if rel == "" {
		// The root: through the descriptor's link, to the directory (an lstat of the link
		// itself would describe the link).
		return n.lz.backing + "/.", 0
	}
	return filepath.Join(n.lz.backing, rel), 0
}

// live is EIO once the power is cut: nothing reaches the backing directory after it.
func (n *node) live() syscall.Errno {
	if n.lz.ov.cut.Load() {
		return syscall.EIO
	}
	return 0
}

func (n *node) child(ctx context.Context, st *syscall.Stat_t, out *fuse.EntryOut) *fs.Inode {
	swapped := func(d uint64) uint64 { return d<<32 | d>>32 }
	id := fs.StableAttr{Mode: st.Mode, Ino: st.Ino ^ swapped(st.Dev) ^ swapped(n.lz.dev), Gen: 1}
	out.Attr.FromStat(st)
	n.lz.sized(st, &out.Attr)
	return n.NewInode(ctx, &node{lz: n.lz, bino: st.Ino}, id)
}

// sized gives attributes of a regular file the size its readers see, which the overlay
// knows when it holds the file.
func (lz *lazyFS) sized(st *syscall.Stat_t, out *fuse.Attr) syscall.Errno {
	if st.Mode&syscall.S_IFMT != syscall.S_IFREG {
		return 0
	}
	held, e := lz.ov.find(st.Ino)
	if held != nil {
		out.Size = uint64(held.size)
		out.Blocks = (out.Size + 511) / 512
		held.mu.Unlock()
	}
	return e
}

func (n *node) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	dir, e := n.abs()
	if e != 0 {
		return nil, e
	}
	var st syscall.Stat_t
	if err := syscall.Lstat(filepath.Join(dir, name), &st); err != nil {
		return nil, errno(err)
	}
	return n.child(ctx, &st, out), 0
}

func (n *node) Getattr(ctx context.Context, f fs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	if e := n.live(); e != 0 {
		return e
	}
	var st syscall.Stat_t
	if h, ok := f.(*handle); ok && h != nil {
		if err := syscall.Fstat(h.fd, &st); err != nil {
			return errno(err)
		}
	} else {
		p, e := n.abs()
		if e != 0 {
			return e
		}
		if err := syscall.Lstat(p, &st); err != nil {
			return errno(err)
		}
	}
	out.FromStat(&st)
	return n.lz.sized(&st, &out.Attr)
}

func (n *node) Setattr(ctx context.Context, f fs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	if e := n.live(); e != 0 {
		return e
	}
	p, e := n.abs()
	h, _ := f.(*handle)
	if h == nil && e != 0 {
		return e
	}
	if mode, ok := in.GetMode(); ok {
		if err := chmod(h, p, mode); err != nil {
			return errno(err)
		}
	}
	uid, uok := in.GetUID()
	gid, gok := in.GetGID()
	if uok || gok {
		u, g := -1, -1
		if uok {
			u = int(uid)
		}
		if gok {
			g = int(gid)
		}
		if err := chown(h, p, u, g); err != nil {
			return errno(err)
		}
	}
	if size, ok := in.GetSize(); ok {
		if e := n.truncate(h, p, int64(size)); e != 0 {
			return e
		}
	}
	if e := setTimes(h, p, in); e != 0 {
		return e
	}
	return n.Getattr(ctx, f, out)
}

// truncate sets a file's size in the overlay: durable once the file is synced.
func (n *node) truncate(h *handle, p string, size int64) syscall.Errno {
	ino := n.bino
	open := func() (int, error) { return unix.Open(p, unix.O_RDWR|unix.O_CLOEXEC, 0) }
	if h != nil {
		ino = h.ino
		open = func() (int, error) { return unix.Dup(h.fd) }
	}
	st, e := n.lz.ov.hold(ino, open)
	if e != 0 {
		return e
	}
	n.lz.ov.account(st, -st.truncate(size))
	st.mu.Unlock()
	return 0
}

// backingFlags is how the backing file is opened for flags: read-write when written (the
// overlay reads the rest of the pages it writes), and without what the overlay does itself
// (append, truncate, sync) or cannot serve (direct I/O of unaligned pages).
func backingFlags(flags uint32) int {
	f := int(flags) &^ (unix.O_APPEND | unix.O_TRUNC | unix.O_DIRECT | unix.O_SYNC | unix.O_DSYNC |
		unix.O_CREAT | unix.O_EXCL | fuse.FMODE_EXEC)
	if f&unix.O_ACCMODE == unix.O_WRONLY {
		f = f&^unix.O_ACCMODE | unix.O_RDWR
	}
	return f | unix.O_CLOEXEC
}

func newHandle(fd int) (*handle, syscall.Errno) {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return nil, errno(err)
	}
	return &handle{fd: fd, ino: st.Ino}, 0
}

func (n *node) Open(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	if e := n.live(); e != 0 {
		return nil, 0, e
	}
	p, e := n.abs()
	if e != 0 {
		return nil, 0, e
	}
	fd, err := unix.Open(p, backingFlags(flags), 0)
	if err != nil {
		return nil, 0, errno(err)
	}
	h, e := newHandle(fd)
	if e != 0 {
		return nil, 0, e
	}
	if flags&unix.O_TRUNC != 0 && flags&unix.O_ACCMODE != unix.O_RDONLY {
		if e := n.truncate(h, p, 0); e != 0 {
			unix.Close(fd)
			return nil, 0, e
		}
	}
	return h, 0, 0
}

func (n *node) Read(ctx context.Context, f fs.FileHandle, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	h := f.(*handle)
	held, e := n.lz.ov.find(h.ino)
	if e != 0 {
		return nil, e
	}
	if held != nil {
		got, e := held.read(dest, off)
		held.mu.Unlock()
		return fuse.ReadResultData(dest[:got]), e
	}
	got := 0
	for got < len(dest) {
		r, err := unix.Pread(h.fd, dest[got:], off+int64(got))
		if err != nil {
			return nil, errno(err)
		}
		if r == 0 {
			break
		}
		got += r
	}
	return fuse.ReadResultData(dest[:got]), 0
}

func (n *node) Write(ctx context.Context, f fs.FileHandle, data []byte, off int64) (uint32, syscall.Errno) {
	h := f.(*handle)
	ov := n.lz.ov
	held, e := ov.hold(h.ino, func() (int, error) { return unix.Dup(h.fd) })
	if e != 0 {
		return 0, e
	}
	added, e := held.write(data, off)
	ov.account(held, added)
	held.mu.Unlock()
	ov.bound()
	if e != 0 {
		return 0, e
	}
	return uint32(len(data)), 0
}

// Fsync of a file makes its data and size durable (and, in the ordered metadata model, the
// metadata changes that name it); of a directory, the changes of its entries and every
// change before them.
func (n *node) Fsync(ctx context.Context, f fs.FileHandle, flags uint32) syscall.Errno {
	if e := n.live(); e != 0 {
		return e
	}
	if n.IsDir() {
		return n.syncDir()
	}
	h, _ := f.(*handle)
	ino := n.bino
	if h != nil {
		ino = h.ino
	}
	datasync := flags&1 != 0
	held, e := n.lz.ov.find(ino)
	if e != 0 {
		return e
	}
	if held != nil {
		e = n.lz.ov.sync(held, datasync)
		held.mu.Unlock()
	} else if h != nil {
		// Nothing held: the backing file is synced all the same, so a sync costs what it
		// costs on the disk.
		if datasync {
			e = errno(unix.Fdatasync(h.fd))
		} else {
			e = errno(unix.Fsync(h.fd))
		}
	}
	if e == 0 && n.lz.ordered {
		n.lz.jn.commitThrough(func(r *record) bool { return r.ino == ino })
	}
	return e
}

func (n *node) syncDir() syscall.Errno {
	p, e := n.abs()
	if e != 0 {
		return e
	}
	fd, err := unix.Open(p, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return errno(err)
	}
	err = unix.Fsync(fd)
	unix.Close(fd)
	if err != nil {
		return errno(err)
	}
	dir := n.bino
	n.lz.jn.commitThrough(func(r *record) bool { return r.dirs[0] == dir || r.dirs[1] == dir })
	return 0
}

func (n *node) Release(ctx context.Context, f fs.FileHandle) syscall.Errno {
	if h, ok := f.(*handle); ok {
		unix.Close(h.fd)
	}
	return 0
}

// Allocate extends the size (mode 0), does nothing within it (keep size) or writes zeros
// (punch hole); the rest is not supported.
func (n *node) Allocate(ctx context.Context, f fs.FileHandle, off, size uint64, mode uint32) syscall.Errno {
	h := f.(*handle)
	ov := n.lz.ov
	held, e := ov.hold(h.ino, func() (int, error) { return unix.Dup(h.fd) })
	if e != 0 {
		return e
	}
	defer ov.bound()
	defer held.mu.Unlock()
	end := int64(off + size)
	switch mode {
	case 0:
		if end > held.size {
			ov.account(held, -held.truncate(end))
		}
	case unix.FALLOC_FL_KEEP_SIZE:
	case unix.FALLOC_FL_KEEP_SIZE | unix.FALLOC_FL_PUNCH_HOLE:
		if start := int64(off); start < held.size {
			added, e := held.write(make([]byte, min(end, held.size)-start), start)
			ov.account(held, added)
			return e
		}
	default:
		return syscall.EOPNOTSUPP
	}
	return 0
}

func (n *node) Readdir(ctx context.Context) (fs.DirStream, syscall.Errno) {
	p, e := n.abs()
	if e != 0 {
		return nil, e
	}
	return fs.NewLoopbackDirStream(p)
}

func (n *node) Readlink(ctx context.Context) ([]byte, syscall.Errno) {
	p, e := n.abs()
	if e != 0 {
		return nil, e
	}
	target, err := os.Readlink(p)
	if err != nil {
		return nil, errno(err)
	}
	return []byte(target), 0
}

func (n *node) Statfs(ctx context.Context, out *fuse.StatfsOut) syscall.Errno {
	var st syscall.Statfs_t
	if err := syscall.Statfs(n.lz.backing, &st); err != nil {
		return errno(err)
	}
	out.FromStatfsT(&st)
	return 0
}

func chmod(h *handle, p string, mode uint32) error {
	if h != nil {
		return unix.Fchmod(h.fd, mode)
	}
	return unix.Fchmodat(unix.AT_FDCWD, p, mode, 0)
}

func chown(h *handle, p string, uid, gid int) error {
	if h != nil {
		return unix.Fchown(h.fd, uid, gid)
	}
	return unix.Fchownat(unix.AT_FDCWD, p, uid, gid, unix.AT_SYMLINK_NOFOLLOW)
}

func setTimes(h *handle, p string, in *fuse.SetAttrIn) syscall.Errno {
	mtime, mok := in.GetMTime()
	atime, aok := in.GetATime()
	if !mok && !aok {
		return 0
	}
	ts := []unix.Timespec{{Nsec: unix.UTIME_OMIT}, {Nsec: unix.UTIME_OMIT}}
	if aok {
		ts[0] = unix.NsecToTimespec(atime.UnixNano())
	}
	if mok {
		ts[1] = unix.NsecToTimespec(mtime.UnixNano())
	}
	if h != nil {
		return errno(unix.UtimesNanoAt(unix.AT_FDCWD, "/proc/self/fd/"+itoa(h.fd), ts, 0))
	}
	return errno(unix.UtimesNanoAt(unix.AT_FDCWD, p, ts, unix.AT_SYMLINK_NOFOLLOW))
}
