// Command lazyfs mounts a directory over another as a machine's disk behind its page cache:
// reads and writes pass through, but written data the application has not synced stays in
// this program's memory, so that a "power cut" drops exactly what a machine that loses
// power would lose. The mount point may be the backing directory itself.
//
//	lazyfs --backing DIR --mount DIR [--writeback never|kernel] [--metadata posix|ordered]
//	       [--max-dirty-bytes N] [--status FILE] [--trash DIR]
//
// # Data
//
// A write goes into an overlay of 4 KiB pages per file (a partial page is first filled from
// the backing file, as the kernel's page cache does); reads see the overlay. A file's data
// reaches the backing directory, and so survives a cut, when the application syncs it:
// fsync or fdatasync of the file (msync(MS_SYNC) of a mapping reaches the filesystem as an
// fsync), every write of a file opened O_SYNC or O_DSYNC (the kernel follows each with an
// fsync, which writes the whole file's dirty data), or SIGUSR2 (a sync of everything). A
// truncation (ftruncate, truncate, O_TRUNC) is held in the overlay too, and is durable with
// the file's next sync. A sync writes the pages to the backing file and syncs that, so it
// costs what it costs on the disk.
//
// What the filesystem cannot see: sync_file_range(2) never reaches a FUSE filesystem, so
// data synced only with it counts as unsynced and is lost on a cut; sync(2) and syncfs(2)
// are not passed on by the kernel either (use SIGUSR2). O_DIRECT writes are held like any
// other, although a disk without a volatile cache would have them. Writes through a shared
// mapping (mmap) reach the filesystem only when the kernel writes the pages back — on msync,
// fsync, the close of a descriptor of the file, or its own writeback timer — and are then
// held like any write; what the kernel has not written back is in its page cache, which a
// cut drops as well.
//
// Two models of what happens to dirty data without a sync, by --writeback:
//
//   - never (the default): nothing is written back until synced — the worst case.
//   - kernel: data dirty for --dirty-expire (30 s, Linux's dirty_expire_centisecs) is written
//     back, checked every 5 s (dirty_writeback_centisecs), and metadata changes older than
//     --commit-interval (5 s, ext4's journal commit) are committed — what a real machine
//     would have written by itself.
//
// # Metadata
//
// Creations (files, directories, nodes, links, symlinks), unlinks, rmdirs and renames are
// applied to the backing directory at once and kept in an ordered journal; an unlinked or
// replaced file waits in a trash directory beside the backing one (--trash; it must be on
// the same filesystem). A cut undoes every change not committed, newest first. Which sync
// commits what, by --metadata:
//
//   - posix (the default): fsync of a directory commits the changes of its entries; a file's
//     fsync does not make its name durable.
//   - ordered: a file's fsync also commits the changes that named it (its creation, its
//     renames), as ext4 and XFS do.
//
// In both, a commit also commits every change before it in the journal, as a journaling
// filesystem writes its log in order. Mode, owner and times (chmod, chown, utimes) are
// passed through and durable at once.
//
// # Control
//
// SIGUSR1 is the cut: every operation fails from that instant, the overlay is dropped, the
// journal undone, the mount lazily detached and the program exits. SIGTERM (or SIGINT)
// unmounts without writing anything more: unsynced data is dropped, the metadata changes
// stand. SIGUSR2 syncs everything. A guard process, started first, detaches the mount
// lazily if the program dies otherwise (SIGKILL), so no dead mount stays behind.
//
// The overlay holds at most --max-dirty-bytes (512 MiB); past it, the files dirty longest
// are written through, and the status counts it (the loss measured is then a lower bound).
// --status FILE gets the state and counters as JSON once a second and at exit.
package main

import (
	"errors"
	"flag"
	"fmt"
	"log"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"
)

type options struct {
	backing, mount, trash, status string
	writeback, metadata           string
	maxDirty                      int64
	expire, commit                time.Duration
	debug                         bool
}

