//go:build !linux

package cas

import "os"

var directOff = false

// setDirect reports false: direct blob writes are used on Linux only.
func setDirect(f *os.File, on bool) bool { return false }

func alignOf(b []byte) uintptr { return 0 }

func isInvalid(err error) bool { return false }
