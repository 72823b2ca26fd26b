package main

import (
	"bytes"
	"math/rand"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// model is the file as its readers should see it, and as the backing file should hold it
// after a sync.
type model struct{ seen, durable []byte }

func (m *model) write(data []byte, off int) {
	if end := off + len(data); end > len(m.seen) {
		m.seen = append(m.seen, make([]byte, end-len(m.seen))...)
	}
	copy(m.seen[off:], data)
}

func (m *model) truncate(size int) {
	if size <= len(m.seen) {
		m.seen = m.seen[:size]
	} else {
		m.seen = append(m.seen, make([]byte, size-len(m.seen))...)
	}
}

// TestOverlayAgainstAModel runs random writes, truncations, reads and syncs on one file
// and compares what is read, and what the backing file holds, with the model.
func TestOverlayAgainstAModel(t *testing.T) {
	rng := rand.New(rand.NewSource(7))
	for trial := 0; trial < 50; trial++ {
		path := filepath.Join(t.TempDir(), "f")
		start := make([]byte, rng.Intn(3*pageSize))
		rng.Read(start)
		if err := os.WriteFile(path, start, 0o644); err != nil {
			t.Fatal(err)
		}
		ov := newOverlay(1 << 30)
		m := &model{seen: bytes.Clone(start), durable: bytes.Clone(start)}
		hold := func() *fileState {
			st, e := ov.hold(1, func() (int, error) { return unix.Open(path, unix.O_RDWR, 0) })
			if e != 0 {
				t.Fatal(e)
			}
			return st
		}
		for step := 0; step < 60; step++ {
			st := hold()
			switch op := rng.Intn(10); {
			case op < 5:
				data := make([]byte, 1+rng.Intn(2*pageSize))
				rng.Read(data)
				off := rng.Intn(4 * pageSize)
				added, e := st.write(data, int64(off))
				if e != 0 {
					t.Fatal(e)
				}
				ov.account(st, added)
				m.write(data, off)
			case op < 7:
				size := rng.Intn(4 * pageSize)
				ov.account(st, -st.truncate(int64(size)))
				m.truncate(size)
			case op < 8:
				if e := ov.sync(st, rng.Intn(2) == 0); e != 0 {
					t.Fatal(e)
				}
				m.durable = bytes.Clone(m.seen)
			}
			st.mu.Unlock()
			st = hold()
			got := make([]byte, 7*pageSize)
			n, e := st.read(got, 0)
			if e != 0 {
				t.Fatal(e)
			}
			if st.size != int64(len(m.seen)) || !bytes.Equal(got[:n], m.seen) {
				t.Fatalf("trial %d step %d: read %d bytes, want %d (size %d)", trial, step, n, len(m.seen), st.size)
			}
			st.mu.Unlock()
			on, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(on, m.durable) {
				t.Fatalf("trial %d step %d: the backing file differs from the last sync", trial, step)
			}
		}
		if st, _ := ov.find(1); st != nil {
			if got, want := ov.dirtyBytes.Load(), int64(len(st.pages))*pageSize; got != want {
				t.Fatalf("dirty bytes counted %d, held %d", got, want)
			}
			st.mu.Unlock()
		} else if got := ov.dirtyBytes.Load(); got != 0 {
			t.Fatalf("dirty bytes counted %d, none held", got)
		}
	}
}

// TestTheBoundWritesThroughTheOldest writes past the bound and finds the first file written
// through, and counted.
func TestTheBoundWritesThroughTheOldest(t *testing.T) {
	dir := t.TempDir()
	ov := newOverlay(3 * pageSize)
	for i, name := range []string{"first", "second"} {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		st, e := ov.hold(uint64(i+1), func() (int, error) { return unix.Open(path, unix.O_RDWR, 0) })
		if e != 0 {
			t.Fatal(e)
		}
		added, _ := st.write(bytes.Repeat([]byte{'x'}, 2*pageSize), 0)
		ov.account(st, added)
		st.mu.Unlock()
		ov.bound()
	}
	if first, _ := os.ReadFile(filepath.Join(dir, "first")); len(first) != 2*pageSize {
		t.Fatalf("the oldest file was not written through: %d bytes", len(first))
	}
	if second, _ := os.ReadFile(filepath.Join(dir, "second")); len(second) != 0 {
		t.Fatalf("the newer file was written through")
	}
	if ov.throughTimes.Load() != 1 || ov.throughBytes.Load() != 2*pageSize || ov.dirtyBytes.Load() != 2*pageSize {
		t.Fatalf("counted %d times, %d bytes, %d dirty", ov.throughTimes.Load(), ov.throughBytes.Load(), ov.dirtyBytes.Load())
	}
}
