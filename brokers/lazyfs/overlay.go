package main

import (
	"sort"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// pageSize is the overlay's unit, as a page of the kernel's page cache: a write into a page
// the overlay does not hold yet first reads the rest of that page from the backing file.
const pageSize = 4096

// fileState is what the overlay holds of one backing file (one inode): the dirty pages, the
// size the file has for its readers, and how much of the backing file still shows.
//
// Invariants: floor <= size; bytes of a page at or past size are zero; the backing file's
// bytes at or past floor are hidden (a truncation not yet synced) and read as zeros.
type fileState struct {
	mu      sync.Mutex
	ino     uint64
	fd      int // the overlay's own descriptor of the backing file, read-write
	pages   map[int64][]byte
	size    int64     // the size readers see
	floor   int64     // backing bytes from here on are hidden by a pending truncation
	durable int64     // the backing file's size
	since   time.Time // when the file became dirty (the kernel model's expiry clock)
	dead    bool      // dropped from the overlay: look the file up again
}

func (s *fileState) dirty() bool {
	return len(s.pages) > 0 || s.floor < s.durable || s.size != s.durable
}

// overlay holds every dirty file, keyed by backing inode, and the counters the status
// reports. Lock order: a fileState's mu may be held while taking overlay.mu, never the
// other way round.
type overlay struct {
	mu       sync.Mutex
	files    map[uint64]*fileState
	maxDirty int64
	cut      atomic.Bool

	dirtyBytes     atomic.Int64 // pages held, in bytes
	syncedBytes    atomic.Int64 // written to the backing files by a sync
	writebackBytes atomic.Int64 // written by the kernel model's expiry
	throughBytes   atomic.Int64 // written because the overlay was full
	throughTimes   atomic.Int64 // how many times that happened
}

func newOverlay(maxDirty int64) *overlay {
	return &overlay{files: map[uint64]*fileState{}, maxDirty: maxDirty}
}

// find returns the locked state of ino, or nil when the overlay holds nothing of it (EIO
// once the power is cut).
func (o *overlay) find(ino uint64) (*fileState, syscall.Errno) {
	for {
		if o.cut.Load() {
			return nil, syscall.EIO
		}
		o.mu.Lock()
		st := o.files[ino]
		o.mu.Unlock()
		if st == nil {
			return nil, 0
		}
		st.mu.Lock()
		if !st.dead {
			return st, 0
		}
		st.mu.Unlock()
	}
}

// hold returns the locked state of ino, creating it with a descriptor from open (which the
// state then owns) when the overlay holds nothing of the file yet.
func (o *overlay) hold(ino uint64, open func() (int, error)) (*fileState, syscall.Errno) {
	for {
		if o.cut.Load() {
			return nil, syscall.EIO
		}
		o.mu.Lock()
		st := o.files[ino]
		if st == nil {
			fd, err := open()
			if err != nil {
				o.mu.Unlock()
				return nil, errno(err)
			}
			var stat unix.Stat_t
			if err := unix.Fstat(fd, &stat); err != nil {
				unix.Close(fd)
				o.mu.Unlock()
				return nil, errno(err)
			}
			st = &fileState{ino: ino, fd: fd, pages: map[int64][]byte{},
				size: stat.Size, floor: stat.Size, durable: stat.Size}
			o.files[ino] = st
		}
		o.mu.Unlock()
		st.mu.Lock()
		if !st.dead {
			return st, 0
		}
		st.mu.Unlock()
	}
}

// backing reads what the durable file shows at off into buf: its bytes below floor, zeros
// past them.
func (s *fileState) backing(buf []byte, off int64) syscall.Errno {
	n := int64(0)
	if off < s.floor {
		n = min(int64(len(buf)), s.floor-off)
		for done := int64(0); done < n; {
			got, err := unix.Pread(s.fd, buf[done:n], off+done)
			if err != nil {
				return errno(err)
			}
			if got == 0 {
				break
			}
			done += int64(got)
		}
	}
	clear(buf[n:])
	return 0
}

// read copies the file's content at off into dest and returns how many bytes it holds.
func (s *fileState) read(dest []byte, off int64) (int, syscall.Errno) {
	if off >= s.size {
		return 0, 0
	}
	end := min(s.size, off+int64(len(dest)))
	for pos := off; pos < end; {
		index, in := pos/pageSize, pos%pageSize
		n := min(pageSize-in, end-pos)
		out := dest[pos-off : pos-off+n]
		if page := s.pages[index]; page != nil {
			copy(out, page[in:in+n])
		} else if e := s.backing(out, pos); e != 0 {
			return 0, e
		}
		pos += n
	}
	return int(end - off), 0
}

// write puts data at off into the overlay and returns the bytes of new pages it took.
func (s *fileState) write(data []byte, off int64) (int64, syscall.Errno) {
	added := int64(0)
	end := off + int64(len(data))
	for pos := off; pos < end; {
		index, in := pos/pageSize, pos%pageSize
		n := min(pageSize-in, end-pos)
		page := s.pages[index]
		if page == nil {
			page = make([]byte, pageSize)
			if n < pageSize {
				if e := s.backing(page, index*pageSize); e != 0 {
					return added, e
				}
			}
			s.pages[index] = page
			added += pageSize
		}
		copy(page[in:in+n], data[pos-off:pos-off+n])
		pos += n
	}
	s.size = max(s.size, end)
	return added, 0
}

// truncate sets the file's size and returns the bytes of pages it let go.
func (s *fileState) truncate(size int64) int64 {
	freed := int64(0)
	if size < s.size {
		for index, page := range s.pages {
			start := index * pageSize
			if start >= size {
				delete(s.pages, index)
				freed += pageSize
			} else if size < start+pageSize {
				clear(page[size-start:])
			}
		}
		s.floor = min(s.floor, size)
	}
	s.size = size
	return freed
}

// flush writes the file's dirty pages and pending size change to the backing file, then
// syncs it when sync is set (fdatasync when datasync is), and returns the bytes written.
func (s *fileState) flush(sync, datasync bool) (int64, syscall.Errno) {
	if s.floor < s.durable {
		if err := unix.Ftruncate(s.fd, s.floor); err != nil {
			return 0, errno(err)
		}
		s.durable = s.floor
	}
	indexes := make([]int64, 0, len(s.pages))
	for index := range s.pages {
		indexes = append(indexes, index)
	}
	sort.Slice(indexes, func(i, j int) bool { return indexes[i] < indexes[j] })
	written := int64(0)
	for _, index := range indexes {
		start := index * pageSize
		page := s.pages[index][:min(pageSize, s.size-start)]
		for done := 0; done < len(page); {
			n, err := unix.Pwrite(s.fd, page[done:], start+int64(done))
			if err != nil {
				return written, errno(err)
			}
			done += n
		}
		written += int64(len(page))
		s.durable = max(s.durable, start+int64(len(page)))
	}
	if s.durable != s.size {
		if err := unix.Ftruncate(s.fd, s.size); err != nil {
			return written, errno(err)
		}
		s.durable = s.size
	}
	if sync {
		var err error
		if datasync {
			err = unix.Fdatasync(s.fd)
		} else {
			err = unix.Fsync(s.fd)
		}
		if err != nil {
			return written, errno(err)
		}
	}
	return written, 0
}

// settle empties a flushed state's pages, counts them off and drops the clean state from
// the overlay. The caller holds s.mu and releases it after.
func (o *overlay) settle(s *fileState) {
	o.dirtyBytes.Add(-int64(len(s.pages)) * pageSize)
	s.pages = map[int64][]byte{}
	s.floor = s.durable
	s.since = time.Time{}
	if s.dirty() {
		return
	}
	o.mu.Lock()
	if o.files[s.ino] == s {
		delete(o.files, s.ino)
	}
	o.mu.Unlock()
	s.dead = true
	unix.Close(s.fd)
}

// sync makes a held file durable: the caller holds s.mu and releases it after.
func (o *overlay) sync(s *fileState, datasync bool) syscall.Errno {
	written, e := s.flush(true, datasync)
	o.syncedBytes.Add(written)
	if e == 0 {
		o.settle(s)
	}
	return e
}

// account notes that s holds delta more bytes of pages (fewer when negative), and when it
// became dirty. The caller holds s.mu.
func (o *overlay) account(s *fileState, delta int64) {
	if s.since.IsZero() && s.dirty() {
		s.since = time.Now()
	}
	o.dirtyBytes.Add(delta)
}

// bound writes files through, the oldest dirty first, while the overlay holds more than its
// bound. The caller holds no state's lock.
func (o *overlay) bound() {
	for o.dirtyBytes.Load() > o.maxDirty && !o.cut.Load() {
		oldest := o.oldest()
		if oldest == nil {
			return
		}
		written, e := oldest.flush(false, false)
		o.throughBytes.Add(written)
		o.throughTimes.Add(1)
		if e == 0 {
			o.settle(oldest)
		}
		oldest.mu.Unlock()
		if e != 0 {
			return
		}
	}
}

// oldest returns the locked state that became dirty first, or nil.
func (o *overlay) oldest() *fileState {
	o.mu.Lock()
	var found *fileState
	for _, st := range o.files {
		if len(st.pages) > 0 && (found == nil || st.since.Before(found.since)) {
			found = st
		}
	}
	o.mu.Unlock()
	if found == nil {
		return nil
	}
	found.mu.Lock()
	if found.dead {
		found.mu.Unlock()
		return o.oldest()
	}
	return found
}

// states returns every state the overlay holds, unlocked.
func (o *overlay) states() []*fileState {
	o.mu.Lock()
	defer o.mu.Unlock()
	all := make([]*fileState, 0, len(o.files))
	for _, st := range o.files {
		all = append(all, st)
	}
	return all
}

// expire writes through every file dirty for at least age (the kernel model's writeback),
// or every file when age is zero and sync is set (a sync of the whole filesystem).
func (o *overlay) expire(age time.Duration, sync bool) syscall.Errno {
	now := time.Now()
	var first syscall.Errno
	for _, st := range o.states() {
		st.mu.Lock()
		if st.dead || o.cut.Load() || now.Sub(st.since) < age {
			st.mu.Unlock()
			continue
		}
		written, e := st.flush(sync, false)
		if sync {
			o.syncedBytes.Add(written)
		} else {
			o.writebackBytes.Add(written)
		}
		if e == 0 {
			o.settle(st)
		} else if first == 0 {
			first = e
		}
		st.mu.Unlock()
	}
	return first
}

// drop freezes every state and returns the dirty bytes and files it let go: the cut. Every
// operation after it fails.
func (o *overlay) drop() (int64, int) {
	o.cut.Store(true)
	bytes, files := int64(0), 0
	for _, st := range o.states() {
		st.mu.Lock()
		if !st.dead && st.dirty() {
			files++
			bytes += int64(len(st.pages)) * pageSize
		}
		st.dead = true
		// The state's lock is kept: a flush that waits on it never runs.
	}
	return bytes, files
}

// held returns the dirty bytes and files the overlay holds.
func (o *overlay) held() (int64, int) {
	bytes, files := int64(0), 0
	for _, st := range o.states() {
		st.mu.Lock()
		if !st.dead && st.dirty() {
			files++
			bytes += int64(len(st.pages)) * pageSize
		}
		st.mu.Unlock()
	}
	return bytes, files
}

func errno(err error) syscall.Errno {
	if err == nil {
		return 0
	}
	if e, ok := err.(syscall.Errno); ok {
		return e
	}
	return syscall.EIO
}
