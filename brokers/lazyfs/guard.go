package main

import (
	"bufio"
	"fmt"
	"log"
	"os"
	"os/exec"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// guardian is this program's end of the guard: a child process in a session of its own
// that reads a pipe only this program holds. When the pipe closes without a "done" (this
// program died: SIGKILL, a crash), the guard detaches the mount lazily, so that no dead
// mount ("transport endpoint is not connected") stays behind.
type guardian struct {
	pipe  *os.File
	mount string
}

func startGuard(mountPoint string) (*guardian, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(self, "guard", mountPoint)
	cmd.Stdin = r
	cmd.Stdout = os.Stderr
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		r.Close()
		w.Close()
		return nil, err
	}
	r.Close()
	go cmd.Wait()
	return &guardian{pipe: w, mount: mountPoint}, nil
}

// mounted tells the guard which mount to detach: the one at the mount point now.
func (g *guardian) mounted() {
	if id := mountID(g.mount); id != "" {
		fmt.Fprintf(g.pipe, "mounted %s\n", id)
	}
}

// done tells the guard the mount was ended here: it exits without doing anything.
func (g *guardian) done() {
	fmt.Fprintln(g.pipe, "done")
	g.pipe.Close()
}

// guard is the guard process: it waits for the pipe on its stdin to close.
func guard(mountPoint string) {
	id, done := "", false
	lines := bufio.NewScanner(os.Stdin)
	for lines.Scan() {
		switch fields := strings.Fields(lines.Text()); {
		case len(fields) == 2 && fields[0] == "mounted":
			id = fields[1]
		case len(fields) == 1 && fields[0] == "done":
			done = true
		}
	}
	if done {
		return
	}
	now := mountID(mountPoint)
	if now == "" || (id != "" && now != id) {
		return // not mounted, or mounted anew by someone else
	}
	log.Printf("lazyfs guard: the filesystem process is gone: detaching %s", mountPoint)
	detach(mountPoint)
}

// mountID is the id of the lazyfs mount at mountPoint in /proc/self/mountinfo ("" if none).
func mountID(mountPoint string) string {
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return ""
	}
	id := ""
	for _, line := range strings.Split(string(data), "\n") {
		fields := strings.Fields(line)
		sep := -1
		for i, f := range fields {
			if f == "-" {
				sep = i
				break
			}
		}
		if sep < 0 || len(fields) < sep+2 || len(fields) < 5 {
			continue
		}
		if unescape(fields[4]) == mountPoint && fields[sep+1] == "fuse.lazyfs" {
			id = fields[0] // the last one is on top
		}
	}
	return id
}

// unescape undoes mountinfo's octal escapes (\040 for a space).
func unescape(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			var c int
			if _, err := fmt.Sscanf(s[i+1:i+4], "%o", &c); err == nil {
				b.WriteByte(byte(c))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// detach unmounts mountPoint lazily: at once for new lookups, fully once no file is open.
func detach(mountPoint string) {
	if os.Geteuid() == 0 && unix.Unmount(mountPoint, unix.MNT_DETACH) == nil {
		return
	}
	out, err := exec.Command("fusermount3", "-u", "-z", mountPoint).CombinedOutput()
	if err != nil {
		log.Printf("lazyfs: fusermount3 -u -z %s: %v: %s", mountPoint, err, strings.TrimSpace(string(out)))
	}
}
