package main

import (
	"encoding/json"
	"log"
	"os"
	"sync"
	"time"
)

// reporter writes the status file: the state, the models and the counters, as JSON.
type reporter struct {
	mu    sync.Mutex
	path  string
	o     options
	lz    *lazyFS
	state string // mounted, cut or unmounted
	last  []byte

	droppedBytes int64
	droppedFiles int
	undone       int
}

// status is the status file's content.
type status struct {
	PID                 int    `json:"pid"`
	State               string `json:"state"`
	Mount               string `json:"mount"`
	Backing             string `json:"backing"`
	Writeback           string `json:"writeback"`
	Metadata            string `json:"metadata"`
	MaxDirtyBytes       int64  `json:"max_dirty_bytes"`
	DirtyBytes          int64  `json:"dirty_bytes"`
	PendingMetadata     int64  `json:"pending_metadata"`
	CommittedMetadata   int64  `json:"committed_metadata"`
	SyncedBytes         int64  `json:"synced_bytes"`
	WritebackBytes      int64  `json:"writeback_bytes"`
	WrittenThroughBytes int64  `json:"written_through_bytes"`
	WrittenThroughTimes int64  `json:"written_through_times"`
	DroppedBytes        int64  `json:"dropped_bytes"`
	DroppedFiles        int    `json:"dropped_files"`
	UndoneMetadata      int    `json:"undone_metadata"`
	Updated             string `json:"updated"`
}

func (r *reporter) cut(bytes int64, files, undone int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.state, r.droppedBytes, r.droppedFiles, r.undone = "cut", bytes, files, undone
}

func (r *reporter) unmounted(bytes int64, files int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.state, r.droppedBytes, r.droppedFiles = "unmounted", bytes, files
}

// write replaces the status file when anything but the time changed.
func (r *reporter) write() {
	if r.path == "" {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	ov, jn := r.lz.ov, r.lz.jn
	s := status{
		PID: os.Getpid(), State: r.state, Mount: r.o.mount, Backing: r.o.backing,
		Writeback: r.o.writeback, Metadata: r.o.metadata, MaxDirtyBytes: ov.maxDirty,
		DirtyBytes: ov.dirtyBytes.Load(), PendingMetadata: jn.pending.Load(),
		CommittedMetadata: jn.committed.Load(), SyncedBytes: ov.syncedBytes.Load(),
		WritebackBytes: ov.writebackBytes.Load(), WrittenThroughBytes: ov.throughBytes.Load(),
		WrittenThroughTimes: ov.throughTimes.Load(), DroppedBytes: r.droppedBytes,
		DroppedFiles: r.droppedFiles, UndoneMetadata: r.undone,
	}
	body, _ := json.Marshal(s)
	if string(body) == string(r.last) {
		return
	}
	r.last = body
	s.Updated = time.Now().UTC().Format(time.RFC3339Nano)
	data, _ := json.MarshalIndent(s, "", "  ")
	tmp := r.path + ".tmp"
	if err := os.WriteFile(tmp, append(data, '\n'), 0o644); err != nil {
		log.Printf("lazyfs: status: %v", err)
		return
	}
	if err := os.Rename(tmp, r.path); err != nil {
		log.Printf("lazyfs: status: %v", err)
	}
}
