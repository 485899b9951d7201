package cas

import (
	"errors"
	"os"
	"unsafe"

	"golang.org/x/sys/unix"
)

// directOff turns direct blob writes off (tests of the fallback).
var directOff = false

// setDirect sets or clears O_DIRECT on f and reports whether it is now set.
func setDirect(f *os.File, on bool) bool {
	if on && directOff {
		return false
	}
	fd := int(f.Fd())
	fl, err := unix.FcntlInt(uintptr(fd), unix.F_GETFL, 0)
	if err != nil {
		return false
	}
	if on {
		fl |= unix.O_DIRECT
	} else {
		fl &^= unix.O_DIRECT
	}
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_SETFL, fl); err != nil {
		return false
	}
	return on
}

func alignOf(b []byte) uintptr { return uintptr(unsafe.Pointer(unsafe.SliceData(b))) % directAlign }

func isInvalid(err error) bool { return errors.Is(err, unix.EINVAL) }
