//go:build !linux

package cas

import "os"

// writebackFile is the file itself where the kernel offers no early writeback.
type writebackFile struct{ *os.File }

func newWritebackFile(f *os.File) writebackFile { return writebackFile{f} }

// startWriteback does nothing where the kernel offers no early writeback.
func startWriteback(*os.File) {}