func parse(args []string) (options, error) {
	var o options
	set := flag.NewFlagSet("lazyfs", flag.ContinueOnError)
	set.StringVar(&o.backing, "backing", "", "the directory that holds the durable data")
	set.StringVar(&o.mount, "mount", "", "where to mount the lazy view of it")
	set.StringVar(&o.trash, "trash", "", "where unlinked files wait (default: .<backing>.lazyfs-trash beside it)")
	set.StringVar(&o.status, "status", "", "a JSON file of the state and counters")
	set.StringVar(&o.writeback, "writeback", "never", "never (nothing written back until synced) or kernel")
	set.StringVar(&o.metadata, "metadata", "posix", "posix (a directory's fsync commits its entries) or ordered")
	set.Int64Var(&o.maxDirty, "max-dirty-bytes", 512<<20, "bytes held before writing through")
	set.DurationVar(&o.expire, "dirty-expire", 30*time.Second, "kernel model: age at which dirty data is written back")
	set.DurationVar(&o.commit, "commit-interval", 5*time.Second, "kernel model: age at which metadata changes commit")
	set.BoolVar(&o.debug, "debug", false, "log every FUSE request")
	if err := set.Parse(args); err != nil {
		return o, err
	}
	if o.backing == "" || o.mount == "" {
		return o, errors.New("--backing and --mount are required")
	}
	if o.writeback != "never" && o.writeback != "kernel" {
		return o, fmt.Errorf("--writeback %q: never or kernel", o.writeback)
	}
	if o.metadata != "posix" && o.metadata != "ordered" {
		return o, fmt.Errorf("--metadata %q: posix or ordered", o.metadata)
	}
	if o.maxDirty <= 0 {
		return o, errors.New("--max-dirty-bytes must be positive")
	}
	var err error
	if o.backing, err = filepath.Abs(o.backing); err != nil {
		return o, err
	}
	if o.mount, err = filepath.Abs(o.mount); err != nil {
		return o, err
	}
	if o.trash == "" {
		o.trash = filepath.Join(filepath.Dir(o.backing), "."+filepath.Base(o.backing)+".lazyfs-trash")
	}
	return o, nil
}

func main() {
	log.SetFlags(log.LstdFlags | log.Lmicroseconds)
	if len(os.Args) == 3 && os.Args[1] == "guard" {
		guard(os.Args[2])
		return
	}
	o, err := parse(os.Args[1:])
	if err != nil {
		fmt.Fprintln(os.Stderr, "lazyfs:", err)
		os.Exit(2)
	}
	if err := run(o); err != nil {
		fmt.Fprintln(os.Stderr, "lazyfs:", err)
		os.Exit(1)
	}
}

