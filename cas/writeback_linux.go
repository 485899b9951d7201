package cas

import (
	"os"

	"golang.org/x/sys/unix"
)

// writebackChunk is how much a writebackFile writes before it asks the kernel
// to start writing it to disk.
const writebackChunk = 8 << 20

// writebackFile writes to f and starts the kernel's writeback of every full
// chunk as soon as it is written (sync_file_range, SYNC_FILE_RANGE_WRITE), so
// that the fsync that makes the file durable waits only for the last chunk.
// Durability is unchanged: it still comes from that fsync.
type writebackFile struct {
	f       *os.File
	off     int64 // bytes written
	flushed int64 // bytes handed to writeback
}

func newWritebackFile(f *os.File) *writebackFile { return &writebackFile{f: f} }

func (w *writebackFile) Write(p []byte) (int, error) {
	n, err := w.f.Write(p)
	w.off += int64(n)
	if w.off-w.flushed >= writebackChunk {
		// Advisory: a failure here only means the fsync does all the work.
		_ = unix.SyncFileRange(int(w.f.Fd()), w.flushed, w.off-w.flushed, unix.SYNC_FILE_RANGE_WRITE)
		w.flushed = w.off
	}
	return n, err
}

// startWriteback asks the kernel to start writing f's dirty pages to disk
// without waiting for them, so that a later fsync finds them written.
// Advisory: a failure only leaves the work to the fsync.
func startWriteback(f *os.File) {
	_ = unix.SyncFileRange(int(f.Fd()), 0, 0, unix.SYNC_FILE_RANGE_WRITE)
}