func run(o options) error {
	var st unix.Stat_t
	if err := unix.Stat(o.backing, &st); err != nil {
		return err
	}
	// The backing directory is reached through a descriptor opened before the mount, so
	// that it may be the mount point itself: a data directory mounted over in place.
	dirfd, err := unix.Open(o.backing, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	root := fmt.Sprintf("/proc/self/fd/%d", dirfd)
	jn, err := newJournal(root, o.trash)
	if err != nil {
		return err
	}
	guardian, err := startGuard(o.mount)
	if err != nil {
		return err
	}
	lz := &lazyFS{backing: root, dev: st.Dev, ov: newOverlay(o.maxDirty), jn: jn,
		ordered: o.metadata == "ordered"}
	server, err := mount(o, lz, st.Ino)
	if err != nil {
		guardian.done()
		return err
	}
	guardian.mounted()
	rep := &reporter{path: o.status, o: o, lz: lz, state: "mounted"}
	rep.write()
	log.Printf("lazyfs: %s mounted over %s (writeback %s, metadata %s)", o.mount, o.backing, o.writeback, o.metadata)
	serve(o, lz, server, rep, guardian)
	return nil
}

func mount(o options, lz *lazyFS, rootIno uint64) (*fuse.Server, error) {
	second := time.Second
	root := &node{lz: lz, bino: rootIno}
	opts := &fs.Options{
		EntryTimeout: &second,
		AttrTimeout:  &second,
		MountOptions: fuse.MountOptions{
			AllowOther: os.Getuid() == 0,
			Options:    []string{"default_permissions"},
			FsName:     o.backing,
			Name:       "lazyfs",
			MaxWrite:   1 << 20,
			// No xattrs (the kernel stops asking at once), and no passthrough: every read
			// and write must reach the overlay.
			DisableXAttrs:        true,
			DisabledCapabilities: fuse.CAP_PASSTHROUGH,
			Debug:                o.debug,
		},
	}
	server, err := fs.Mount(o.mount, root, opts)
	if err != nil {
		return nil, err
	}
	if err := server.WaitMount(); err != nil {
		return nil, err
	}
	return server, nil
}

// serve waits for signals and runs the kernel model's clock until the mount ends.
func serve(o options, lz *lazyFS, server *fuse.Server, rep *reporter, g *guardian) {
	signals := make(chan os.Signal, 4)
	signal.Notify(signals, syscall.SIGUSR1, syscall.SIGUSR2, syscall.SIGTERM, syscall.SIGINT)
	ended := make(chan struct{})
	go func() { server.Wait(); close(ended) }()
	ticker := time.NewTicker(time.Second)
	defer ticker.Stop()
	ticks := 0
	for {
		select {
		case sig := <-signals:
			switch sig {
			case syscall.SIGUSR1:
				cut(o, lz, rep, g)
				return
			case syscall.SIGUSR2:
				syncAll(lz)
				rep.write()
			default:
				unmount(o, lz, rep, g)
				return
			}
		case <-ended:
			// Unmounted from outside (fusermount -u): as SIGTERM.
			unmount(o, lz, rep, g)
			return
		case <-ticker.C:
			ticks++
			if o.writeback == "kernel" {
				lz.jn.commitOlder(o.commit)
				if ticks%5 == 0 {
					lz.ov.expire(o.expire, false)
				}
			}
			rep.write()
		}
	}
}

// syncAll makes everything durable: every file's data, every metadata change.
func syncAll(lz *lazyFS) {
	if e := lz.ov.expire(0, true); e != 0 {
		log.Printf("lazyfs: sync: %v", e)
	}
	lz.jn.commitThrough(func(*record) bool { return true })
}

// cut is the power cut: from this instant every operation fails, the unsynced data is
// dropped, the metadata changes not committed are undone, and the mount is detached.
func cut(o options, lz *lazyFS, rep *reporter, g *guardian) {
	lz.ov.cut.Store(true) // the instant: no operation starts after it
	// A change of names under way finishes first (it may need a file's state), then a sync
	// under way; both locks are kept: nothing changes after the cut.
	lz.jn.mu.Lock()
	bytes, files := lz.ov.drop()
	undone := lz.jn.undo()
	rep.cut(bytes, files, undone)
	log.Printf("lazyfs: power cut: %d bytes of %d files dropped, %d metadata changes undone", bytes, files, undone)
	detach(o.mount)
	// Empty unless a change could not be undone: then what it held stays for a look.
	if err := os.Remove(o.trash); err != nil {
		log.Printf("lazyfs: %v", err)
	}
	g.done()
	rep.write()
	os.Exit(0)
}

// unmount ends the mount without writing anything more: unsynced data is dropped, the
// metadata changes stand. The mount is detached lazily: files still open keep it until this
// program exits, an instant later.
func unmount(o options, lz *lazyFS, rep *reporter, g *guardian) {
	lz.ov.cut.Store(true)
	bytes, files := lz.ov.held()
	detach(o.mount)
	lz.jn.close()
	g.done()
	rep.unmounted(bytes, files)
	rep.write()
	log.Printf("lazyfs: unmounted %s (%d unsynced bytes of %d files dropped)", o.mount, bytes, files)
}
